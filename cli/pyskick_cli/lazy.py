"""A Click group whose subcommands are imported only when used (fast ``--help``).

Plugin commands (hook ``pyskick_register_commands``) are added on the first listing or lookup,
not at import time.
"""

from __future__ import annotations

import importlib

import click


class LazyGroup(click.Group):
    """Click group mapping command names to ``"module:attribute"`` import paths."""

    def __init__(
        self, *args: object, lazy_subcommands: dict[str, str] | None = None, **kwargs: object
    ) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy_subcommands = dict(lazy_subcommands or {})
        self._plugin_commands_added = False

    def _add_plugin_commands(self) -> None:
        if self._plugin_commands_added:
            return
        self._plugin_commands_added = True
        from pyskick.plugins import get_host
        from pyskick.registry import record_failure

        host = get_host()
        # One plugin at a time: a failing one is recorded (see `pyskick plugins`), not fatal.
        for impl in host.pm.hook.pyskick_register_commands.get_hookimpls():
            plugin = host.pm.get_name(impl.plugin) or "?"
            before = dict(self.commands)
            try:
                impl.function(cli=self)
            except Exception as exc:
                record_failure(host.failures, plugin, exc)
            self._refuse_shadowing(before, plugin, host.failures)

    def _refuse_shadowing(
        self, before: dict[str, click.Command], plugin: str, failures: dict[str, str]
    ) -> None:
        """Undo a plugin's commands that reuse a built-in or earlier plugin's name: the
        original stays, and the clash is reported by ``pyskick plugins``."""
        from pyskick.registry import record_failure

        for name, command in list(self.commands.items()):
            taken = name in self.lazy_subcommands or (
                name in before and before[name] is not command
            )
            if not taken:
                continue
            if name in before:
                self.commands[name] = before[name]
            else:
                del self.commands[name]
            owner = "pyskick" if name in self.lazy_subcommands else "another plugin"
            record_failure(
                failures, plugin, ValueError(f"command {name!r} is already provided by {owner}")
            )

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._add_plugin_commands()
        return sorted({*super().list_commands(ctx), *self.lazy_subcommands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.lazy_subcommands and cmd_name not in self.commands:
            self._add_plugin_commands()
        if cmd_name in self.lazy_subcommands:
            module_name, attribute = self.lazy_subcommands[cmd_name].split(":")
            command = getattr(importlib.import_module(module_name), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"lazy command {cmd_name!r} is not a click.Command")
            return command
        return super().get_command(ctx, cmd_name)
