"""Click parameter types of the CLI's values that the plugin registries define."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import click

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

    # Click 8.4+ types a ParamType by the value it converts to; older Clicks cannot subscript
    # the class at run time, so only the type checker sees the type arguments.
    _NameType = click.ParamType[str]
    _BatchSizeType = click.ParamType[int | Literal["auto"]]
else:
    _NameType = _BatchSizeType = click.ParamType


class RegisteredName(_NameType):
    """A name (or alias) registered for one kind: sidekick, critic, actor or dataset.

    The value is kept as typed; an unknown name is a usage error (exit 2) listing the valid
    names. Help and shell completion list the registered names too: the registries are built
    when a command's help is shown, never by ``pyskick --help``.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.name = f"{kind} name"

    def _registry(self) -> Any:
        from pyskick.plugins import get_registries

        return get_registries()[self.kind]

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from pyskick.registry import UnknownNameError

        try:
            self._registry().get(value)
        except UnknownNameError as exc:
            self.fail(str(exc), param, ctx)
        return value

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        """``[a|b|c]``, like :class:`click.Choice` (``ctx`` is absent before Click 8.2)."""
        return "[" + "|".join(self._registry().names()) + "]"

    def shell_complete(
        self, ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[CompletionItem]:
        from click.shell_completion import CompletionItem

        names = self._registry().names()
        return [CompletionItem(name) for name in names if name.startswith(incomplete)]

    def __repr__(self) -> str:
        return f"RegisteredName({self.kind!r})"


class EvalBatchSize(_BatchSizeType):
    """Episodes per forward pass: a positive int, or ``auto`` (256 on the CPU, sized to the
    free memory on a GPU)."""

    name = "N|auto"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> int | Literal["auto"]:
        if value == "auto" or (isinstance(value, int) and not isinstance(value, bool)):
            number = value
        else:
            try:
                number = int(str(value))
            except ValueError:
                self.fail(f"{value!r} is neither a positive integer nor 'auto'", param, ctx)
        if number != "auto" and number < 1:
            self.fail(f"{value!r} is not a positive integer", param, ctx)
        return number
