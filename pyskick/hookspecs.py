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

Methods (``pyskick_register_methods``) are data, not factories: their callback takes the row's
fields instead (:class:`RegisterMethod`).

A name may be registered once per kind: a second registration is an error naming both plugins.
Hooks return nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import pluggy

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    import click

    from pyskick.methods import Role

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


class RegisterMethod(Protocol):
    """The callback of :func:`pyskick_register_methods`: the fields of a
    :class:`pyskick.methods.Method`."""

    def __call__(
        self,
        name: str,
        *,
        label: str,
        actor: str = "learned",
        critic: str = "average",
        sidekick: str = "none",
        sidekick_options: Mapping[str, int | float | bool | str] = ...,
        role: Role = "baseline",
        position: int = 100,
    ) -> None: ...


@hookspec
def pyskick_register_sidekicks(register: Register) -> None:
    """Register sidekicks: objects that turn full observability at training time into reward
    bonuses or demonstrations (``--sidekick NAME``).

    The factory is called as ``factory(*, one_view: Path | None, spec: GridSpec | None,
    channel_mean: tuple[float, ...] | None, config: TrainConfig, options: dict, **_) ->
    pyskick.sidekicks.Sidekick``: the one-view run the policy starts from (the model that
    scores views; None when there is none), the dataset's geometry (None for viewgrids built
    in memory), its channel mean (always given by the trainer), the run's config, and the
    options declared at registration, resolved (every declared key present, checked, defaults
    filled in). A factory that needs the one-view run or the mean refuses their absence in one
    line with :func:`pyskick.sidekicks.scoring_inputs`. Build sidekicks with
    :func:`pyskick.sidekicks.make_sidekick`, which checks the result and stamps the registered
    name and the options on it.

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
    azimuth=...)`` with the whole ``[B, N, M, C, H, W]`` grid (and, if it has a method
    ``encode_views(grid)`` and its ``forward`` takes ``views``, with ``views=`` the result of
    one ``encode_views`` call per batch of episodes); False, as ``critic(hidden, proprio, t,
    azimuth=...)``; it returns ``[B]`` values.

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
def pyskick_register_loggers(register: Register) -> None:
    """Register metric loggers (``--logger NAME`` on ``pretrain``, ``train`` and
    ``reproduce``): where a run's per-epoch metrics go besides ``RUN/metrics.jsonl``.

    The factory is called as ``factory()`` when a run is set up, before anything is written:
    import the logger's dependencies there, so that a missing one refuses the run at once. It
    returns an object with three methods (:class:`pyskick.training.loggers.Logger`), which
    only the main process (rank 0) calls:

    - ``start(run: RunInfo)`` once, when training starts: ``run.run_dir`` (the run folder),
      ``run.stage`` (``"pretrain"`` or ``"train"``), ``run.config`` (the run's
      ``TrainConfig.to_dict()``), ``run.first_step`` (0 for a new run; for a resumed one the
      first epoch it trains, records of later steps that an interrupted attempt left are
      stale) and ``run.steps`` (the epochs of the whole run);
    - ``log(step: int, metrics: dict[str, float])`` after every epoch (``step`` is the
      0-based epoch; keys are namespaced ``train/...``, ``val/...``, ``perf/...``,
      ``sidekick/...``; values may be NaN);
    - ``close()`` once, at the end, also when training failed (the last logged step then
      falls short of ``run.steps - 1``).

    Loggers do not change results: the run records their names in ``config.json``
    (``"loggers"``) but a resumed run may use others. Built-in: ``jsonl`` (always on) and
    ``tensorboard``.

    :param register: ``register(name, factory, *, aliases=())``.
    """


@hookspec
def pyskick_register_methods(register: RegisterMethod) -> None:
    """Register methods: rows of Table 1 (``pyskick reproduce --methods NAME``).

    A method is data, not a factory: ``register(name, *, label, actor="learned",
    critic="average", sidekick="none", sidekick_options={}, role="baseline", position=100)``
    adds the row ``name`` that trains the registered ``actor``, ``critic`` and ``sidekick``
    (with ``sidekick_options`` fixed; options given to ``reproduce`` win) from the one-view
    model. ``label`` is one line saying what the row is; ``role`` is how the report compares
    it (``"sidekick"``: a proposed method, checked to beat rnd-actions and ltla, with the
    paper's claims; ``"reference"``: a row every other row is compared with, paired;
    ``"baseline"``: any other row); rows are tabulated by ``(position, name)`` (the paper's
    rows use their Table 1 index 0 to 10). The names a row uses may come from other plugins:
    a row whose names are not all registered is refused when selected. See
    :class:`pyskick.methods.Method`.

    :param register: ``register(name, *, label, ...)`` (:class:`RegisterMethod`).
    """


@hookspec
def pyskick_register_commands(cli: click.Group) -> None:
    """Add subcommands to the ``pyskick`` command line.

    Called once, when the CLI first lists or looks up its commands.

    :param cli: the root :class:`click.Group`; use ``cli.add_command(...)`` or ``@cli.command()``.
    """
