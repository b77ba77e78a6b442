"""Named registries of sidekicks, critics, actors, datasets, loggers and methods, filled by
plugins.

Every entry records which plugin registered it, so a clash names both sides and
``pyskick plugins`` can say who provides what. Five kinds register factories (:class:`Entry`);
methods, the rows of Table 1, are data (:class:`~pyskick.methods.Method`).
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import pluggy

from pyskick.errors import UserError
from pyskick.methods import Method

KINDS = ("sidekick", "critic", "actor", "dataset", "logger", "method")
HOOKS = {kind: f"pyskick_register_{kind}s" for kind in KINDS}


class PluginFailure(RuntimeError):
    """A plugin's registration hook raised: the installed plugin is broken (a runtime failure,
    not the user's input, nor pyskick's bug)."""


class DuplicateNameError(ValueError):
    """A name (or alias) was registered twice for the same kind."""


class UnknownNameError(UserError):
    """A name that no plugin registered was asked for."""


@dataclass(frozen=True)
class Entry:
    """One registered name.

    Attributes:
        kind: ``"sidekick"``, ``"critic"``, ``"actor"``, ``"dataset"`` or ``"logger"``.
        name: the primary name users type.
        factory: builds the registered object.
        plugin: the name of the plugin that registered it.
        aliases: other accepted names.
        options: the options a sidekick accepts
            (:class:`~pyskick.options.SidekickOption`; empty for other kinds).
    """

    kind: str
    name: str
    factory: Callable[..., Any]
    plugin: str
    aliases: tuple[str, ...] = ()
    options: tuple[Any, ...] = ()

    @property
    def summary(self) -> str:
        """The first paragraph of the factory's docstring on one line (a summary may wrap)."""
        doc = inspect.cleandoc(self.factory.__doc__ or "")
        return " ".join(re.split(r"\n\s*\n", doc)[0].split())


class Named(Protocol):
    """What a registry holds: a name, aliases and the plugin that registered it."""

    @property
    def name(self) -> str: ...

    @property
    def aliases(self) -> tuple[str, ...]: ...

    @property
    def plugin(self) -> str: ...


E = TypeVar("E", bound=Named)


@dataclass
class BaseRegistry(Generic[E]):
    """Names of one kind, with their aliases."""

    kind: str
    _entries: dict[str, E] = field(default_factory=dict)
    _lookup: dict[str, E] = field(default_factory=dict)
    failed_plugins: dict[str, str] = field(default_factory=dict)
    """Plugins that failed to load (name -> error): an unknown name may be theirs, so the
    error names them."""

    def _add(self, entry: E) -> None:
        """Add ``entry`` under its name and aliases.

        Raises:
            DuplicateNameError: one of them is taken, naming both plugins.
        """
        for key in (entry.name, *entry.aliases):
            if key in self._lookup:
                other = self._lookup[key].plugin
                raise DuplicateNameError(
                    f"{self.kind} {key!r} registered by both {other} and {entry.plugin}"
                )
        self._entries[entry.name] = entry
        for key in (entry.name, *entry.aliases):
            self._lookup[key] = entry

    def get(self, name: str) -> E:
        """The entry for ``name`` or one of its aliases.

        Raises:
            UnknownNameError: listing the valid names.
        """
        try:
            return self._lookup[name]
        except KeyError:
            valid = ", ".join(self.names()) or "(none registered)"
            failed = "".join(
                f"; plugin {plugin!r} failed to load ({error}), see `pyskick plugins`"
                for plugin, error in sorted(self.failed_plugins.items())
            )
            raise UnknownNameError(
                f"unknown {self.kind} {name!r}; valid names: {valid}{failed}"
            ) from None

    def names(self) -> list[str]:
        """Primary names, sorted."""
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._lookup

    def __iter__(self) -> Iterator[E]:
        return iter(self._entries[name] for name in self.names())


class Registry(BaseRegistry[Entry]):
    """Sidekicks, critics, actors, datasets or loggers: names of factories."""

    def register(
        self,
        name: str,
        factory: Callable[..., Any],
        *,
        aliases: Sequence[str] = (),
        options: Sequence[Any] = (),
        plugin: str,
    ) -> None:
        """Add ``name`` (and ``aliases``) for ``factory``, registered by ``plugin``; a sidekick
        may declare ``options`` (:class:`~pyskick.options.SidekickOption`)."""
        if not isinstance(name, str) or not name or name != name.strip():
            raise ValueError(f"plugin {plugin!r}: invalid {self.kind} name {name!r}")
        if not callable(factory):
            raise TypeError(f"plugin {plugin!r}: {self.kind} {name!r} factory is not callable")
        if isinstance(aliases, str):
            raise TypeError(f"plugin {plugin!r}: aliases of {self.kind} {name!r} must be a list")
        for alias in aliases:
            if not isinstance(alias, str) or not alias or alias != alias.strip():
                raise ValueError(
                    f"plugin {plugin!r}: invalid alias {alias!r} of {self.kind} {name!r}"
                )
        owner = f"plugin {plugin!r}: {self.kind} {name!r}"
        if options and self.kind != "sidekick":
            raise TypeError(f"{owner}: only sidekicks declare options")
        from pyskick.options import check_declarations

        declared = check_declarations(options, owner)
        self._add(Entry(self.kind, name, factory, plugin, tuple(aliases), declared))


class MethodRegistry(BaseRegistry[Method]):
    """The rows of Table 1, listed in table order (by position, then name)."""

    def register(self, name: str, *, plugin: str, **fields: Any) -> None:
        """Add the method ``name`` with the :class:`~pyskick.methods.Method` ``fields``
        (``label``, ``actor``, ``critic``, ``sidekick``, ``sidekick_options``, ``role``,
        ``position``), registered by ``plugin``.

        Raises:
            TypeError: an unknown field or a value of the wrong type.
            ValueError: a bad value; DuplicateNameError: a name taken.
        """
        unknown = sorted(set(fields) - (set(Method.__dataclass_fields__) - {"name", "plugin"}))
        if unknown:
            raise TypeError(f"plugin {plugin!r}: method {name!r} has no field {unknown[0]!r}")
        try:
            method = Method(name, plugin=plugin, **fields)
        except TypeError as exc:  # a missing label, foremost
            raise TypeError(f"plugin {plugin!r}: method {name!r}: {exc}") from None
        self._add(method)

    def names(self) -> list[str]:
        """Names in table order."""
        return [m.name for m in sorted(self._entries.values(), key=lambda m: (m.position, m.name))]


@dataclass
class Registries:
    """All registries, built from one plugin manager."""

    sidekick: Registry
    critic: Registry
    actor: Registry
    dataset: Registry
    logger: Registry
    method: MethodRegistry

    def __getitem__(self, kind: str) -> Any:
        if kind not in KINDS:
            raise KeyError(f"unknown registry kind {kind!r}; valid: {', '.join(KINDS)}")
        return getattr(self, kind)


def record_failure(errors: dict[str, str], plugin: str, exc: BaseException) -> None:
    """Add ``exc`` to ``plugin``'s entry of ``errors`` (one line per plugin)."""
    message = f"{type(exc).__name__}: {exc}"
    errors[plugin] = f"{errors[plugin]}; {message}" if plugin in errors else message


def build_registries(
    pm: pluggy.PluginManager,
    *,
    errors: dict[str, str] | None = None,
    failed_plugins: Mapping[str, str] | None = None,
) -> Registries:
    """Call every plugin's registration hooks and collect the names.

    Each hook implementation is called separately so that every entry records its plugin.

    Args:
        pm: the plugin manager.
        errors: None to raise on the first failing registration (a clash included); a dict to
            record ``plugin -> error`` instead and keep going without that registration
            (used by ``pyskick plugins`` and ``pyskick info``, which must still work).
        failed_plugins: plugins that failed to load (name -> error), named by every unknown
            name's error.
    """
    registries = Registries(
        sidekick=Registry("sidekick"),
        critic=Registry("critic"),
        actor=Registry("actor"),
        dataset=Registry("dataset"),
        logger=Registry("logger"),
        method=MethodRegistry("method"),
    )
    for kind in KINDS:
        registries[kind].failed_plugins = dict(failed_plugins or {})
    for kind, hook_name in HOOKS.items():
        registry = registries[kind]
        # pluggy's call order (last registered first): the built-ins, registered last, claim
        # their names before any external plugin.
        for impl in reversed(getattr(pm.hook, hook_name).get_hookimpls()):
            plugin = pm.get_name(impl.plugin) or repr(impl.plugin)
            try:
                impl.function(register=functools.partial(registry.register, plugin=plugin))
            except Exception as exc:
                if errors is not None:
                    record_failure(errors, plugin, exc)
                    continue
                if isinstance(exc, DuplicateNameError):  # names both plugins
                    raise
                raise PluginFailure(
                    f"plugin {plugin!r} failed in {hook_name}: {type(exc).__name__}: {exc} "
                    "(`pyskick plugins` lists it; PYSKICK_LOAD_PLUGINS loads only the named)"
                ) from exc
    return registries
