"""The paper's evaluation: final-step reconstruction error from fixed starts.

The authors' metrics are in docs/paper-reference.md §6.

The metrics (:mod:`pyskick.metrics`) say which starts and how a sample's errors reduce:

- ``avg``: starts at every other elevation and azimuth (elevations 0, 2, ..., azimuths 0, 2,
  ...); a sample's error is the mean over its starts.
- ``adv``: starts at all ``N * M`` views; a sample's error is the max over its starts.

Episodes are deterministic: an :class:`~pyskick.actors.Actor` picks the motions in its test
mode (greedy for the learned actor; for the random one, uniform actions drawn up front from a
CPU generator seeded with ``seed`` as ``[n, S, T-1]``, so the result depends on neither the
batch size nor the device) unless it forces them (every start of a sample gets the actor's
forced trajectory from that start); observed views are pasted into the reconstruction,
BatchNorm is in eval mode.
All starts of a chunk of samples run as one batch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch
from torch import Tensor

from pyskick import progress
from pyskick._io import atomic_path
from pyskick.actors import Actor, make_actor
from pyskick.actors.base import forced_demonstrations
from pyskick.distributed import resolve_device
from pyskick.envs.rollout import checked_demonstrations, collect_rollout, make_env
from pyskick.errors import UserError, UserTypeError
from pyskick.evaluation.stats import ErrorSummary, improvement_pct, summarize
from pyskick.metrics import DEFAULT_METRIC, Metric, get_metric
from pyskick.models import CompletionPolicy, ModelConfig
from pyskick.models.packed import PackedCompletionPolicy, interleave_demonstrations
from pyskick.run_dir import load_policy

if TYPE_CHECKING:
    from pyskick.data.spec import GridSpec


@dataclass(frozen=True)
class EvalResult:
    """Per-sample errors of one evaluation and their summary."""

    metric: str
    """The metric's name (``"avg"``, ``"adv"``: :data:`pyskick.metrics.METRICS`)."""
    actor: str
    """Name of the actor that moved (``"learned"``, ``"random"`` or a plugin's)."""
    T: int
    """Glimpses per episode."""
    starts: Tensor
    """``[S]`` int64 start view indices ``n * M + m``."""
    per_start: Tensor
    """``[n, S]`` float64 final-step MSE of every sample from every start."""
    per_sample: Tensor
    """``[n]`` float64 per-sample error (the metric's reduction: mean over starts for avg,
    max for adv)."""
    summary: ErrorSummary
    """Mean, std and standard error ×1000."""
    improvement_pct: float | None = None
    """% improvement over the one-view error given to :func:`evaluate`, if any."""
    checkpoint_sha256: str | None = None
    """SHA-256 of the bytes of the evaluated model (:func:`evaluate`: the checkpoint or export
    weights as loaded, never re-read afterwards); None for a policy evaluated in memory."""
    samples_sha256: str | None = None
    """:func:`samples_digest` of the evaluated viewgrids: two results are paired (the same
    samples in the same order) exactly when their digests agree."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (no per-sample arrays)."""
        out: dict[str, Any] = {"metric": self.metric, "actor": self.actor, "T": self.T}
        if self.samples_sha256 is not None:
            out["samples_sha256"] = self.samples_sha256
        out.update(self.summary.to_dict())
        if self.improvement_pct is not None:
            out["improvement_pct"] = self.improvement_pct
        return out

    def save(
        self, path: str | os.PathLike[str], *, extra: Mapping[str, str | int | float] | None = None
    ) -> Path:
        """Write the per-sample arrays and the summary to a ``.npz`` file, atomically.

        Keys: ``per_sample [n]``, ``per_start [n, S]``, ``starts [S]``, one scalar per entry of
        :meth:`to_dict`, and one per entry of ``extra`` (e.g. the evaluated checkpoint's
        ``checkpoint_sha256``).
        """
        path = Path(path)
        scalars = {**self.to_dict(), **(extra or {})}
        with atomic_path(path) as tmp, tmp.open("wb") as handle:
            np.savez(
                handle,
                per_sample=self.per_sample.numpy(),
                per_start=self.per_start.numpy(),
                starts=self.starts.numpy(),
                # mypy matches these keys against savez's allow_pickle too.
                **{key: np.asarray(value) for key, value in scalars.items()},  # type: ignore[arg-type]
            )
        return path


def samples_digest(grids: Tensor) -> str:
    """SHA-256 of viewgrids ``[n, N, M, C, H, W]`` (shape, dtype and bytes, in order): the
    identity of an evaluation's test samples, so that paired comparisons can refuse results
    computed on different samples."""
    data = grids.detach().contiguous().cpu()
    digest = hashlib.sha256(f"{data.dtype} {list(data.shape)}".encode())
    digest.update(data.numpy().data)  # a memoryview: no copy of the (contiguous) bytes
    return digest.hexdigest()


EvalBatchSize = int | Literal["auto"]
"""Episodes per forward pass: a positive int, or ``"auto"`` (:func:`auto_eval_batch_size`)."""

_AUTO_CPU = 256
_AUTO_GPU_RANGE = (256, 8192)
_AUTO_GPU_SHARE = 8  # use at most 1/8 of the free memory
_GRIDS_PER_EPISODE = 8  # float32 viewgrids alive per episode: grid, target, decoded, pasted, ...


def auto_eval_batch_size(config: ModelConfig, device: torch.device | str) -> int:
    """The episodes per forward pass that ``"auto"`` means on ``device``: 256 on the CPU (as
    many as stay fast there: larger blocks of memory are handed back to the system after
    every pass); on a GPU as many as fit in an eighth of its free memory at about eight
    float32 viewgrids per episode, between 256 and 8192 (paper SUN360: ~3 MB per episode)."""
    device = torch.device(device)
    if device.type != "cuda":
        return _AUTO_CPU
    free, _ = torch.cuda.mem_get_info(device)
    grid_bytes = 4 * config.n_views * config.channels * config.view_size**2
    fits = free // _AUTO_GPU_SHARE // (_GRIDS_PER_EPISODE * grid_bytes)
    lo, hi = _AUTO_GPU_RANGE
    return int(min(hi, max(lo, fits)))


def resolve_eval_batch_size(
    batch_size: EvalBatchSize, config: ModelConfig, device: torch.device | str
) -> int:
    """``batch_size``, ``"auto"`` resolved (:func:`auto_eval_batch_size`).

    Raises:
        ValueError: neither a positive int nor ``"auto"``.
    """
    if batch_size == "auto":
        return auto_eval_batch_size(config, device)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise UserError(f"batch_size must be a positive int or 'auto', got {batch_size!r}")
    return batch_size


def evaluation_starts(n_elevations: int, n_azimuths: int, metric: str | Metric) -> Tensor:
    """``[S]`` int64 start views of ``metric`` (avg: 2 x 4 = 8 for SUN360, adv: all).

    Raises:
        ValueError: an unknown metric name.
    """
    views = get_metric(metric).starts(n_elevations, n_azimuths)
    return torch.tensor(views, dtype=torch.int64)


@torch.no_grad()
def evaluate_policy(
    policy: CompletionPolicy,
    grids: Tensor,
    *,
    channel_mean: Sequence[float] | None,
    T: int,
    metric: str | Metric = DEFAULT_METRIC,
    actor: Actor | str = "learned",
    sample_indices: Tensor | None = None,
    batch_size: EvalBatchSize = 256,
    seed: int = 0,
    digest: bool = True,
) -> EvalResult:
    """Evaluate ``policy`` on ``grids`` (runs on the policy's device).

    Args:
        policy: the completion policy (left in the train/eval mode it had).
        grids: ``[n, N, M, C, H, W]`` uint8 viewgrids (any device; moved chunk by chunk).
        channel_mean: per-channel mean (0–255) the policy was trained with.
        T: glimpses per episode (1 for a one-view model).
        metric: a registered metric name (``"avg"``, ``"adv"``) or a
            :class:`~pyskick.metrics.Metric`.
        actor: an :class:`~pyskick.actors.Actor` already prepared (on ``grids``, or on a
            larger set that ``sample_indices`` points into), or a registered actor name,
            built here without a one-view model, spec or config and prepared on ``grids``
            (enough for ``"learned"`` and ``"random"``; use :func:`evaluate` or pass an Actor
            for actors that need them).
        sample_indices: ``[n]`` int64 position of each viewgrid in the grids the actor was
            prepared on (its ``forced_actions`` indices); default ``0 .. n-1``.
        batch_size: episodes per forward pass (memory and speed only), or ``"auto"``
            (:func:`auto_eval_batch_size`).
        seed: seed of the ``"random"``-mode motions (drawn as ``[n, S, T-1]`` on the CPU).
        digest: fill ``samples_sha256`` (hashing every byte of ``grids``; validation, which
            compares nothing, leaves it out).

    Returns:
        :class:`EvalResult`.

    Raises:
        ValueError, TypeError: bad grids, metric, actor or sizes.
    """
    T = _checked_T(T)
    if not isinstance(actor, Actor | str):
        raise UserTypeError(
            f"actor must be an Actor or a registered name, got {type(actor).__name__}"
        )
    (result,) = _evaluate_runs(
        policy,
        grids,
        actors=[actor],
        seeds=[seed],
        channel_mean=channel_mean,
        T=T,
        metric=metric,
        sample_indices=sample_indices,
        batch_size=batch_size,
        digest=digest,
    )
    return result


@torch.no_grad()
def evaluate_pack(
    policy: PackedCompletionPolicy,
    grids: Tensor,
    *,
    actors: Sequence[Actor],
    seeds: Sequence[int],
    channel_mean: Sequence[float] | None,
    T: int,
    metric: str | Metric = DEFAULT_METRIC,
    sample_indices: Tensor | None = None,
    batch_size: EvalBatchSize = 256,
    digest: bool = True,
) -> list[EvalResult]:
    """Evaluate the R runs of a packed policy (:func:`~pyskick.models.packed.pack`) on
    ``grids`` at once: run r's result is :func:`evaluate_policy` of run r alone with
    ``actors[r]`` and ``seeds[r]``, up to floating-point rounding (the same episodes, starts
    and motions; every layer of the R runs is one kernel). ``batch_size`` counts the
    episodes of all runs in one forward pass, so memory is that of one run alone (but a pass
    holds at least one sample's episodes of every run: ``S * R``).

    Args:
        policy: the packed policy of R runs (left in the train/eval mode it had).
        grids: ``[n, N, M, C, H, W]`` uint8 viewgrids (any device).
        actors: R prepared actors, run by run; each draws its unforced motions greedily or
            at random (an actor that samples at test time is evaluated alone).
        seeds: R seeds of the ``"random"``-mode motions.
        channel_mean, T, metric, sample_indices, batch_size, digest: as
            :func:`evaluate_policy`.

    Returns:
        R :class:`EvalResult`, run by run.

    Raises:
        ValueError, TypeError: bad grids, metric, actors, seeds or sizes.
    """
    if not isinstance(policy, PackedCompletionPolicy):
        raise UserTypeError(
            f"evaluate_pack takes a packed policy (pyskick.models.packed.pack), got "
            f"{type(policy).__name__}: evaluate a policy alone with evaluate_policy"
        )
    runs = policy.runs
    if len(actors) != runs or len(seeds) != runs:
        raise UserError(
            f"a pack of {runs} runs needs {runs} actors and seeds, got {len(actors)} and "
            f"{len(seeds)}"
        )
    for actor in actors:
        if not isinstance(actor, Actor):
            raise UserTypeError(f"actors must be prepared Actors, got {type(actor).__name__}")
        if runs > 1 and actor.mode(training=False) == "sample":
            raise UserError(
                f"actor {actor.name!r} samples its motions at test time: evaluate its run alone"
            )
    return _evaluate_runs(
        policy,
        grids,
        actors=actors,
        seeds=seeds,
        channel_mean=channel_mean,
        T=T,
        metric=metric,
        sample_indices=sample_indices,
        batch_size=batch_size,
        digest=digest,
    )


def _checked_T(T: int) -> int:
    if isinstance(T, bool) or not isinstance(T, int) or T < 1:
        raise UserError(f"T must be a positive int, got {T!r}")
    return T


def _evaluate_runs(
    policy: CompletionPolicy | PackedCompletionPolicy,
    grids: Tensor,
    *,
    actors: Sequence[Actor | str],
    seeds: Sequence[int],
    channel_mean: Sequence[float] | None,
    T: int,
    metric: str | Metric,
    sample_indices: Tensor | None,
    batch_size: EvalBatchSize,
    digest: bool,
) -> list[EvalResult]:
    """The episodes of R runs (R = 1: a policy alone; else a packed one), every start of a
    chunk of samples for every run in one batch: episode ``(i * S + s) * R + r`` is run r's
    from start s of sample i (the packed models' order). A named actor is built without a
    one-view model, spec or config and prepared on ``grids``. One :class:`EvalResult` per
    run."""
    T = _checked_T(T)
    metric = get_metric(metric)
    cfg = policy.config
    cfg.check_grids(grids, empty_ok=False)
    device = next(policy.parameters()).device
    batch_size = resolve_eval_batch_size(batch_size, cfg, device)
    prepared = []
    for actor in actors:
        if isinstance(actor, str):
            actor = make_actor(actor, field="actor")
            actor.prepare(grids.cpu(), T=T, device=device)
        prepared.append(actor)
    n, R = grids.shape[0], len(prepared)
    if sample_indices is None:
        sample_indices = torch.arange(n)
    elif tuple(sample_indices.shape) != (n,) or sample_indices.dtype != torch.int64:
        raise UserError(
            f"sample_indices must be int64 of shape [{n}] (one per viewgrid), got "
            f"{sample_indices.dtype} {list(sample_indices.shape)}"
        )
    starts = evaluation_starts(cfg.n_elevations, cfg.n_azimuths, metric)
    S = starts.numel()
    env = make_env(cfg, T, channel_mean)
    modes = [actor.mode(training=False) for actor in prepared]
    # Drawn up front, one row per episode, so the motions (and the result) do not depend on
    # batch_size, the device or the pack.
    random_motions = [
        torch.randint(env.n_actions, (n, S, T - 1), generator=torch.Generator().manual_seed(seed))
        if mode == "random" and T > 1
        else None
        for mode, seed in zip(modes, seeds, strict=True)
    ]
    chunk = max(1, batch_size // (S * R))
    was_training = policy.training
    policy.eval()
    try:
        errors: list[Tensor] = []
        with progress.stage(f"evaluate {metric.name}", total=n, unit="grid") as evaluating:
            device_starts = starts.to(device)
            device_indices = sample_indices.to(device)
            for lo in range(0, n, chunk):
                part = grids[lo : lo + chunk]
                if part.device != device:
                    part = part.to(device)
                k = part.shape[0]
                chunk_starts = device_starts.repeat(k)
                demos: tuple[Tensor, Tensor] | None = None
                if T > 1:
                    # Every start of sample lo + i is an episode of that sample.
                    indices = device_indices[lo : lo + k].repeat_interleave(S)
                    per_run = [
                        _forced_motions(actor, indices, chunk_starts, motions, lo, k, T, device)
                        for actor, motions in zip(prepared, random_motions, strict=True)
                    ]
                    demos = interleave_demonstrations(per_run, T - 1, k * S, device)
                rollout = collect_rollout(
                    policy,
                    env,
                    part.repeat_interleave(S * R, dim=0),
                    # Every motion forced: argmax draws nothing from torch's global generator
                    # (in a pack, the unforced runs' are greedy: checked by evaluate_pack).
                    mode=modes[0] if demos is None else "greedy",
                    starts=chunk_starts.repeat_interleave(R),
                    demonstrations=demos,
                    paste=True,
                    final_only=True,
                    # Trusted: the metric's starts; motions drawn in range, or an actor's
                    # forced ones (a plugin actor's are trusted too, as docs/plugins.md says).
                    check_values=False,
                )
                errors.append(rollout.final_errors.view(k, S, R).double())
                evaluating.advance(k)
    finally:
        policy.train(was_training)
    per_run_starts = torch.cat(errors).cpu()  # the one read of the device: [n, S, R]
    samples_sha256 = samples_digest(grids) if digest else None
    results = []
    for r, actor in enumerate(prepared):
        per_start = per_run_starts[:, :, r].contiguous()
        per_sample = metric.reduce(per_start)
        results.append(
            EvalResult(
                metric=metric.name,
                actor=actor.name,
                T=T,
                starts=starts,
                per_start=per_start,
                per_sample=per_sample,
                summary=summarize(per_sample),
                samples_sha256=samples_sha256,
            )
        )
    return results


def _forced_motions(
    actor: Actor,
    indices: Tensor,
    starts: Tensor,
    random_motions: Tensor | None,
    lo: int,
    k: int,
    T: int,
    device: torch.device,
) -> tuple[Tensor, Tensor] | None:
    """One run's ``(actions, mask)`` ``[T-1, k * S]`` for samples ``lo .. lo + k`` on
    ``device``: its actor's forced motions (checked: they are stacked with other runs'), else
    its random ones, else None (drawn by its mode)."""
    demos = forced_demonstrations(actor, indices, starts)
    if demos is not None:
        demos = checked_demonstrations(demos, T, indices.shape[0], device)
    elif random_motions is not None:
        motions = random_motions[lo : lo + k].reshape(indices.shape[0], -1).T.to(device)
        demos = (motions, torch.ones_like(motions, dtype=torch.bool))
    return demos


def evaluate(
    run_or_checkpoint: str | os.PathLike[str],
    grids: Tensor,
    metric: str | Metric = DEFAULT_METRIC,
    *,
    channel_mean: Sequence[float] | None,
    actor: Actor | str | None = None,
    T: int | None = None,
    baseline: EvalResult | float | None = None,
    batch_size: EvalBatchSize = 256,
    device: str = "auto",
    seed: int = 0,
    spec: GridSpec | None = None,
) -> EvalResult:
    """Evaluate a saved run or checkpoint.

    The actor is prepared on ``grids`` before the episodes run. A named actor is built by its
    registered factory with ``one_view`` = the one-view run the evaluated run started from
    (recorded in its checkpoint, else in ``RUN/dataset.json``; None when unknown),
    ``spec`` and the run's config.

    Args:
        run_or_checkpoint: a run folder (its ``best.pt`` is used) or a checkpoint file.
        grids: ``[n, N, M, C, H, W]`` uint8 viewgrids (e.g. the test split).
        metric: a registered metric name (``"avg"``, ``"adv"``) or a
            :class:`~pyskick.metrics.Metric`.
        channel_mean: per-channel mean (0–255) of the dataset.
        actor: override the run's actor: a registered name or an :class:`~pyskick.actors.Actor`.
            Default: the run's ``config.actor`` (``"learned"`` for a pretrained model).
        T: override the glimpse budget; default 1 for a pretrained (one-view) model, else the
            run's T.
        baseline: the one-view result (or its mean error, unscaled) to report the %
            improvement against.
        batch_size: episodes per forward pass, or ``"auto"`` (:func:`auto_eval_batch_size`).
        device: ``"auto"``, ``"cpu"`` or ``"cuda"``.
        seed: seed of ``"random"``-mode motions.
        spec: the dataset's geometry, for actor factories that need it.

    Raises:
        FileNotFoundError: no such run or checkpoint.
        ValueError: an unreadable checkpoint, an unknown actor name or bad arguments.
        TypeError: an actor or a baseline of another type.
    """
    if actor is not None and not isinstance(actor, Actor | str):
        raise UserTypeError(
            f"actor must be an Actor or a registered name, got {type(actor).__name__}"
        )
    if baseline is not None and (
        isinstance(baseline, bool) or not isinstance(baseline, EvalResult | int | float)
    ):
        raise UserTypeError(
            "baseline must be the one-view model's EvalResult (or its mean error, a number), "
            f"got {type(baseline).__name__} {baseline!r:.60}: evaluate the one-view run first "
            "and pass its result"
        )
    # Under torchrun each rank evaluates on its own GPU.
    target = resolve_device(device)
    saved = load_policy(run_or_checkpoint, target)
    policy = saved.policy
    if T is None:
        T = saved.T
    if actor is None:
        actor = saved.actor
    if isinstance(actor, str):
        actor = make_actor(
            actor, one_view=saved.init, spec=spec, config=saved.config, field="actor"
        )
    policy.config.check_grids(grids, empty_ok=False)
    actor.prepare(grids.cpu(), T=T, device=target)
    result = evaluate_policy(
        policy,
        grids,
        channel_mean=channel_mean,
        T=T,
        metric=metric,
        actor=actor,
        batch_size=batch_size,
        seed=seed,
    )
    result = dataclasses.replace(result, checkpoint_sha256=saved.sha256)
    if baseline is None:
        return result
    reference = baseline.summary.mean_x1000 if isinstance(baseline, EvalResult) else baseline * 1e3
    pct = improvement_pct(result.summary.mean_x1000, reference)
    return dataclasses.replace(result, improvement_pct=pct)
