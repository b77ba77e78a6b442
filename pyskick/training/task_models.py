"""The models behind the Gymnasium environment's task rewards, and its registered factories.

``gymnasium.make("pyskick/LookAround-v0", reward=...)`` and ``gymnasium.make_vec`` call
:func:`make_lookaround` / :func:`make_lookaround_vector`, which build the environment of
:mod:`pyskick.envs.gym` and give it the :mod:`pyskick.envs.task_rewards` object that ``reward``
names. The models live here, above the environment, because loading a run
(:mod:`pyskick.run_dir`), coverage matrices (:mod:`pyskick.sidekicks.coverage`) and training
a default model belong to higher layers:

- ``"reconstruction"``: ``reward_model`` is a run trained with random motions at the env's
  ``T`` (a run folder, checkpoint or export folder, read by
  :func:`pyskick.run_dir.load_policy`). Without one, :func:`cached_random_actions_run` trains
  one (``cpu-demo`` preset, ``actor="random"``) into the cache on first use, with progress.
- ``"coverage"``: ``reward_model`` is a one-view run; without one the cached one-view model of
  the dataset (:func:`pyskick.training.one_view_cache.cached_one_view`) is used.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import torch

from pyskick import __version__, progress
from pyskick.config import TrainConfig, train_preset
from pyskick.envs.gym import RENDER_FPS, RENDER_MODES, LookAroundGymEnv, LookAroundVectorEnv
from pyskick.envs.task_rewards import (
    RECONSTRUCTION_MODES,
    CoverageReward,
    MapsReward,
    ReconstructionReward,
    TaskReward,
)
from pyskick.files import cache_root, file_digest, file_lock
from pyskick.run_dir import RunDir, load_policy
from pyskick.sidekicks.coverage import one_view_coverage
from pyskick.training.data import TrainData
from pyskick.training.one_view_cache import cached_one_view
from pyskick.training.trainer import train

_LOG = logging.getLogger(__name__)

REWARDS: tuple[str, ...] = ("maps", "reconstruction", "coverage")


def reward_config(T: int, overrides: Mapping[str, Any] | None = None) -> TrainConfig:
    """The config of a default reward model: ``cpu-demo`` with random motions at ``T``."""
    return train_preset("cpu-demo").replace(
        T=T, actor="random", sidekick="none", **dict(overrides or {})
    )


def cached_random_actions_run(
    dataset_path: str | os.PathLike[str], T: int, overrides: Mapping[str, Any] | None = None
) -> Path:
    """The run folder of a random-motions model for a dataset at ``T``, trained if needed.

    The one-view model comes from the one-view cache; the run lives under
    ``$PYSKICK_CACHE_DIR/random-actions/<key>/`` (key: the dataset's bytes, the config, the
    pyskick version). A file lock serialises processes; an interrupted run is resumed. Progress
    is reported through :mod:`pyskick.progress` (a ``"reward model"`` stage around the
    pretraining and training stages).

    Args:
        dataset_path: the dataset's HDF5 file.
        T: the environment's glimpse budget.
        overrides: :class:`~pyskick.config.TrainConfig` fields replacing :func:`reward_config`'s.
    """
    config = reward_config(T, overrides)
    fields = config.to_dict()
    fields.pop("device")
    payload = json.dumps(
        {"dataset": file_digest(dataset_path), "config": fields, "pyskick": __version__},
        sort_keys=True,
        default=str,
    )
    run = cache_root() / "random-actions" / hashlib.sha256(payload.encode()).hexdigest()[:20]
    run.parent.mkdir(parents=True, exist_ok=True)
    waiting = f"waiting for another process to train {run}"
    with file_lock(run.parent / f"{run.name}.lock", waiting):
        done = RunDir(run).epochs_done()
        # Finished runs are reused in seconds. Otherwise this is the one long step of making an
        # environment, and it may run inside gymnasium.make in a plain script where no progress
        # is drawn: WARNING records reach stderr even when logging is not configured.
        if done >= config.epochs:  # finished: reused as it is, in seconds
            _LOG.info("reusing the default reward model in %s", run)
            return run
        _LOG.warning(
            "training the default reward model (a one-view model, then a random-motions model, "
            "%d + %d epochs) in %s; cached for later environments, or pass reward_model=",
            config.pretrain_epochs,
            config.epochs,
            run,
        )
        with progress.stage("reward model", total=2, unit="stage", lines="each") as bar:
            data = TrainData.from_file(dataset_path)
            one_view = cached_one_view(dataset_path, config, data)
            bar.advance(label="one-view model")
            _LOG.warning("reward model: the one-view model is ready (%.0f s)", bar.elapsed)
            train(config, run, data, init=one_view, resume=done > 0)
            bar.advance(label="random-motions model")
            _LOG.warning("reward model: the random-motions model is ready (%.0f s)", bar.elapsed)
    return run


def _dataset_path(dataset: str | os.PathLike[str] | None) -> Path:
    from pyskick.data import resolve_dataset

    return Path(resolve_dataset(dataset or "synthetic-scenes"))


def _uint8(grids: torch.Tensor) -> torch.Tensor:
    return grids if grids.dtype == torch.uint8 else grids.round().clamp(0, 255).to(torch.uint8)


def build_task_reward(
    reward: str,
    env: LookAroundGymEnv | LookAroundVectorEnv,
    *,
    dataset: str | os.PathLike[str] | None,
    from_grids: bool,
    reward_model: str | os.PathLike[str] | None = None,
    reward_mode: str = "final",
    reward_training: Mapping[str, Any] | None = None,
) -> TaskReward:
    """The task reward ``reward`` names, for ``env``'s viewgrids.

    Args:
        reward: ``"maps"``, ``"reconstruction"`` or ``"coverage"``.
        env: the environment (its grids, ``T``, channel mean and frame).
        dataset: the dataset the env draws from (for the default models).
        from_grids: the env was given ``grids`` rather than a dataset (no default model then).
        reward_model: a run folder, checkpoint or export folder (module docstring).
        reward_mode: ``"final"`` or ``"improvement"`` (reconstruction only).
        reward_training: config overrides of the default reconstruction model.

    Raises:
        ValueError: an unknown reward or mode, a model that does not fit, or a default model
            asked for without a dataset file.
    """
    if reward not in REWARDS:
        raise ValueError(f"reward must be one of {', '.join(REWARDS)}, got {reward!r}")
    if reward_mode not in RECONSTRUCTION_MODES:
        raise ValueError(
            f"reward_mode must be one of {', '.join(RECONSTRUCTION_MODES)}, got {reward_mode!r}"
        )
    if reward == "maps":
        return MapsReward()
    if reward_model is None and from_grids:
        raise ValueError(
            f"reward={reward!r} with grids needs reward_model (a run folder); the default "
            "model is trained from a dataset file"
        )
    batched = env.batched
    if reward == "reconstruction":
        if reward_model is None:
            reward_model = cached_random_actions_run(
                _dataset_path(dataset), batched.T, reward_training
            )
        task = ReconstructionReward(load_policy(reward_model).policy, reward_mode)  # type: ignore[arg-type]
        task.check_grids(
            tuple(env.grids.shape),
            batched.known_azimuth,
            mean_subtracted=batched.channel_mean is not None and bool(batched.channel_mean.any()),
        )
        return task
    if reward_model is None:
        path = _dataset_path(dataset)
        reward_model = cached_one_view(
            path, reward_config(batched.T, reward_training), TrainData.from_file(path)
        )
    mean = batched.channel_mean
    coverage = one_view_coverage(
        reward_model,
        _uint8(env.grids),
        channel_mean=None if mean is None else mean.tolist(),
    )
    coverage_task = CoverageReward(coverage)
    coverage_task.check_grids(tuple(env.grids.shape))
    return coverage_task


_Env = TypeVar("_Env", LookAroundGymEnv, LookAroundVectorEnv)


def _paying(
    env: _Env,
    reward: str,
    reward_model: str | os.PathLike[str] | None,
    reward_mode: str,
    reward_training: Mapping[str, Any] | None,
) -> _Env:
    """``env`` with the named task reward set (:func:`build_task_reward`)."""
    env.task_reward = build_task_reward(
        reward,
        env,
        dataset=env.episode_options.dataset,
        from_grids=env.episode_options.grids is not None,
        reward_model=reward_model,
        reward_mode=reward_mode,
        reward_training=reward_training,
    )
    return env


def make_lookaround(
    *,
    reward: str = "maps",
    reward_model: str | os.PathLike[str] | None = None,
    reward_mode: str = "final",
    reward_training: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> LookAroundGymEnv:
    """``gymnasium.make("pyskick/LookAround-v0", ...)``: a :class:`LookAroundGymEnv` paying
    the named task reward (:func:`build_task_reward`); ``kwargs`` go to the env."""
    env = LookAroundGymEnv(**kwargs)
    return _paying(env, reward, reward_model, reward_mode, reward_training)


def make_lookaround_vector(
    num_envs: int = 1,
    *,
    reward: str = "maps",
    reward_model: str | os.PathLike[str] | None = None,
    reward_mode: str = "final",
    reward_training: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> LookAroundVectorEnv:
    """``gymnasium.make_vec("pyskick/LookAround-v0", ...)``: a :class:`LookAroundVectorEnv`
    paying the named task reward; ``kwargs`` go to the env."""
    env = LookAroundVectorEnv(num_envs, **kwargs)
    return _paying(env, reward, reward_model, reward_mode, reward_training)


# gymnasium.make reads the entry point's metadata to check render_mode before calling it.
make_lookaround.metadata = {  # type: ignore[attr-defined]
    "render_modes": RENDER_MODES,
    "render_fps": RENDER_FPS,
}
make_lookaround_vector.metadata = LookAroundVectorEnv.metadata  # type: ignore[attr-defined]
