"""What a training run's checkpoint holds, and how a run is put back where it stopped.

A checkpoint is a plain dict (:mod:`pyskick.checkpoint` writes and reads it atomically):
:func:`training_state` builds it from a set-up trainer, :func:`restore_training` restores a
trainer built with the checkpoint's config from it, exactly (weights, optimizer, baselines,
sidekick schedules, RNGs, the epoch).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import nn

from pyskick.checkpoint import capture_rng_state, restore_rng_state
from pyskick.distributed import collective_device
from pyskick.errors import UserError
from pyskick.models import CompletionPolicy, ModelConfig
from pyskick.sidekicks.base import ScoredSidekick, Sidekick

if TYPE_CHECKING:
    from pyskick.config import TrainConfig
    from pyskick.distributed import DistContext
    from pyskick.training.baselines import AverageBaseline, ControlVariate


class Checkpointed(Protocol):
    """What a training run's checkpoint saves and restores (the trainer's parts once set up)."""

    stage: str
    """``"pretrain"`` or ``"train"``."""
    init: str | None
    """The one-view run the run started from (resolved path; where it is now, after a
    resume that found it moved), or None."""
    init_sha256: str | None
    """SHA-256 of that run's checkpoint when the run started (:func:`~pyskick.run_dir.
    checkpoint_digest`), or None (no one-view run, or a run whose checkpoints predate it)."""
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
    device: torch.device
    """This rank's device (where collectives run)."""
    start_epoch: int
    """The first epoch still to train."""
    critic_calibrated: bool
    best_val: float
    history: list[dict[str, float]]
    pack_record: dict[str, Any] | None
    """The pack this run is trained in (run folders, its index), or None alone."""
    scored_with: dict[str, Any] | None
    """What its sidekick's scores depend on (:func:`sidekick_scores`), or None."""


def training_state(run: Checkpointed, epoch: int) -> dict[str, Any]:
    """Everything a resumed run needs after ``epoch``, as plain types and tensors.

    Keys: ``stage``, ``epoch``, ``init``, ``init_sha256``, ``config``, ``model_config``,
    ``model``, ``frozen``, ``critic``, ``optimizer``, ``baseline``, ``control_variate``,
    ``critic_calibrated``, ``sidekick``,
    ``sidekick_name``, ``rng`` (``global``; ``actions``: one generator state per rank),
    ``best_val``, ``history``, ``pack`` (None for a run trained alone), ``sidekick_scores``
    (:func:`sidekick_scores` at the run's start); :func:`save_checkpoint` adds ``format``.

    Under ``torchrun`` every rank must call it (the action generators are gathered).
    """
    action_states = [run.action_generator.get_state()]
    if run.dist.distributed:
        gathered: list[Any] = [None] * run.dist.world_size
        with collective_device(run.device):  # nccl stages the bytes on this rank's GPU
            torch.distributed.all_gather_object(gathered, action_states[0])
        action_states = gathered
    return {
        "stage": run.stage,
        "epoch": epoch,
        "init": run.init,
        "init_sha256": run.init_sha256,
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
        "pack": run.pack_record,
        "sidekick_scores": run.scored_with,
    }


def sidekick_scores(sidekick: Sidekick, T: int) -> dict[str, Any] | None:
    """What a scoring sidekick's scores depend on besides the viewgrids (its
    :meth:`~pyskick.sidekicks.base.ScoredSidekick.score_options`: the one-view model's digest,
    its parameters), as plain types; None for a sidekick without scores."""
    if not isinstance(sidekick, ScoredSidekick):
        return None
    # Through JSON, as the score cache keys them: numpy numbers, enums and tuples become the
    # plain floats, ints, strings and lists a weights-only checkpoint load accepts.
    return dict(json.loads(json.dumps(sidekick.score_options(T))))


def check_same_scores(run_dir: Path, recorded: Any, now: dict[str, Any] | None) -> None:
    """Refuse to resume a run whose sidekick would score otherwise than when the run
    started (``recorded``, its checkpoint's ``sidekick_scores``; None in checkpoints that
    predate it): the rewards or demonstrations of the epochs to come would come from another
    model, and the resume would not be exact.

    Raises:
        UserError: one line naming what changed.
    """
    if not isinstance(recorded, dict) or now is None:
        return
    # Compared as JSON text, so that a NaN option equals itself.
    changed = sorted(
        k
        for k in set(recorded) | set(now)
        if json.dumps(recorded.get(k), sort_keys=True) != json.dumps(now.get(k), sort_keys=True)
    )
    if not changed:
        return
    hint = ""
    if "one_view_sha256" in changed:
        hint = ": the one-view model that scores is not the file it was (trained further?)"
    raise UserError(
        f"cannot resume {run_dir}: its sidekick would score with other {', '.join(changed)} "
        f"than when the run started{hint}"
    )


def resumed_init(
    run_dir: Path,
    recorded: str | None,
    recorded_sha256: str | None,
    given: str | os.PathLike[str] | None,
) -> tuple[str | None, str | None]:
    """The one-view run a resumed run goes on with, and its recorded digest.

    Without ``given``, the recorded one. A ``given`` one at the recorded place is that one; at
    another place (a moved or copied project folder) it is taken only when it is the same
    model: its checkpoint's SHA-256 equals the one recorded when the run started (or, for
    checkpoints that predate that record, the digest of the recorded checkpoint, when it is
    still there).

    Args:
        run_dir: the run being resumed (named in errors).
        recorded: the one-view run its checkpoint (or, before its first checkpoint, its
            ``dataset.json``) records, or None.
        recorded_sha256: the digest recorded with it (``init_sha256``), or None.
        given: the one-view run the resume names, or None.

    Returns:
        ``(init, init_sha256)``: the resolved path to record from now on (or None), and the
        digest.

    Raises:
        UserError: ``given`` is another model, or no digest can tell (one line).
    """
    from pyskick.run_dir import checkpoint_digest, checkpoint_file

    if given is None:
        return recorded, recorded_sha256
    if recorded is None:
        raise UserError(
            f"cannot resume: {run_dir} started from no one-view model, not {given}; leave "
            "--init out to continue it"
        )
    if checkpoint_file(Path(given).resolve()) == checkpoint_file(Path(recorded).resolve()):
        return str(Path(recorded).resolve()), recorded_sha256
    expected = recorded_sha256
    if expected is None and checkpoint_file(recorded).is_file():
        expected = checkpoint_digest(recorded)
    if expected is None:
        raise UserError(
            f"cannot resume: the run started from {recorded}, which is no longer there, and "
            f"its checkpoints predate the digest that would show {given} is the same model; "
            "put the one-view run back there to continue it"
        )
    if checkpoint_digest(given) != expected:
        raise UserError(
            f"cannot resume: the run started from {recorded}, not {given} (another model: "
            "its checkpoint's SHA-256 differs); leave --init out to continue it"
        )
    return str(Path(given).resolve()), expected


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
    _moments_like_weights(run.optimizer)
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


def _moments_like_weights(optimizer: torch.optim.Optimizer) -> None:
    """Give the optimizer's per-element state the memory layout of its parameter (a run saved
    contiguous and resumed channels-last, or the reverse: ``load_state_dict`` keeps the saved
    strides, and Adam's multi-tensor step would fall back to one tensor at a time)."""
    for param, values in optimizer.state.items():
        for key, value in values.items():
            if (
                torch.is_tensor(value)
                and value.shape == param.shape
                and value.stride() != param.stride()
            ):
                values[key] = torch.empty_like(param, dtype=value.dtype).copy_(value)
