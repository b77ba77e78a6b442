"""Hook specifications of pyskick's plugin API (pluggy project name ``"pyskick"``).

A plugin is a module (or object) with functions decorated by :data:`pyskick.hookimpl` and named
after these hooks; installed distributions expose it through an entry point of group
``"pyskick"``. Every ``pyskick_register_*`` hook is called once per plugin when the registries
are built, and receives a ``register(name, factory, *, aliases=(), options=())`` callback:

- ``name``: a short kebab-case name, the one users type (``--sidekick rew``);
- ``factory``: a callable building the object; its docstring's first line is the summary shown
  by ``pyskick plugins``;
- ``aliases``: other accepted names;
- ``options`` (sidekicks only): the :class:`~pyskick.options.SidekickOption` users
  may set with ``--sidekick-option KEY=VALUE``.

A name may be registered once per kind: a second registration is an error naming both plugins.
Hooks return nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import pluggy

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import click

hookspec = pluggy.HookspecMarker("pyskick")
hookimpl = pluggy.HookimplMarker("pyskick")


class Register(Protocol):
    """The callback every registration hook receives."""

    def __call__(
        self,
        name: str,
        factory: Callable[..., Any],
        *,
        aliases: Sequence[str] = (),
        options: Sequence[Any] = (),
    ) -> None: ...


@hookspec
def pyskick_register_sidekicks(register: Register) -> None:
    """Register sidekicks: objects that turn full observability at training time into reward
    bonuses or demonstrations (``--sidekick NAME``).

    The factory is called as ``factory(*, one_view: Path, spec: GridSpec, config: TrainConfig,
    options: dict) -> pyskick.sidekicks.Sidekick``: the one-view run the policy starts from
    (the model that scores views), the dataset's geometry, the run's config, and the options
    declared at registration, resolved (every declared key present, checked, defaults filled
    in). Build sidekicks with :func:`pyskick.sidekicks.make_sidekick`, which checks the result
    and stamps the registered name and the options on it.

    :param register: ``register(name, factory, *, aliases=(), options=())``; ``options`` is a
        list of :class:`~pyskick.options.SidekickOption`.
    """


@hookspec
def pyskick_register_critics(register: Register) -> None:
    """Register critics: the baseline or value of each policy-gradient step
    (``--critic NAME``).

    The factory is called as ``factory(*, model_config: ModelConfig, policy: CompletionPolicy)
    -> torch.nn.Module | None`` (None: the running-mean baseline). The module has a bool
    attribute ``full_observability``: True, it is called as ``critic(hidden, proprio, t, grid,
    azimuth=...)`` with the whole ``[B, N, M, C, H, W]`` grid; False, as ``critic(hidden,
    proprio, t, azimuth=...)``; it returns ``[B]`` values.

    :param register: ``register(name, factory, *, aliases=())``.
    """


@hookspec
def pyskick_register_actors(register: Register) -> None:
    """Register actors: what picks the camera motions at training and test time
    (``--actor NAME``).

    The factory is called as ``factory(*, one_view: Path | None, spec: GridSpec | None,
    config: TrainConfig | None) -> pyskick.actors.Actor`` (None where the caller has none).

    :param register: ``register(name, factory, *, aliases=())``.
    """


@hookspec
def pyskick_register_datasets(register: Register) -> None:
    """Register datasets by name (``--dataset NAME``); the factory builds or locates the
    dataset's HDF5 file.

    :param register: ``register(name, factory, *, aliases=())``.
    """


@hookspec
def pyskick_register_commands(cli: click.Group) -> None:
    """Add subcommands to the ``pyskick`` command line.

    Called once, when the CLI first lists or looks up its commands.

    :param cli: the root :class:`click.Group`; use ``cli.add_command(...)`` or ``@cli.command()``.
    """
