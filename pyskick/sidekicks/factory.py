"""Building a registered sidekick by name (``--sidekick NAME``, ``TrainConfig.sidekick``)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True)
class RunSidekick:
    """A run's sidekick, resolved once (:func:`for_run`): its registry entry and the options
    the run uses (every declared option, checked, defaults filled in)."""

    entry: Entry
    options: dict[str, OptionValue]

    @property
    def name(self) -> str:
        """The registered name (an alias resolved to it)."""
        return self.entry.name

    def build(
        self,
        *,
        one_view: str | os.PathLike[str] | None,
        spec: GridSpec | None,
        config: TrainConfig | None,
        channel_mean: Sequence[float] | None = None,
    ) -> Sidekick:
        """Call the registered factory with the resolved options.

        The factory gets ``one_view=``, ``spec=``, ``channel_mean=`` (default
        ``spec.channel_mean``), ``config=`` and ``options=``. The result must be a
        :class:`Sidekick`; its ``name`` is set to the registered name and its ``options`` to
        the resolved options (what runs record and score caches are keyed by). It is not
        prepared.

        Raises:
            TypeError: the factory did not return a :class:`Sidekick`.
        """
        entry = self.entry
        if channel_mean is None and spec is not None:
            channel_mean = spec.channel_mean
        sidekick = entry.factory(
            one_view=None if one_view is None else Path(one_view),
            spec=spec,
            channel_mean=None if channel_mean is None else tuple(float(m) for m in channel_mean),
            config=config,
            options=dict(self.options),
        )
        if not isinstance(sidekick, Sidekick):
            raise TypeError(
                f"sidekick {entry.name!r} (plugin {entry.plugin}) built a "
                f"{type(sidekick).__name__}, not a pyskick.sidekicks.Sidekick"
            )
        sidekick.name = entry.name
        sidekick.options = dict(self.options)  # a dict: sidekicks are deep-copied (actors)
        return sidekick


def for_run(
    name: str | None,
    given: Mapping[str, Any] | None = None,
    *,
    spec: GridSpec | None = None,
    config: TrainConfig | None = None,
    recorded: Mapping[str, Any] | None = None,
    typed: tuple[str, Mapping[str, Any]] | None = None,
    field: str | None = None,
) -> RunSidekick:
    """The one resolver of a run's sidekick: its name and options, new or resumed.

    The only reader of what a resumed run recorded about its sidekick, and the only place the
    resume rules live (the CLI's ``train``, ``score``, ``reproduce`` and the trainer all come
    here). The registry is asked once.

    - A new run (``recorded`` None) resolves ``given`` with the defaults of this dataset
      (``spec``) and ``config``.
    - A resumed run continues with the sidekick it recorded (``name`` None: whichever that
      was; another name is refused) and keeps the options it recorded when it started (so a
      longer ``--epochs`` does not move a schedule that depends on it); options given again
      must agree with them. A run recorded by a pyskick without sidekick options is refused.

    Args:
        name: the sidekick asked for (a registered name or alias); None: the recorded one, or
            ``"none"`` for a new run.
        given: the options set by the user (strings from the command line are parsed).
        spec: the dataset's geometry; None for viewgrids built in memory.
        config: the run's config (defaults may depend on it).
        recorded: a resumed train run's recorded config (``config.json`` or its checkpoint's
            ``config``): its ``sidekick`` and ``sidekick_options``.
        typed: ``(owner, options)`` as typed in a config file's ``[sidekick]`` table, checked
            strictly first (a string is not an int) so that an error names the file.
        field: what held the name, named in an unknown name's error.

    Raises:
        UnknownNameError: (a ValueError) no such sidekick; lists the valid names.
        UserError: an unknown option or bad value, another sidekick than the resumed run's, an
            option that differs from the recorded one (naming both), or a run recorded
            without sidekick options.
    """
    from pyskick.options import check_typed_options

    if recorded is not None:
        if "sidekick_options" not in recorded and recorded.get("sidekick", "none") != "none":
            raise UserError(
                "the run was started by a pyskick without sidekick options; resume it with "
                "that version"
            )
        used = str(recorded.get("sidekick", "none"))
        entry = sidekick_entry(used if name is None else name, field=field)
        if used != entry.name and used not in entry.aliases:
            raise UserError(f"cannot resume: the run used sidekick {used!r}, not {name!r}")
    else:
        entry = sidekick_entry("none" if name is None else name, field=field)
    owner = f"sidekick {entry.name!r}"
    if typed is not None and typed[1]:
        check_typed_options(entry.options, typed[1], owner=f"{typed[0]}: {owner}")
    if recorded is None:
        options = resolve_options(entry.options, given or {}, owner=owner, spec=spec, config=config)
        return RunSidekick(entry, options)
    kept = dict(recorded.get("sidekick_options") or {})
    merged = resolve_options(
        entry.options, {**kept, **(given or {})}, owner=owner, spec=spec, config=config
    )
    for key in given or {}:
        if key in kept and merged[key] != kept[key]:
            raise UserError(
                f"cannot resume: {owner} option {key} is {merged[key]!r} but the run used "
                f"{kept[key]!r}"
            )
    return RunSidekick(entry, merged)


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
    """Build the registered sidekick ``name`` for a new run: :func:`for_run` (options
    resolved with the defaults of ``spec`` and ``config``), then :meth:`RunSidekick.build`.

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
    run = for_run(name, options, spec=spec, config=config, field=field)
    return run.build(one_view=one_view, spec=spec, config=config, channel_mean=channel_mean)


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
