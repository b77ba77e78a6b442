"""Atomic, weights-only-loadable checkpoints, what a training run's checkpoint holds, and
exact RNG capture.

A checkpoint is a plain dict of tensors, numbers, strings, lists and dicts, written with
``torch.save`` to a temporary file in the destination folder and renamed over the target, so a
crash never leaves a torn file; it always loads with ``torch.load(weights_only=True)``.

A training run's checkpoint (format :data:`FORMAT_VERSION`) is written by
:func:`training_state` and read back by :func:`restore_training`; both work on a
:class:`Checkpointed` run (the :class:`~pyskick.training.trainer.Trainer`).

An exported model (``pyskick export``; docs/data-formats.md, "Exported models") is a folder
marked by :data:`EXPORT_MARKER`: the policy's weights in :data:`EXPORT_WEIGHTS` (safetensors,
never unpickled) and its run's ``config.json``. :func:`load_run` reads it like a run folder, so
every loader of a run's policy takes one.
"""

from __future__ import annotations

import os
import random
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import nn

from pyskick._io import atomic_path, read_json_object
from pyskick.errors import UserError, UserFileNotFoundError
from pyskick.models import CompletionPolicy, ModelConfig

if TYPE_CHECKING:
    from pyskick.config import TrainConfig
    from pyskick.distributed import DistContext
    from pyskick.sidekicks.base import Sidekick
    from pyskick.training.baselines import AverageBaseline, ControlVariate

FORMAT_VERSION = 1

EXPORT_MARKER = "pyskick-export.json"
"""The file that marks an export folder (its format, pyskick version and provenance)."""
EXPORT_WEIGHTS = "model.safetensors"
"""The policy's ``state_dict`` in an export folder."""
EXPORT_FORMAT = 1
"""The export folder format this pyskick writes and reads (up to)."""


def save_checkpoint(path: str | os.PathLike[str], state: dict[str, Any]) -> Path:
    """Write ``state`` atomically to ``path`` (temp file in the same folder, then rename).

    Args:
        path: destination file.
        state: plain-typed dict; a ``format`` key with :data:`FORMAT_VERSION` is added.

    Returns:
        The destination path.
    """
    path = Path(path)
    with atomic_path(path, fsync=True) as tmp:
        torch.save({"format": FORMAT_VERSION, **state}, tmp)
    return path


def load_checkpoint(
    path: str | os.PathLike[str], *, map_location: str | torch.device = "cpu"
) -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint` (``weights_only=True``).

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a pyskick checkpoint, or from a newer format.
    """
    path = Path(path)
    if not path.is_file():
        raise UserFileNotFoundError(f"checkpoint {path} does not exist")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:
        # torch's messages run over several lines; name the file and the kind of damage.
        if not zipfile.is_zipfile(path):
            why = "truncated, damaged or not a checkpoint file"
        else:
            why = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:120]}"
        raise UserError(f"{path} is not a readable pyskick checkpoint ({why})") from exc
    if not isinstance(state, dict) or "format" not in state:
        raise UserError(f"{path} is not a pyskick checkpoint (no 'format' key)")
    if state["format"] > FORMAT_VERSION:
        raise UserError(
            f"{path} has checkpoint format {state['format']}; this pyskick reads up to "
            f"{FORMAT_VERSION}: upgrade pyskick"
        )
    return state


POLICY_KEYS = ("model", "model_config")
"""What a checkpoint needs to rebuild its policy (:func:`policy_from_state`)."""
RUN_KEYS = (*POLICY_KEYS, "config", "stage")
"""What every checkpoint of a training run holds (see :func:`training_state`)."""


def load_run(
    run_or_checkpoint: str | os.PathLike[str],
    *,
    map_location: str | torch.device = "cpu",
    keys: tuple[str, ...] = RUN_KEYS,
) -> tuple[Path, dict[str, Any]]:
    """The checkpoint of a run folder (its ``best.pt``), an export folder (its weights, see
    :func:`load_export`) or a checkpoint file, and its state.

    Args:
        run_or_checkpoint: a run folder, an export folder or a checkpoint file.
        map_location: where its tensors are loaded.
        keys: the entries it must hold (:data:`POLICY_KEYS` where only the policy is used).

    Raises:
        FileNotFoundError: no such run or checkpoint.
        ValueError: not a checkpoint of a pyskick training run (an entry is missing).
    """
    path = Path(run_or_checkpoint)
    if is_export(path):
        path, state = load_export(path, map_location=map_location)
    else:
        if path.is_dir():
            path = path / "best.pt"
        state = load_checkpoint(path, map_location=map_location)
    for key in keys:
        if key not in state:
            raise UserError(f"{path} is not a pyskick training checkpoint (no {key!r})")
    return path, state


def is_export(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is an export folder (it holds :data:`EXPORT_MARKER`)."""
    return (Path(path) / EXPORT_MARKER).is_file()


def save_weights(path: str | os.PathLike[str], weights: dict[str, torch.Tensor]) -> Path:
    """Write ``weights`` (a ``state_dict``) as safetensors, atomically."""
    from safetensors.torch import save_file

    path = Path(path)
    # safetensors stores each tensor on its own: no shared or strided storage.
    plain = {key: value.detach().cpu().contiguous().clone() for key, value in weights.items()}
    with atomic_path(path, fsync=True) as tmp:
        save_file(plain, str(tmp), metadata={"format": "pt"})
    return path


def load_export(
    folder: str | os.PathLike[str], *, map_location: str | torch.device = "cpu"
) -> tuple[Path, dict[str, Any]]:
    """The weights file of an export folder and a checkpoint-like state read from it
    (``model``, ``model_config``, ``config``, ``stage``, ``init`` None, and ``spec``: the
    ``GridSpec`` fields of its dataset when recorded), without unpickling anything.

    Raises:
        FileNotFoundError: the folder lacks its weights.
        ValueError: a damaged or newer export (names the file).
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    folder = Path(folder)
    marker = _json_object(folder / EXPORT_MARKER)
    version = marker.get("format")
    if not isinstance(version, int) or version > EXPORT_FORMAT:
        raise UserError(
            f"{folder / EXPORT_MARKER} has export format {version!r}; this pyskick reads up to "
            f"{EXPORT_FORMAT}: upgrade pyskick"
        )
    weights = folder / EXPORT_WEIGHTS
    if not weights.is_file():
        raise UserFileNotFoundError(f"export {folder} has no {EXPORT_WEIGHTS}")
    config = _json_object(folder / "config.json")
    if not isinstance(config.get("model_config"), dict) or "stage" not in config:
        raise UserError(f"{folder / 'config.json'} is not an export's config (no model_config)")
    try:
        model = load_file(str(weights), device=str(torch.device(map_location)))
    except (SafetensorError, OSError, ValueError) as exc:
        why = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{weights} is not a readable safetensors file ({why})") from exc
    train_config = {
        key: value
        for key, value in config.items()
        if key not in ("stage", "model_config", "loggers")
    }
    dataset = _json_object(folder / "dataset.json") if (folder / "dataset.json").is_file() else {}
    return weights, {
        "format": FORMAT_VERSION,
        "model": model,
        "model_config": config["model_config"],
        "config": train_config,
        "stage": config["stage"],
        "init": None,
        "spec": dataset.get("spec"),
    }


def _json_object(path: Path) -> dict[str, Any]:
    """A JSON object file of an export folder.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a readable JSON object.
    """
    if not path.is_file():
        raise UserFileNotFoundError(f"{path} does not exist")
    return read_json_object(path, "JSON file")


def policy_from_state(
    state: dict[str, Any], device: str | torch.device = "cpu"
) -> CompletionPolicy:
    """The policy saved in a run's checkpoint ``state``, on ``device``, in eval mode.

    Torch's global RNG is left as it was (building a policy draws initial weights from it,
    which the saved ones then replace).
    """
    with torch.random.fork_rng(devices=[]):
        policy = CompletionPolicy(ModelConfig.from_dict(state["model_config"]))
    policy.load_state_dict(state["model"])
    return policy.to(device).eval()


class Checkpointed(Protocol):
    """What a training run's checkpoint saves and restores (the trainer's parts once set up)."""

    stage: str
    """``"pretrain"`` or ``"train"``."""
    init: str | None
    """The one-view run the run started from (resolved path), or None."""
    config: TrainConfig
    model_config: ModelConfig
    policy: CompletionPolicy
    critic: nn.Module | None
    optimizer: torch.optim.Optimizer
    baseline: AverageBaseline
    control_variate: ControlVariate
    """The residual critic's weight in the advantages (``TrainConfig.critic_gate``)."""
    sidekick: Sidekick
    action_generator: torch.Generator
    """This rank's generator of sampled actions."""
    dist: DistContext
    start_epoch: int
    """The first epoch still to train."""
    critic_calibrated: bool
    best_val: float
    history: list[dict[str, float]]


def training_state(run: Checkpointed, epoch: int) -> dict[str, Any]:
    """Everything a resumed run needs after ``epoch``, as plain types and tensors.

    Keys: ``stage``, ``epoch``, ``init``, ``config``, ``model_config``, ``model``, ``frozen``,
    ``critic``, ``optimizer``, ``baseline``, ``control_variate``, ``critic_calibrated``,
    ``sidekick``,
    ``sidekick_name``, ``rng`` (``global``; ``actions``: one generator state per rank),
    ``best_val``, ``history``; :func:`save_checkpoint` adds ``format``.

    Under ``torchrun`` every rank must call it (the action generators are gathered).
    """
    action_states = [run.action_generator.get_state()]
    if run.dist.distributed:
        gathered: list[Any] = [None] * run.dist.world_size
        torch.distributed.all_gather_object(gathered, action_states[0])
        action_states = gathered
    return {
        "stage": run.stage,
        "epoch": epoch,
        "init": run.init,
        "config": run.config.to_dict(),
        "model_config": run.model_config.to_dict(),
        "model": run.policy.state_dict(),
        "frozen": list(run.policy.frozen_modules),
        "critic": run.critic.state_dict() if run.critic is not None else None,
        "optimizer": run.optimizer.state_dict(),
        "baseline": run.baseline.state_dict(),
        "control_variate": run.control_variate.state_dict(),
        "critic_calibrated": run.critic_calibrated,
        "sidekick": run.sidekick.state_dict(),
        "sidekick_name": run.sidekick.name,
        "rng": {"global": capture_rng_state(), "actions": action_states},
        "best_val": run.best_val,
        "history": list(run.history),
    }


def restore_training(run: Checkpointed, state: dict[str, Any], grid_shape: tuple[int, ...]) -> None:
    """Put ``run`` where the checkpoint ``state`` of :func:`training_state` left it: weights,
    optimizer, baseline, sidekick, RNGs, and the epoch to continue from.

    Args:
        run: a run built with the checkpoint's config.
        state: the checkpoint.
        grid_shape: the data's ``(N, M, C, H)`` (named when the model does not match).

    Raises:
        ValueError: the data's grids, the critic's kind or the number of processes differ.
    """
    if ModelConfig.from_dict(state["model_config"]) != run.model_config:
        raise UserError(
            f"cannot resume: the data's viewgrids {list(grid_shape)} do not match the run's model"
        )
    run.policy.load_state_dict(state["model"])
    if run.critic is not None:
        # Checkpoints from before critic_residual existed hold critics of the return.
        recorded = bool(state["config"].get("critic_residual", False))
        if recorded != run.config.critic_residual:
            raise UserError(
                "cannot resume: the run's critic was trained with critic_residual = "
                f"{recorded}, this run has {run.config.critic_residual}"
            )
        # Checkpoints from before critic_gate existed used the critic's whole output.
        gated = bool(state["config"].get("critic_gate", False))
        if gated != run.config.critic_gate:
            raise UserError(
                "cannot resume: the run's critic was trained with critic_gate = "
                f"{gated}, this run has {run.config.critic_gate}"
            )
        run.critic.load_state_dict(state["critic"])
    run.optimizer.load_state_dict(state["optimizer"])
    run.baseline.load_state_dict(state["baseline"])
    if "control_variate" in state:  # absent from checkpoints that predate it (never used)
        run.control_variate.load_state_dict(state["control_variate"])
    run.sidekick.load_state_dict(state["sidekick"])
    restore_rng_state(state["rng"]["global"])
    action_states = state["rng"]["actions"]
    if len(action_states) != run.dist.world_size:
        raise UserError(
            f"cannot resume: the run used {len(action_states)} processes, this one has "
            f"{run.dist.world_size}"
        )
    run.action_generator.set_state(action_states[run.dist.rank].to("cpu"))
    run.start_epoch = int(state["epoch"]) + 1
    run.critic_calibrated = bool(state.get("critic_calibrated", True))
    run.best_val = float(state["best_val"])
    run.history = [dict(item) for item in state["history"]]


def capture_rng_state() -> dict[str, Any]:
    """The global RNGs, as plain types. pyskick itself draws only from torch's RNGs; Python's
    ``random`` is captured too for plugins that use it."""
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "python": _python_state_to_plain(random.getstate()),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`capture_rng_state` captured."""
    torch.set_rng_state(state["torch"])
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _python_state_to_plain(state: tuple[Any, ...]) -> list[Any]:
    version, internal, gauss = state
    return [version, list(internal), gauss]
