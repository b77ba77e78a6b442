"""The methods of the paper's Table 1, each an (actor, critic, sidekick) triple of registry names.

``one-view`` is the pretrained model itself, evaluated with one glimpse (T = 1); every other
method trains the look-around policy from it (docs/paper-reference.md §4.1, §5.7, §6).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyskick.registry import Registries


@dataclass(frozen=True)
class Method:
    """One row of Table 1.

    Attributes:
        name: the row's name in the paper (``"ours(rew)+ac"``).
        actor: registered actor name (``TrainConfig.actor``).
        critic: registered critic name (``TrainConfig.critic``).
        sidekick: registered sidekick name.
        trained: False for ``one-view`` (the pretrained model, no policy training).
    """

    name: str
    actor: str = "learned"
    critic: str = "average"
    sidekick: str = "none"
    trained: bool = True


ONE_VIEW = "one-view"

METHODS: tuple[Method, ...] = (
    Method(ONE_VIEW, trained=False),
    Method("rnd-actions", actor="random"),
    Method("rnd-rewards", sidekick="rnd-rewards"),
    Method("ltla"),
    Method("asymm-ac", critic="asymm-critic"),
    Method("expert-clone", sidekick="expert-clone"),
    Method("ours(rew)", sidekick="rew"),
    Method("ours(demo)", sidekick="demo"),
    Method("ours(rew)+ac", critic="critic", sidekick="rew"),
    Method("ours(demo)+ac", critic="critic", sidekick="demo"),
    Method("demo-actions", actor="demo-actions"),
)
"""Every method, in the order of the paper's Table 1."""

METHOD_NAMES: tuple[str, ...] = tuple(method.name for method in METHODS)


def select_methods(names: Sequence[str] | None = None) -> list[Method]:
    """The methods called ``names`` in Table 1's order (all of them for None).

    ``one-view`` is always included: every other method starts from it and is compared with it.

    Raises:
        ValueError: an unknown or repeated name, or an empty selection.
    """
    if names is None:
        return list(METHODS)
    if isinstance(names, str):
        raise TypeError("names must be a sequence of method names, not a string")
    unknown = [name for name in names if name not in METHOD_NAMES]
    if unknown:
        raise ValueError(f"unknown method {unknown[0]!r}; valid methods: {', '.join(METHOD_NAMES)}")
    if len(set(names)) != len(names):
        raise ValueError("a method is listed twice")
    if not names:
        raise ValueError("no method selected")
    chosen = {ONE_VIEW, *names}
    return [method for method in METHODS if method.name in chosen]


def missing_plugins(method: Method, registries: Registries) -> list[str]:
    """The names ``method`` needs that no plugin registers, as ``"<kind> <name>"``."""
    missing = []
    if method.trained and method.sidekick not in registries["sidekick"]:
        missing.append(f"sidekick {method.sidekick!r}")
    for kind in ("actor", "critic"):
        name = getattr(method, kind)
        if name not in registries[kind]:
            missing.append(f"{kind} {name!r}")
    return missing


def available_methods(registries: Registries) -> list[Method]:
    """The methods whose every name is registered, in Table 1's order."""
    return [method for method in METHODS if not missing_plugins(method, registries)]


def check_available(methods: Sequence[Method], registries: Registries) -> None:
    """Raise if a method needs a name no plugin registers.

    Raises:
        ValueError: naming the first such method and what it lacks.
    """
    for method in methods:
        missing = missing_plugins(method, registries)
        if missing:
            raise ValueError(
                f"method {method.name} needs {' and '.join(missing)}, which no installed plugin "
                "registers (see `pyskick plugins --all`; leave it out with --methods)"
            )
