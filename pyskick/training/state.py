"""What a training run's checkpoint holds, and how a run is put back where it stopped.

A checkpoint is a plain dict (:mod:`pyskick.checkpoint` writes and reads it atomically):
:func:`training_state` builds it from a set-up trainer, :func:`restore_training` restores a
trainer built with the checkpoint's config from it, exactly (weights, optimizer, baselines,
sidekick schedules, RNGs, the epoch).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import nn

from pyskick.checkpoint import capture_rng_state, restore_rng_state
from pyskick.distributed import collective_device
from pyskick.errors import UserError
from pyskick.models import CompletionPolicy, ModelConfig
from pyskick.run_dir import relative_init
from pyskick.sidekicks.base import ScoredSidekick, Sidekick

if TYPE_CHECKING:
    from pyskick.config import TrainConfig
    from pyskick.distributed import DistContext
    from pyskick.training.baselines import AverageBaseline, ControlVariate


class Checkpointed(Protocol):
    """What a training run's checkpoint saves and restores (the trainer's parts once set up)."""

    stage: str
    """``"pretrain"`` or ``"train"``."""
    run_dir: Path
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

    Keys: ``stage``, ``epoch``, ``init``, ``init_sha256``, ``init_relative``, ``config``,
    ``model_config``, ``model``, ``frozen``, ``critic``, ``optimizer``, ``baseline``,
    ``control_variate``, ``critic_calibrated``, ``sidekick``, ``sidekick_name``, ``rng``
    (``global``; ``actions``: one generator state per rank), ``best_val``, ``history``,
    ``pack`` (None for a run trained alone), ``sidekick_scores`` (:func:`sidekick_scores` at
    the run's start); :func:`save_checkpoint` adds ``format``.

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
        "init_relative": None if run.init is None else relative_init(run.run_dir, run.init),
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
    run_dir: Path, recorded: Mapping[str, Any], given: str | os.PathLike[str] | None
) -> tuple[str | None, str | None]:
    """The one-view run a resumed run goes on with: the one it started from, wherever it is
    now, and never another model.

    The run's own is found at its recorded place or, that gone, at the same place relative to
    the run folder (a project folder moved as a whole; :func:`~pyskick.run_dir.locate_init`).
    A ``given`` one (``--init``, or the study's own in ``reproduce``) is taken at any place
    when it is the same model: its checkpoint's SHA-256 equals ``init_sha256``. Where the
    digest is recorded, the model at the recorded place must still have it (not trained
    further since). For checkpoints that predate the digest, another place is taken when its
    checkpoint equals the recorded one while that is still there, else when it holds the
    run's frozen modules (Sense and Fuse, copied from the one-view model and never trained)
    bit for bit.

    Args:
        run_dir: the run being resumed (named in errors; where relative places start).
        recorded: its checkpoint or, before its first checkpoint, its ``dataset.json``: the
            ``init``, ``init_sha256`` and ``init_relative`` keys (and a checkpoint's
            ``model`` and ``frozen``).
        given: the one-view run the resume names, or None.

    Returns:
        ``(init, init_sha256)``: the path to record from now on (resolved; the recorded one
        when it is gone and nothing was given: a run whose one-view model is needed fails
        where it is read, naming it) and the recorded digest.

    Raises:
        UserError: ``given`` is another model, or nothing can tell (one line).
        UserFileNotFoundError: ``given`` holds no checkpoint.
    """
    from pyskick.run_dir import checkpoint_digest, checkpoint_file, holds_checkpoint, locate_init

    init, digest = recorded.get("init"), recorded.get("init_sha256")
    if init is None:
        if given is None:
            return None, None
        raise UserError(
            f"cannot resume: {run_dir} started from no one-view model, not {given}; leave "
            "--init out to continue it"
        )
    found = Path(locate_init(run_dir, recorded) or init)
    place = found if given is None else Path(given)
    at_home = _same_checkpoint(place, found) or _same_checkpoint(place, init)
    if at_home and not checkpoint_file(place).is_file():
        # Gone: a run that reads it again (a sidekick, the demo-actions actor) fails there,
        # naming it; one that does not (ltla: its frozen weights are its own) goes on.
        return str(init), digest
    now = checkpoint_digest(place)
    if digest is not None and now != digest:
        if at_home:
            raise UserError(
                f"cannot resume: the one-view run {place} is not the model {run_dir} started "
                "from (its checkpoint changed since: trained further?)"
            )
        hint = (
            "leave --init out to continue it"
            if holds_checkpoint(found, digest)
            else "give --init the one-view run it started from"
        )
        raise UserError(
            f"cannot resume: the run started from {init}, not {given} (another model: its "
            f"checkpoint's SHA-256 differs); {hint}"
        )
    if digest is None and not at_home:
        why = _legacy_difference(recorded, init, now, place)
        if why is not None:
            raise UserError(
                f"cannot resume: the run started from {init}, and nothing shows that {given} "
                f"is the same model (its records predate the digest, and {why}"
            )
    return str(place.resolve()), digest


def _same_checkpoint(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    from pyskick.run_dir import checkpoint_file

    return checkpoint_file(Path(a).resolve()) == checkpoint_file(Path(b).resolve())


def _legacy_difference(recorded: Mapping[str, Any], init: str, now: str, place: Path) -> str | None:
    """For records without ``init_sha256``: None when the checkpoint at ``place`` (digest
    ``now``) is the one the run started from: the recorded checkpoint's bytes while it is
    there, else a one-view (pretraining) checkpoint holding the run's frozen modules'
    parameters (never trained: the one-view model's) bit for bit; else why not, with what
    to do (the end of a refusal)."""
    from pyskick.checkpoint import POLICY_KEYS, load_run
    from pyskick.run_dir import checkpoint_digest, checkpoint_file

    if checkpoint_file(init).is_file():
        same = checkpoint_digest(init) == now
        return None if same else "the bytes differ); leave --init out to continue it"
    back = "); put that one-view run back there to continue it"
    frozen, model = recorded.get("frozen"), recorded.get("model")
    if not frozen or not isinstance(model, Mapping):
        return "no checkpoint holds the run's frozen weights to compare" + back
    _, state = load_run(place, keys=POLICY_KEYS)
    if state.get("stage") != "pretrain":
        return "it is no one-view (pretraining) checkpoint" + back
    theirs = state["model"]
    # Parameters only: the frozen Fuse's BatchNorm statistics move in batchnorm="train" mode.
    names = [
        k for k in model if k.split(".", 1)[0] in frozen and not k.endswith(_BATCHNORM_BUFFERS)
    ]
    same = bool(names) and all(
        k in theirs and torch.equal(model[k].cpu(), theirs[k].cpu()) for k in names
    )
    return None if same else "the frozen weights differ" + back


_BATCHNORM_BUFFERS = ("running_mean", "running_var", "num_batches_tracked")


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
