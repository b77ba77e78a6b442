"""Sidekick options: what each sidekick lets a user set, declared once, validated once.

A bottom-layer module (no pyskick imports): the registry, the config and plugins' hook
modules read it without importing torch or the sidekick classes.

A sidekick declares its options when it registers (``register(name, factory,
options=[SidekickOption(...), ...])``); users set them with ``--sidekick-option KEY=VALUE``
(``train``, ``score``, ``reproduce``) or a ``[sidekick]`` table in the ``--config`` TOML;
:func:`resolve_options` checks the keys and values and fills in the defaults, and the factory
receives the complete dict as ``options=``. The resolved options are recorded in the run's
``TrainConfig.sidekick_options`` (``config.json`` and every checkpoint); a resumed run keeps
them and refuses different ones.

A default may depend on the dataset and the run's config (``default=lambda spec, config:
...``): the reward sidekick's NMS peaks follow the dataset preset, and the schedules are
scaled to the run's epochs. Defaults are resolved once, when a run starts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyskick.errors import UserError

OptionValue = int | float | bool | str
DefaultFn = Callable[[Any, Any], OptionValue]
"""``default(spec, config)``: a :class:`~pyskick.data.spec.GridSpec` and a
:class:`~pyskick.config.TrainConfig`, either of them None outside a run (typed ``Any``: this
bottom-layer module names no class of a higher layer, not even for type checkers)."""

_TYPES: dict[type, str] = {int: "an int", float: "a number", bool: "true or false", str: "a string"}
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


@dataclass(frozen=True)
class SidekickOption:
    """One option a sidekick accepts.

    Attributes:
        name: the key users type (snake_case, like ``decay_every``).
        type: ``int``, ``float``, ``bool`` or ``str``.
        default: the value, or ``default(spec, config)`` computing it from the dataset's grid
            spec and the run's config (either may be None outside a run).
        help: one line for ``pyskick plugins --all``.
        minimum: smallest allowed value (numbers).
        above_minimum: the value must be strictly greater than ``minimum``.
        choices: the allowed values (strings).
    """

    name: str
    type: type
    default: OptionValue | DefaultFn
    help: str
    minimum: float | None = None
    above_minimum: bool = False
    choices: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"option name must be an identifier, got {self.name!r}")
        if self.type not in _TYPES:
            raise TypeError(f"option {self.name}: type must be int, float, bool or str")

    def describe(self) -> str:
        """``name (type >= minimum, default ...): help``, for listings."""
        kind = self.type.__name__
        if self.minimum is not None:
            kind += f" {'>' if self.above_minimum else '>='} {self.minimum:g}"
        if self.choices is not None:
            kind = " | ".join(self.choices)
        default = "depends on the run" if callable(self.default) else repr(self.default)
        return f"{self.name} ({kind}; default {default}): {self.help}"

    def default_for(self, spec: Any, config: Any) -> OptionValue:
        """The default for this dataset and run."""
        value = self.default(spec, config) if callable(self.default) else self.default
        return self.parse(value, "the default")

    def parse(self, value: Any, owner: str, *, typed: bool = False) -> OptionValue:
        """``value`` (a CLI string or a TOML/Python value) as this option's type, checked.

        Args:
            value: the value given.
            owner: who declares the option, for the message (e.g. ``"sidekick 'rew'"``).
            typed: ``value`` comes from a typed source (TOML), so it must have the option's
                own type (an int is a number too); a string is not parsed as one.

        Raises:
            ValueError: a value of the wrong type or out of range, naming ``owner``'s option.
        """
        expected = _TYPES[self.type]
        if self.minimum is not None:
            expected += f" {'>' if self.above_minimum else '>='} {self.minimum:g}"
        if self.choices is not None:
            expected = f"one of {', '.join(self.choices)}"
        bad = UserError(f"{owner} option {self.name} must be {expected}, got {value!r}")
        if isinstance(value, str) and self.type is not str and not typed:
            text = value.strip().lower()
            if self.type is bool:
                if text not in _TRUE + _FALSE:
                    raise bad
                value = text in _TRUE
            else:
                try:
                    value = self.type(text)
                except ValueError:
                    raise bad from None
        if self.type is bool:
            if not isinstance(value, bool):
                raise bad
        elif self.type is float:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise bad
            value = float(value)
            if not math.isfinite(value):
                raise bad
        elif self.type is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise bad
        elif not isinstance(value, str):
            raise bad
        if self.minimum is not None and (
            value < self.minimum or (self.above_minimum and value == self.minimum)
        ):
            raise bad
        if self.choices is not None and value not in self.choices:
            raise bad
        return value


def check_declarations(options: Sequence[SidekickOption], owner: str) -> tuple[SidekickOption, ...]:
    """The declared options as a tuple; refuses non-options and repeated names.

    Raises:
        TypeError, ValueError: naming ``owner``.
    """
    if isinstance(options, str | bytes) or not isinstance(options, Sequence):
        raise TypeError(f"{owner}: options must be a list of SidekickOption")
    names = set()
    for option in options:
        if not isinstance(option, SidekickOption):
            raise TypeError(f"{owner}: options must be SidekickOption, got {option!r}")
        if option.name in names:
            raise ValueError(f"{owner}: option {option.name!r} is declared twice")
        names.add(option.name)
    return tuple(options)


def resolve_options(
    declared: Sequence[SidekickOption],
    given: Mapping[str, Any],
    *,
    owner: str,
    spec: Any = None,
    config: Any = None,
) -> dict[str, OptionValue]:
    """Every declared option's value: the given ones parsed and checked, the others defaulted.

    Args:
        declared: the sidekick's options.
        given: what the user set (strings from the command line, typed values from TOML).
        owner: e.g. ``"sidekick 'rew'"``, for messages.
        spec, config: the dataset's grid spec and the run's config, for computed defaults.

    Returns:
        ``name -> value`` in declaration order.

    Raises:
        ValueError: an unknown key (the message lists the valid ones) or a bad value.
    """
    by_name = {option.name: option for option in declared}
    unknown = sorted(set(given) - set(by_name))
    if unknown:
        valid = ", ".join(by_name) if by_name else "none: it takes no options"
        raise UserError(f"{owner} has no option {unknown[0]!r}; valid options: {valid}")
    return {
        option.name: option.parse(given[option.name], owner)
        if option.name in given
        else option.default_for(spec, config)
        for option in declared
    }


def check_typed_options(
    declared: Sequence[SidekickOption], given: Mapping[str, Any], *, owner: str
) -> None:
    """Check options from a typed source (a config file's ``[sidekick]`` table): every key
    declared, every value of its option's own type (``decay_every = "3"`` is a string, not an
    int) and in range.

    Raises:
        ValueError: one line naming ``owner`` (e.g. the file) and the first bad key or value.
    """
    by_name = {option.name: option for option in declared}
    for key, value in given.items():
        if key not in by_name:
            valid = ", ".join(by_name) if by_name else "none: it takes no options"
            raise UserError(f"{owner} has no option {key!r}; valid options: {valid}")
        by_name[key].parse(value, owner, typed=True)


def parse_assignments(values: Sequence[str], flag: str = "--sidekick-option") -> dict[str, str]:
    """``["k=4", "scale=0.01"]`` as ``{"k": "4", "scale": "0.01"}`` (values stay strings).

    Raises:
        ValueError: an item without ``=`` or with an empty key, or a key given twice.
    """
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UserError(f"{flag} takes KEY=VALUE, got {item!r}")
        if key in out:
            raise UserError(f"{flag} {key} is given twice")
        out[key] = value.strip()
    return out
