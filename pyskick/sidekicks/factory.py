"""Building a registered sidekick by name (``--sidekick NAME``, ``TrainConfig.sidekick``)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyskick.errors import UserError
from pyskick.options import OptionValue, resolve_options
from pyskick.sidekicks.base import Sidekick

if TYPE_CHECKING:
    from pyskick.config import TrainConfig
    from pyskick.data.spec import GridSpec
    from pyskick.registry import Entry


def sidekick_entry(name: str, *, field: str | None = None) -> Entry:
    """The registry entry of sidekick ``name``.

    Raises:
        UnknownNameError: (a ValueError) no such sidekick; lists the valid names.
    """
    from pyskick.plugins import lookup

    return lookup("sidekick", name, field=field)


def run_options(
    name: str,
    given: Mapping[str, Any] | None = None,
    *,
    spec: GridSpec | None = None,
    config: TrainConfig | None = None,
    recorded: Mapping[str, Any] | None = None,
) -> dict[str, OptionValue]:
    """The options a run of sidekick ``name`` uses.

    A new run (``recorded`` None) resolves ``given`` with the defaults of this dataset and
    config. A resumed run keeps the options it recorded when it started (so a longer
    ``--epochs`` does not move a schedule that depends on it); options given again must agree
    with them.

    Raises:
        ValueError: an unknown option or bad value, or a given option that differs from the
            recorded one (naming both).
    """
    entry = sidekick_entry(name)
    owner = f"sidekick {entry.name!r}"
    if recorded is None:
        return resolve_options(entry.options, given or {}, owner=owner, spec=spec, config=config)
    merged = resolve_options(
        entry.options, {**recorded, **(given or {})}, owner=owner, spec=spec, config=config
    )
    for key in given or {}:
        if key in recorded and merged[key] != recorded[key]:
            raise UserError(
                f"cannot resume: {owner} option {key} is {merged[key]!r} but the run used "
                f"{recorded[key]!r}"
            )
    return merged


def make_sidekick(
    name: str,
    *,
    one_view: str | os.PathLike[str] | None,
    spec: GridSpec | None,
    config: TrainConfig | None,
    options: Mapping[str, Any] | None = None,
    field: str | None = None,
    channel_mean: Sequence[float] | None = None,
) -> Sidekick:
    """Call the registered factory of sidekick ``name`` with resolved options.

    The factory gets ``one_view=``, ``spec=``, ``channel_mean=``, ``config=`` and ``options=``
    (every declared option, checked, defaults filled in from ``spec`` and ``config``). The
    result must be a :class:`Sidekick`; its ``name`` is set to the registered name and its
    ``options`` to the resolved options (what runs record and score caches are keyed by). It
    is not prepared.

    Args:
        name: a registered sidekick name or alias.
        one_view: the one-view run (or checkpoint) that scores views.
        spec: the dataset's geometry; None for viewgrids built in memory.
        config: the run's config.
        options: what the user set (strings from the command line are parsed).
        field: what held the name, named in the error (e.g. ``"TrainConfig.sidekick"``).
        channel_mean: the dataset's per-channel mean (0-255), what the views are normalised
            by; default ``spec.channel_mean`` (None without a spec).

    Raises:
        UnknownNameError: (a ValueError) no such sidekick; lists the valid names.
        ValueError: an unknown option or a bad value.
        TypeError: the factory did not return a :class:`Sidekick`.
    """
    entry = sidekick_entry(name, field=field)
    resolved = resolve_options(
        entry.options, options or {}, owner=f"sidekick {entry.name!r}", spec=spec, config=config
    )
    if channel_mean is None and spec is not None:
        channel_mean = spec.channel_mean
    sidekick = entry.factory(
        one_view=None if one_view is None else Path(one_view),
        spec=spec,
        channel_mean=None if channel_mean is None else tuple(float(m) for m in channel_mean),
        config=config,
        options=dict(resolved),
    )
    if not isinstance(sidekick, Sidekick):
        raise TypeError(
            f"sidekick {entry.name!r} (plugin {entry.plugin}) built a {type(sidekick).__name__}, "
            "not a pyskick.sidekicks.Sidekick"
        )
    sidekick.name = entry.name
    sidekick.options = dict(resolved)  # a dict: sidekicks are deep-copied (actors)
    return sidekick


def scoring_inputs(
    name: str, one_view: Path | None, channel_mean: Sequence[float] | None
) -> tuple[Path, tuple[float, ...]]:
    """What a sidekick that scores views with the one-view model needs, from its factory's
    ``one_view`` and ``channel_mean``, or a one-line refusal naming the sidekick and what is
    missing (for plugins' factories too).

    Raises:
        UserError: no one-view run, or no channel mean (viewgrids without a spec and no
            ``channel_mean=`` given to :func:`make_sidekick`).
    """
    if one_view is None:
        raise UserError(
            f"sidekick {name!r} needs the one-view run that scores the views: train from a "
            "one-view model (--init, or init= in Python)"
        )
    if channel_mean is None:
        raise UserError(
            f"sidekick {name!r} needs the dataset's channel mean: pass spec= or channel_mean= "
            "to make_sidekick"
        )
    return one_view, tuple(channel_mean)
