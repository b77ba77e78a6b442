"""The plugin manager: built-ins and installed plugins, through the same door.

Order: hook specifications; external plugins from entry points of group ``"pyskick"`` (unless
``PYSKICK_DISABLE_PLUGIN_AUTOLOAD`` is set; ``PYSKICK_LOAD_PLUGINS=a,b`` loads only those);
then the built-in modules of :data:`DEFAULT_PLUGINS`; then ``check_pending()``, which rejects
hook implementations that match no specification (typos). A plugin that fails to import, or
implements a hook that is not in :mod:`pyskick.hookspecs` (a misspelled name), is recorded with
its error and skipped, so ``pyskick --help``, ``info``, ``plugins`` and every other command still
work.
``PYSKICK_TRACE_PLUGINS=1`` prints every hook call to stderr.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.metadata
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pluggy

from pyskick import hookspecs
from pyskick.registry import Entry, Registries, UnknownNameError, build_registries

ENTRY_POINT_GROUP = "pyskick"
DEFAULT_PLUGINS: tuple[str, ...] = (
    "pyskick.builtins.datasets",
    "pyskick.builtins.sidekicks",
    "pyskick.builtins.critics",
    "pyskick.builtins.actors",
    "pyskick.builtins.demo",
    "pyskick.builtins.loggers",
    "pyskick.builtins.methods",
)


@dataclass(frozen=True)
class PluginInfo:
    """Where a registered plugin comes from."""

    name: str
    distribution: str | None
    version: str | None
    builtin: bool


@dataclass
class PluginHost:
    """A plugin manager with what it loaded, what failed, and its registries."""

    pm: pluggy.PluginManager
    plugins: dict[str, PluginInfo] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    _registries: Registries | None = None

    @property
    def registries(self) -> Registries:
        """The registries, built on first use; a failing registration (a clash) raises."""
        if self._registries is None:
            self._registries = build_registries(self.pm, failed_plugins=self.failures)
        return self._registries

    def register(self, plugin: object, name: str) -> None:
        """Register ``plugin`` (a module or an object with ``@pyskick.hookimpl`` methods)
        under ``name``; the registries are rebuilt with its names on next use."""
        self.pm.register(plugin, name=name)
        self.plugins[name] = PluginInfo(name, None, None, False)
        self._registries = None

    def diagnose(self) -> Registries:
        """Registries built without raising: failing registrations go to :attr:`failures`."""
        return build_registries(self.pm, errors=self.failures)


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def _load_entry_points(host: PluginHost) -> None:
    selected = {
        n.strip() for n in os.environ.get("PYSKICK_LOAD_PLUGINS", "").split(",") if n.strip()
    }
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if selected and ep.name not in selected:
            continue
        dist = ep.dist
        try:
            plugin = ep.load()
            host.pm.register(plugin, name=ep.name)
            _refuse_unknown_hooks(host.pm, plugin, ep.name)
        except Exception as exc:  # a broken plugin must not break the CLI
            host.failures[ep.name] = f"{type(exc).__name__}: {exc}"
            continue
        host.plugins[ep.name] = PluginInfo(
            ep.name, dist.name if dist else None, dist.version if dist else None, builtin=False
        )


def _refuse_unknown_hooks(pm: pluggy.PluginManager, plugin: object, name: str) -> None:
    """Unregister ``plugin`` and raise if it implements a hook that has no specification.

    The specifications are all added before any plugin, so a hook without one is a typo; left
    registered it would make ``check_pending()`` fail for every command.

    Raises:
        pluggy.PluginValidationError: naming the plugin, the unknown hook and the closest
            real hook name.
    """
    unknown = sorted(
        caller.name
        for caller in pm.get_hookcallers(plugin) or []
        if not caller.has_spec()
        and any(impl.plugin is plugin and not impl.optionalhook for impl in caller.get_hookimpls())
    )
    if not unknown:
        return
    pm.unregister(plugin)
    specs = sorted(
        hook
        for hook, caller in vars(pm.hook).items()
        if not hook.startswith("_") and caller.has_spec()
    )
    details = []
    for hook in unknown:
        close = difflib.get_close_matches(hook, specs, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"the hooks are {', '.join(specs)}"
        details.append(f"{hook!r} ({hint})")
    noun = "hook" if len(unknown) == 1 else "hooks"
    raise pluggy.PluginValidationError(
        plugin, f"plugin {name} implements unknown {noun} {', '.join(details)}"
    )


def _trace(host: PluginHost) -> None:
    def before(hook_name: str, hook_impls: Any, kwargs: Mapping[str, Any]) -> None:
        names = [impl.plugin_name for impl in hook_impls]
        sys.stderr.write(f"pyskick: hook {hook_name} -> {names}\n")

    def after(outcome: Any, hook_name: str, hook_impls: Any, kwargs: Mapping[str, Any]) -> None:
        sys.stderr.write(f"pyskick: hook {hook_name} done\n")

    host.pm.add_hookcall_monitoring(before, after)


def make_plugin_host(*, autoload: bool | None = None, builtins: bool = True) -> PluginHost:
    """Build a fresh plugin manager (tests build their own; the CLI shares :func:`get_host`).

    Args:
        autoload: load entry-point plugins; default: unless ``PYSKICK_DISABLE_PLUGIN_AUTOLOAD``.
        builtins: register :data:`DEFAULT_PLUGINS`.
    """
    pm = pluggy.PluginManager("pyskick")
    pm.add_hookspecs(hookspecs)
    host = PluginHost(pm)
    if autoload is None:
        autoload = not _env_flag("PYSKICK_DISABLE_PLUGIN_AUTOLOAD")
    if autoload:
        _load_entry_points(host)
    if builtins:
        from pyskick import __version__

        for module_name in DEFAULT_PLUGINS:
            pm.register(importlib.import_module(module_name), name=module_name)
            host.plugins[module_name] = PluginInfo(module_name, "pyskick", __version__, True)
    pm.check_pending()
    if _env_flag("PYSKICK_TRACE_PLUGINS"):
        _trace(host)
    return host


@functools.cache
def get_host() -> PluginHost:
    """The process-wide plugin host used by the CLI and the library's name lookups."""
    return make_plugin_host()


def get_registries() -> Registries:
    """The registries of :func:`get_host`."""
    return get_host().registries


def lookup(kind: str, name: str, *, field: str | None = None) -> Entry:
    """The entry of ``name`` (or an alias) in the ``kind`` registry of :func:`get_registries`
    (methods: ``get_registries().method.get(name)``).

    Args:
        kind: ``"sidekick"``, ``"critic"``, ``"actor"``, ``"dataset"`` or ``"logger"``.
        name: the registered name.
        field: what held the name (e.g. ``"TrainConfig.critic"``), prefixed to the error.

    Raises:
        UnknownNameError: a ValueError listing the valid names.
    """
    try:
        return get_registries()[kind].get(name)
    except UnknownNameError as exc:
        if field is None:
            raise
        raise UnknownNameError(f"{field}: {exc}") from None
