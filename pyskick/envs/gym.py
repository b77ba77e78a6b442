"""Gymnasium interfaces to the look-around environment.

- :class:`LookAroundGymEnv`: one agent, one viewgrid per episode, numpy observations; passes
  ``gymnasium.utils.env_checker.check_env``. Registered as ``"pyskick/LookAround-v0"``.
- :class:`LookAroundVectorEnv`: a native ``gymnasium.vector.VectorEnv`` over the batched
  :class:`~pyskick.envs.lookaround.LookAroundEnv` (``gymnasium.make_vec`` of the same id).

Both render ``"rgb_array"`` pictures of the episode (:mod:`pyskick.envs.render`; the single env
also ``"human"``), offer raw uint8 channel-first views (``obs_dtype="uint8"``) for image policies,
and pay a task reward object (:mod:`pyskick.envs.task_rewards`; the registered factories of
:mod:`pyskick.training.task_models` resolve ``reward="reconstruction"`` etc. into one).

Viewgrids come from a dataset (a registered name or an ``.h5`` path, read through
:mod:`pyskick.data`) or from a ``grids`` tensor ``[n, N, M, C, H, W]``. Full observability (the
whole normalised grid and the reconstruction target) is given only in ``info``, under
``"full_viewgrid"`` and ``"target"``, for sidekicks and asymmetric critics; a policy that reads
only the observation cannot see it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any, Literal

import gymnasium
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from torch import Tensor

from pyskick.envs.actions import ActionGrid
from pyskick.envs.lookaround import LookAroundEnv, Observation, StartZeroing
from pyskick.envs.render import HumanWindow, episode_frame
from pyskick.envs.task_rewards import MapsReward, TaskReward
from pyskick.envs.views import channel_mean_for, denormalize_views, parse_channel_mean
from pyskick.errors import UserError, UserTypeError
from pyskick.memory import check_memory

ObsDtype = Literal["float32", "uint8"]
OBS_DTYPES: tuple[str, ...] = ("float32", "uint8")
RENDER_MODES: list[str] = ["rgb_array", "human"]
RENDER_FPS = 4


@dataclass(frozen=True, eq=False)
class EpisodeOptions:
    """What the episodes of both Gymnasium environments are made of, checked in one place.

    The fields are the keyword arguments of :class:`LookAroundGymEnv`, of
    :class:`LookAroundVectorEnv` and of ``gymnasium.make`` / ``gymnasium.make_vec``; ``dataset``,
    ``split``, ``T`` and ``seed`` may also be given by position, in that order. Construction
    refuses what can be told without reading data (a dataset and grids together, an unknown
    ``obs_dtype``, ``T < 2``); the grids, channel mean and reward maps are checked when an
    environment loads them, the motion settings by
    :class:`~pyskick.envs.lookaround.LookAroundEnv`. Equality is identity (the fields hold
    tensors).

    Attributes:
        dataset: a registered dataset name or an ``.h5`` path (resolved by
            :func:`pyskick.data.resolve_dataset`); None with no ``grids`` means
            ``"synthetic-scenes"``.
        split: the dataset split to draw viewgrids from.
        T: glimpses per episode, at least 2 (an episode needs one action).
        seed: seeds the environment's ``np_random`` (which draws the viewgrids and starts);
            ``reset(seed=...)`` reseeds it.
        grids: ``[n, N, M, C, H, W]`` uint8 or float32 (0–255) viewgrids instead of a dataset.
        channel_mean: ``[C]`` per-channel mean (0–255 scale); None takes the dataset's, or 0 for
            grids.
        reward_maps: ``[n, N, M]`` sidekick reward maps, one per viewgrid.
        action_grid, wrap_azimuth, wrap_elevation, known_azimuth, reward_radius,
            start_zeroing: as for :class:`~pyskick.envs.lookaround.LookAroundEnv`.
        obs_dtype: ``"float32"`` (normalised views in [-1, 1]) or ``"uint8"`` (raw 0–255
            channel-first views, ``Box(0, 255, (C, H, W), uint8)``: SB3's image policies).
        reward: the task reward object (:class:`~pyskick.envs.task_rewards.TaskReward`); None
            pays the reward maps. ``gymnasium.make`` also takes the names ``"maps"``,
            ``"reconstruction"`` and ``"coverage"`` (:mod:`pyskick.training.task_models`).

    Raises:
        ValueError: ``dataset`` and ``grids`` both given, an unknown ``obs_dtype``, or an int
            ``T < 2``.
    """

    dataset: str | Path | None = None
    split: str = "train"
    T: int = 4
    seed: int | None = None
    _: KW_ONLY
    grids: Tensor | np.ndarray | None = None
    channel_mean: Sequence[float] | Tensor | None = None
    reward_maps: Tensor | np.ndarray | None = None
    action_grid: ActionGrid | tuple[int, int] = (3, 5)
    wrap_azimuth: bool = True
    wrap_elevation: bool = False
    known_azimuth: bool = False
    reward_radius: int = 1
    start_zeroing: StartZeroing = "view"
    obs_dtype: ObsDtype = "float32"
    reward: TaskReward | None = None

    def __post_init__(self) -> None:
        if self.grids is not None and self.dataset is not None:
            raise UserError("give either dataset or grids, not both")
        if self.obs_dtype not in OBS_DTYPES:
            raise UserError(
                f"obs_dtype must be one of {', '.join(OBS_DTYPES)}, got {self.obs_dtype!r}"
            )
        T = self.T
        if isinstance(T, int) and not isinstance(T, bool) and T < 2:  # other types: LookAroundEnv
            raise UserError(
                f"Gymnasium episodes need at least one action, so T >= 2, got {T}; "
                "use LookAroundEnv for one-glimpse episodes"
            )

    @classmethod
    def given(
        cls, options: EpisodeOptions | None, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> EpisodeOptions:
        """``options``, or the options built from an environment's other arguments.

        Raises:
            TypeError: ``options`` together with other episode arguments, or an unknown one.
        """
        if options is None:
            return cls(*args, **kwargs)
        if args or kwargs:
            raise UserTypeError(
                "give episode_options or its fields as arguments, not both; got "
                f"{len(args)} positional and {', '.join(kwargs) or 'no'} keyword argument(s)"
            )
        return options

    def settings(self) -> dict[str, Any]:
        """The keyword arguments of :class:`~pyskick.envs.lookaround.LookAroundEnv` set here."""
        return {
            "action_grid": self.action_grid,
            "wrap_azimuth": self.wrap_azimuth,
            "wrap_elevation": self.wrap_elevation,
            "known_azimuth": self.known_azimuth,
            "reward_radius": self.reward_radius,
            "start_zeroing": self.start_zeroing,
        }


@dataclass(frozen=True)
class _Source:
    """The viewgrids episodes are drawn from, on the CPU."""

    grids: Tensor  # [n, N, M, C, H, W] uint8 or float32, 0–255 scale
    channel_mean: Tensor | None  # [C] float32
    reward_maps: Tensor | None  # [n, N, M] float32


def _load_source(options: EpisodeOptions) -> _Source:
    """Resolve the dataset or validate the given grids, and the optional reward maps."""
    grids, channel_mean, reward_maps = options.grids, options.channel_mean, options.reward_maps
    if grids is None:
        # pyskick.data reads HDF5: imported only when a dataset is actually used.
        from pyskick.data import ViewgridFile, resolve_dataset

        viewgrid_file = ViewgridFile(resolve_dataset(options.dataset or "synthetic-scenes"))
        grids = viewgrid_file.split(options.split).load()
        if channel_mean is None:
            channel_mean = viewgrid_file.spec.channel_mean
    grids = torch.as_tensor(grids).detach().cpu()
    if grids.dtype not in (torch.uint8, torch.float32):
        raise UserTypeError(f"grids must be uint8 or float32 (0–255 scale), got {grids.dtype}")
    if grids.dim() != 6 or 0 in grids.shape:
        raise UserError(
            f"grids must have shape [n, N, M, C, H, W] with no empty axis, got {list(grids.shape)}"
        )
    if grids.dtype == torch.float32 and not bool(((grids >= 0) & (grids <= 255)).all()):
        raise UserError("float32 grids must hold raw intensities in [0, 255] (NaN not allowed)")
    mean = None if channel_mean is None else parse_channel_mean(channel_mean)
    if mean is not None and mean.numel() != grids.shape[3]:
        raise UserError(
            f"the grids have {grids.shape[3]} channels but channel_mean has {mean.numel()} values"
        )
    maps = None
    if reward_maps is not None:
        maps = torch.as_tensor(reward_maps).detach().cpu()
        if not maps.is_floating_point():
            raise UserTypeError(f"reward_maps must be a floating array, got {maps.dtype}")
        maps = maps.to(torch.float32)
        if maps.shape != grids.shape[:3]:
            raise UserError(
                f"reward_maps must have shape {list(grids.shape[:3])} (one [N, M] map per "
                f"viewgrid), got {list(maps.shape)}"
            )
        if not bool(torch.isfinite(maps).all()):
            raise UserError("reward_maps contains NaN or infinite values")
    return _Source(grids, mean, maps)


def _check_render_mode(render_mode: str | None, owner: str) -> str | None:
    if render_mode is not None and render_mode not in RENDER_MODES:
        raise UserError(
            f"{owner} render_mode must be None or one of {', '.join(RENDER_MODES)}, "
            f"got {render_mode!r}"
        )
    return render_mode


def _options(options: dict[str, Any] | None, allowed: set[str]) -> dict[str, Any]:
    options = dict(options or {})
    unknown = set(options) - allowed
    if unknown:
        raise UserError(f"unknown reset options {sorted(unknown)}; allowed: {sorted(allowed)}")
    return options


def _as_indices(name: str, value: object, count: int, upper: int) -> np.ndarray:
    """Validate ``count`` integer indices in ``[0, upper)`` (a scalar is broadcast)."""
    array = np.asarray(value)
    if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer):
        raise UserError(f"options[{name!r}] must be integers, got {value!r}")
    if array.ndim == 0:
        array = np.full(count, array)
    if array.shape != (count,):
        raise UserError(f"options[{name!r}] must have shape ({count},), got {array.shape}")
    if array.size and (array.min() < 0 or array.max() >= upper):
        raise UserError(f"options[{name!r}] must lie in [0, {upper}), got {array.tolist()}")
    return array.astype(np.int64)


def _check_episode_memory(source: _Source, T: int, agents: int, device: torch.device) -> None:
    """Refuse episodes whose state cannot fit where they run, before anything is allocated: per
    agent the viewgrid in float32 twice (the grid and the target) and eight int64 or float32
    entries per time step (views, actions, rewards, ...).

    Raises:
        UserError: one line naming what was asked and the memory it needs and has.
    """
    grid_bytes = 4 * math.prod(source.grids.shape[1:])
    need = agents * (2 * grid_bytes + 8 * 8 * T)
    what = f"{agents} look-around episode(s) of T = {T}"
    if device.type == "cuda" and torch.cuda.is_available():
        free = torch.cuda.mem_get_info(device)[0]
        if need > free:
            raise UserError(
                f"{what} need about {need / 2**30:.1f} GiB on {device}, {free / 2**30:.1f} GiB "
                "are free; fewer environments (num_envs) or a smaller T"
            )
        return
    check_memory(need, what, "fewer environments (num_envs) or a smaller T")


class _Episodes:
    """Draws viewgrids and starts from a source and runs them in a batched env."""

    def __init__(
        self, source: _Source, env: LookAroundEnv, device: torch.device, obs_dtype: ObsDtype
    ) -> None:
        self.source = source
        self.env = env
        self.device = device
        self.obs_dtype = obs_dtype
        self.task: TaskReward = MapsReward()
        self.indices = np.zeros(0, dtype=np.int64)
        self.starts = np.zeros(0, dtype=np.int64)

    @classmethod
    def build(
        cls, options: EpisodeOptions, device: torch.device | str, *, agents: int = 1
    ) -> _Episodes:
        """The source of ``options`` in a batched env with its settings and the source's channel
        mean, for ``agents`` episodes at once: refused up front when their memory cannot fit.
        Pays ``options.reward`` when one is given."""
        source = _load_source(options)
        T = options.T
        env = LookAroundEnv(T, channel_mean=source.channel_mean, **options.settings())
        if isinstance(T, int) and not isinstance(T, bool):
            _check_episode_memory(source, T, agents, torch.device(device))
        episodes = cls(source, env, torch.device(device), options.obs_dtype)
        if options.reward is not None:
            episodes.task = options.reward
        return episodes

    def spaces(self) -> tuple[spaces.Dict, spaces.Discrete]:
        """Observation and action spaces of one agent."""
        N, M = self.source.grids.shape[1:3]
        grid, known_azimuth = self.env.action_grid, self.env.known_azimuth
        # Each bound spans at least 1 so no entry is degenerate (a 1-wide action grid or a single
        # elevation ring would give low == high, which Gymnasium warns about); values stay inside.
        half_elev, half_azim = max(grid.elevation // 2, 1), max(grid.azimuth // 2, 1)
        low = [-half_elev, -half_azim, 0] + ([0] if known_azimuth else [])
        high = [half_elev, half_azim, max(N - 1, 1)] + ([max(M - 1, 1)] if known_azimuth else [])
        view_shape = tuple(self.source.grids.shape[3:])
        observation_space = spaces.Dict(
            {
                # (x - mean) / 255 with x and mean in [0, 255] lies in [-1, 1]; raw views are
                # the channel-first uint8 images image policies (SB3's CNNs) expect.
                "view": spaces.Box(-1.0, 1.0, shape=view_shape, dtype=np.float32)
                if self.obs_dtype == "float32"
                else spaces.Box(0, 255, shape=view_shape, dtype=np.uint8),
                "proprio": spaces.Box(
                    np.array(low, dtype=np.float32),
                    np.array(high, dtype=np.float32),
                    dtype=np.float32,
                ),
                "time": spaces.Discrete(self.env.T),
            }
        )
        return observation_space, spaces.Discrete(self.env.n_actions)

    def reset(self, rng: np.random.Generator, count: int, options: dict[str, Any]) -> Observation:
        n, N, M = self.source.grids.shape[:3]
        # Draw both, always in the same order, so given options do not shift the random stream.
        indices = rng.integers(n, size=count)
        starts = rng.integers(N * M, size=count)
        if "index" in options:
            indices = _as_indices("index", options["index"], count, n)
        if "start" in options:
            starts = _as_indices("start", options["start"], count, N * M)
        self.indices, self.starts = indices.astype(np.int64), starts.astype(np.int64)
        rows = torch.from_numpy(self.indices)
        maps = self.source.reward_maps
        obs = self.env.reset(
            self.source.grids[rows].to(self.device),
            starts=torch.from_numpy(self.starts).to(self.device),
            reward_maps=None if maps is None else maps[rows].to(self.device),
        )
        self.task.reset(self.env, rows.to(self.device), obs)
        return obs

    def step(self, actions: Tensor) -> tuple[Observation, Tensor, bool]:
        """Move every agent; the task reward ``[B]`` of the move."""
        step = self.env.step(actions)
        reward = self.task.step(self.env, step.observation, step.reward)
        return step.observation, reward, step.done

    def observation(self, obs: Observation) -> dict[str, np.ndarray]:
        """Batched numpy observations (views as :attr:`obs_dtype`)."""
        if self.obs_dtype == "uint8":
            M = self.source.grids.shape[2]
            position = self.env.positions.cpu()
            raw = self.source.grids[torch.from_numpy(self.indices), position // M, position % M]
            view = raw.round().clamp(0, 255).to(torch.uint8).numpy().copy()
        else:
            view = obs.view.cpu().numpy().copy()
        return {
            "view": view,
            "proprio": obs.proprio.cpu().numpy().copy(),
            "time": np.full(obs.view.shape[0], obs.time, dtype=np.int64),
        }

    def frame(self, k: int) -> np.ndarray:
        """``[height, width, 3]`` uint8 picture of agent ``k``'s episode (docs: render modes)."""
        grid = self.source.grids[int(self.indices[k])].to(torch.float32)
        reconstruction = self.task.reconstruction()
        shown = None
        if reconstruction is not None:
            mean = channel_mean_for(self.source.channel_mean, grid.shape[2], "cpu")
            absolute = self.env.to_absolute(reconstruction)[k].cpu()
            shown = denormalize_views(absolute, mean).numpy()
        return episode_frame(
            grid.numpy(),
            self.env.visited[k].cpu().numpy(),
            int(self.env.positions[k]),
            shown,
        )

    def info(self) -> dict[str, np.ndarray]:
        """Per-agent info arrays (fresh copies: users may keep them)."""
        return {
            "index": self.indices.copy(),
            "start": self.starts.copy(),
            "position": self.env.positions.cpu().numpy().copy(),
            "full_viewgrid": self.env.grid.cpu().numpy().copy(),
            "target": self.env.target.cpu().numpy().copy(),
        }


class _EpisodesAccess:
    """What both Gymnasium interfaces expose of their :class:`_Episodes`."""

    _episodes: _Episodes

    @property
    def batched(self) -> LookAroundEnv:
        """The underlying batched environment (one row per agent)."""
        return self._episodes.env

    @property
    def grids(self) -> Tensor:
        """``[n, N, M, C, H, W]`` the viewgrids episodes are drawn from (CPU, 0–255)."""
        return self._episodes.source.grids

    @property
    def task_reward(self) -> TaskReward:
        """The reward paid on each move (set it before the next reset)."""
        return self._episodes.task

    @task_reward.setter
    def task_reward(self, task: TaskReward) -> None:
        self._episodes.task = task


_FORKS_SAFE = False


def make_forks_safe() -> None:
    """Make the processes forked from this one safe for pyskick environments (every env
    calls it; idempotent).

    A process forked after torch ran parallel work here (one pyskick env that stepped is
    enough) inherits the state of torch's OpenMP thread pool but not its threads, and its
    first parallel region waits for them forever: Gymnasium's async vector env and SB3's
    ``SubprocVecEnv`` with the ``fork`` start method hung without a word. A forked child
    therefore runs torch on one thread (as PyTorch's own DataLoader workers do), which needs no
    pool; a vector env's workers share the machine's cores anyway. Processes started with
    ``spawn`` or ``forkserver`` are unaffected.
    """
    global _FORKS_SAFE
    if not _FORKS_SAFE and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_one_thread_in_child)
        _FORKS_SAFE = True


def _one_thread_in_child() -> None:
    torch.set_num_threads(1)


class LookAroundGymEnv(_EpisodesAccess, gymnasium.Env[dict[str, Any], np.int64]):
    """One look-around agent as a Gymnasium environment.

    Observation ``{"view": float32 (C, H, W), "proprio": float32 (P,), "time": int}`` (``view``
    uint8 raw intensities with ``obs_dtype="uint8"``); action ``Discrete(dN * dM)``; reward =
    the task reward (:mod:`pyskick.envs.task_rewards`; by default the raw map reward of the view
    reached, 0 without reward maps); ``terminated=True`` at the ``T``-th glimpse, ``truncated``
    always False.
    ``info`` holds ``index`` (viewgrid row), ``start``, ``position`` (view indices) and the
    privileged ``full_viewgrid`` ``(N, M, C, H, W)`` and ``target`` (start-relative frame unless
    ``known_azimuth``), both normalised float32.

    Args:
        *args, **kwargs: the fields of :class:`EpisodeOptions`: ``dataset``, ``split``, ``T``,
            ``seed`` (also by position), ``grids``, ``channel_mean``, ``reward_maps``, the
            motion settings, ``obs_dtype`` and ``reward``.
        render_mode: None, ``"rgb_array"`` (:meth:`render` returns the viewgrid with the visited
            and current views framed, and the reconstruction beside it when the reward has one)
            or ``"human"`` (the same picture in a matplotlib window at every reset and step).
        episode_options: the episode options as one object, instead of ``args`` and
            ``kwargs``.

    Attributes:
        episode_options: the :class:`EpisodeOptions` the environment was made with.
    """

    metadata: dict[str, Any] = {  # noqa: RUF012 (Gymnasium's class attribute)
        "render_modes": RENDER_MODES,
        "render_fps": RENDER_FPS,
    }
    action_space: spaces.Discrete  # the moves of the action grid (_Episodes.spaces)

    def __init__(
        self,
        *args: Any,
        render_mode: str | None = None,
        episode_options: EpisodeOptions | None = None,
        **kwargs: Any,
    ) -> None:
        self.render_mode = _check_render_mode(render_mode, type(self).__name__)
        make_forks_safe()
        self.episode_options = options = EpisodeOptions.given(episode_options, args, kwargs)
        self._episodes = _Episodes.build(options, "cpu")
        self.observation_space, self.action_space = self._episodes.spaces()
        self._window = HumanWindow(RENDER_FPS) if render_mode == "human" else None
        if options.seed is not None:
            self._np_random, self._np_random_seed = seeding.np_random(options.seed)

    def render(self) -> np.ndarray | None:
        """``"rgb_array"``: ``[height, width, 3]`` uint8 picture of the episode; ``"human"``:
        draw it in the window (None). None without a render mode or before the first reset."""
        if self.render_mode is None or self._episodes.indices.size == 0:
            return None
        frame = self._episodes.frame(0)
        if self._window is not None:
            self._window.show(frame)
            return None
        return frame

    def close(self) -> None:
        """Close the ``"human"`` window, if any."""
        if self._window is not None:
            self._window.close()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Start an episode on a random viewgrid from a random start view.

        Args:
            seed: reseeds ``np_random``.
            options: ``{"index": i}`` picks viewgrid row i, ``{"start": v}`` the start view
                ``v = n * M + m``.
        """
        super().reset(seed=seed)
        obs = self._episodes.reset(self.np_random, 1, _options(options, {"index", "start"}))
        if self.render_mode == "human":
            self.render()
        return self._observation(obs), self._info()

    def step(
        self, action: int | np.integer
    ) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """Take one camera move; raises RuntimeError once the episode has terminated."""
        if isinstance(action, np.ndarray) and action.shape == ():
            action = action.item()
        if isinstance(action, bool | np.bool_) or not isinstance(action, int | np.integer):
            raise UserError(f"action must be an int in [0, {self.action_space.n}), got {action!r}")
        if not 0 <= int(action) < self.action_space.n:
            raise UserError(f"action must lie in [0, {self.action_space.n}), got {int(action)}")
        obs, reward, done = self._episodes.step(torch.tensor([int(action)]))
        if self.render_mode == "human":
            self.render()
        return self._observation(obs), float(reward[0]), done, False, self._info()

    def _observation(self, obs: Observation) -> dict[str, Any]:
        batch = self._episodes.observation(obs)
        return {
            "view": batch["view"][0],
            "proprio": batch["proprio"][0],
            "time": np.int64(obs.time),
        }

    def _info(self) -> dict[str, Any]:
        return {
            key: value[0] if key in ("full_viewgrid", "target") else int(value[0])
            for key, value in self._episodes.info().items()
        }


class LookAroundVectorEnv(_EpisodesAccess, VectorEnv):
    """``num_envs`` look-around agents stepped together by one batched environment.

    Every episode lasts exactly ``T`` glimpses and all sub-environments start together, so they
    all terminate on the same step. Autoreset is **disabled**
    (``metadata["autoreset_mode"] == AutoresetMode.DISABLED``): after ``terminations.all()``
    call :meth:`reset`; stepping a finished batch raises RuntimeError. Partial resets
    (``options["reset_mask"]`` not all True) are refused, since they would break the shared
    clock.

    Observations are the batched single-agent ones (``view [num_envs, C, H, W]``,
    ``proprio [num_envs, P]``, ``time [num_envs]``); rewards float32 ``[num_envs]``; ``info``
    holds ``index``, ``start``, ``position``, ``full_viewgrid [num_envs, N, M, C, H, W]`` and
    ``target`` with Gymnasium's ``_key`` masks. For torch training loops use
    :class:`~pyskick.envs.lookaround.LookAroundEnv` directly (no numpy round trip).

    Args:
        num_envs: number of agents (the batch size).
        *args, **kwargs: the fields of :class:`EpisodeOptions`, as for :class:`LookAroundGymEnv`
            (``dataset``, ``split``, ``T``, ``seed`` also by position, after ``num_envs``).
        device: where the batched environment runs (numpy results are copied back).
        render_mode: None or ``"rgb_array"`` (:meth:`render` returns one picture per agent).
        episode_options: the episode options as one object, instead of ``args`` and
            ``kwargs``.

    Attributes:
        episode_options: the :class:`EpisodeOptions` the environment was made with.
    """

    metadata: dict[str, Any] = {  # noqa: RUF012 (Gymnasium's class attribute)
        "autoreset_mode": AutoresetMode.DISABLED,
        "render_modes": ["rgb_array"],
        "render_fps": RENDER_FPS,
    }

    def __init__(
        self,
        num_envs: int = 1,
        *args: Any,
        device: torch.device | str = "cpu",
        render_mode: str | None = None,
        episode_options: EpisodeOptions | None = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise UserError(f"num_envs must be an int >= 1, got {num_envs!r}")
        if render_mode == "human":
            raise UserError("LookAroundVectorEnv renders only 'rgb_array', got 'human'")
        self.render_mode = _check_render_mode(render_mode, type(self).__name__)
        make_forks_safe()
        self.episode_options = options = EpisodeOptions.given(episode_options, args, kwargs)
        self._episodes = _Episodes.build(options, device, agents=num_envs)
        self.num_envs = num_envs
        self.single_observation_space, self.single_action_space = self._episodes.spaces()
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        if options.seed is not None:
            self._np_random, self._np_random_seed = seeding.np_random(options.seed)

    def render(self) -> tuple[np.ndarray, ...] | None:
        """One ``[height, width, 3]`` uint8 picture per agent (``"rgb_array"``), else None."""
        if self.render_mode is None or self._episodes.indices.size == 0:
            return None
        return tuple(self._episodes.frame(k) for k in range(self.num_envs))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Start ``num_envs`` episodes.

        Args:
            seed: reseeds ``np_random``.
            options: ``"index"`` / ``"start"``: an int or ``[num_envs]`` ints choosing the
                viewgrid rows / start views; ``"reset_mask"``: accepted only when all True.
        """
        super().reset(seed=seed)
        options = _options(options, {"index", "start", "reset_mask"})
        if "reset_mask" in options:
            mask = np.asarray(options.pop("reset_mask"))
            if mask.shape != (self.num_envs,) or mask.dtype != np.bool_ or not mask.all():
                raise UserError(
                    "LookAroundVectorEnv resets all sub-environments together: reset_mask "
                    f"must be {self.num_envs} True values, got {mask.tolist()}"
                )
        obs = self._episodes.reset(self.np_random, self.num_envs, options)
        return self._episodes.observation(obs), self._info()

    def step(
        self, actions: np.ndarray
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Move every agent; raises RuntimeError once the batch has terminated."""
        array = np.asarray(actions)
        if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer):
            raise UserError(f"actions must be integers, got dtype {array.dtype}")
        if array.shape != (self.num_envs,):
            raise UserError(f"actions must have shape ({self.num_envs},), got {array.shape}")
        obs, reward, done = self._episodes.step(
            torch.from_numpy(array.astype(np.int64)).to(self._episodes.device)
        )
        terminations = np.full(self.num_envs, done)
        truncations = np.zeros(self.num_envs, dtype=np.bool_)
        rewards = reward.cpu().numpy().copy()
        return (
            self._episodes.observation(obs),
            rewards,
            terminations,
            truncations,
            self._info(),
        )

    def _info(self) -> dict[str, Any]:
        info: dict[str, Any] = {}
        for key, value in self._episodes.info().items():
            info[key] = value
            info[f"_{key}"] = np.ones(self.num_envs, dtype=np.bool_)
        return info
