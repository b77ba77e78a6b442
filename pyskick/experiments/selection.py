"""Choosing the rows of Table 1 to run: the registered methods (:mod:`pyskick.methods`), in
table order, and the checks that they can run.

The rows are not listed here: the built-ins (:mod:`pyskick.builtins.methods`) and plugins
register them through ``pyskick_register_methods``. ``one-view`` is the pretrained model itself,
evaluated with one glimpse (T = 1); every other method trains the look-around policy from it
(docs/paper-reference.md §4.1, §5.7, §6).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyskick.errors import UserError
from pyskick.methods import ONE_VIEW, Method
from pyskick.registry import Registries

__all__ = [
    "ONE_VIEW",
    "Method",
    "available_methods",
    "check_available",
    "method_names",
    "method_sidekick_options",
    "registered_methods",
    "select_methods",
]


def _registries(registries: Registries | None) -> Registries:
    from pyskick.plugins import get_registries

    return get_registries() if registries is None else registries


def registered_methods(registries: Registries | None = None) -> list[Method]:
    """Every registered method, in table order (default: the process's plugins)."""
    table = _registries(registries).method
    return [table.get(name) for name in table.names()]


def method_names(registries: Registries | None = None) -> list[str]:
    """The registered methods' names, in table order."""
    return _registries(registries).method.names()


def select_methods(
    names: Sequence[str] | None = None, registries: Registries | None = None
) -> list[Method]:
    """The methods called ``names`` in table order (all of them for None).

    ``one-view`` is always included: every other method starts from it and is compared with it.

    Raises:
        ValueError: an unknown or repeated name (listing the registered ones), or an empty
            selection.
    """
    every = registered_methods(registries)
    if names is None:
        return every
    if isinstance(names, str):
        raise TypeError("names must be a sequence of method names, not a string")
    valid = [method.name for method in every]
    unknown = [name for name in names if name not in valid]
    if unknown:
        raise UserError(
            f"unknown method {unknown[0]!r}; valid methods: {', '.join(valid)} (plugins add "
            "more: `pyskick plugins --all` lists them)"
        )
    if len(set(names)) != len(names):
        raise UserError("a method is listed twice")
    if not names:
        raise UserError("no method selected")
    if ONE_VIEW not in valid:
        raise UserError(f"no plugin registers the {ONE_VIEW!r} method every row starts from")
    chosen = {ONE_VIEW, *names}
    return [method for method in every if method.name in chosen]


def missing_plugins(method: Method, registries: Registries) -> list[str]:
    """The names ``method`` needs that no plugin registers, as ``"<kind> <name>"``."""
    if not method.trained:
        return []
    return [
        f"{kind} {getattr(method, kind)!r}"
        for kind in ("sidekick", "actor", "critic")
        if getattr(method, kind) not in registries[kind]
    ]


def available_methods(registries: Registries | None = None) -> list[Method]:
    """The methods whose every name is registered, in table order."""
    registries = _registries(registries)
    return [m for m in registered_methods(registries) if not missing_plugins(m, registries)]


def method_sidekick_options(method: Method, registries: Registries) -> dict[str, Any]:
    """The sidekick options ``method`` fixes, parsed and checked against its sidekick's
    declarations.

    Raises:
        ValueError: an option the sidekick does not declare, or a bad value.
    """
    declared = {o.name: o for o in registries["sidekick"].get(method.sidekick).options}
    out = {}
    for key, value in method.sidekick_options.items():
        if key not in declared:
            valid = ", ".join(sorted(declared)) or "none"
            raise ValueError(
                f"method {method.name} (plugin {method.plugin}) sets option {key!r} that "
                f"sidekick {method.sidekick!r} does not have; valid options: {valid}"
            )
        out[key] = declared[key].parse(value, f"method {method.name}")
    return out


def check_available(methods: Sequence[Method], registries: Registries) -> None:
    """Raise if a method needs a name no plugin registers, or fixes a sidekick option its
    sidekick does not have.

    Raises:
        ValueError: naming the first such method and what it lacks.
    """
    for method in methods:
        missing = missing_plugins(method, registries)
        if missing:
            raise UserError(
                f"method {method.name} (plugin {method.plugin}) needs {' and '.join(missing)}, "
                "which no installed plugin registers (see `pyskick plugins --all`; leave it out "
                "with --methods)"
            )
        if method.trained:
            method_sidekick_options(method, registries)
