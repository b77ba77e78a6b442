"""Packed training: R runs of one architecture trained as one model (docs/training.md,
"Packed runs").

A pack is R ordinary runs (:class:`~pyskick.training.Trainer`), each with its own folder,
config, seed, batch order, start views, action generator, actor, sidekick, baseline, critic
gate and optimizer state, whose networks are packed into one
(:mod:`pyskick.models.packed`) so that every step is one set of kernels for all of them. What
each run sees is what it would see alone: its own batches (episode ``b * R + r`` of a packed
batch is its b-th), its own sampled actions (drawn from its own generator), its own loss
(summed: each run's parameters get only its gradient), its gradients clipped by its own norm,
and one Adam over the stacked parameters, which is per element and so equals R Adams (a
parameter a run does not train, such as a random actor's act head, is restored after each
update). Only floating-point rounding differs from the runs alone.

Between epochs the pack hands its state back to the R trainers and validates every run (at
once on a GPU: :meth:`PackTrainer.validate`); the trainers log and write their checkpoints as
they do alone; the R checkpoints of one epoch are committed together
(:func:`commit`), so a pack killed at any moment resumes with every run at the same epoch.
Every run records the pack (``config.json``, checkpoints); resuming one alone or in another
pack is refused (:func:`~pyskick.training.setup.check_pack`).
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from pyskick import progress
from pyskick.actors import Actor
from pyskick.actors.base import forced_demonstrations
from pyskick.checkpoint import load_checkpoint, save_checkpoint
from pyskick.config import TRAIN_ONLY_FIELDS, TrainConfig
from pyskick.distributed import resolve_device
from pyskick.envs.lookaround import checked_reward_maps
from pyskick.envs.rollout import Rollout, checked_demonstrations, collect_rollout, make_env
from pyskick.errors import UserError
from pyskick.evaluation.evaluate import (
    evaluate_pack,
    evaluation_starts,
    resolve_eval_batch_size,
)
from pyskick.models.act import select_actions
from pyskick.models.critics import FullObservabilityCritic, PartialObservabilityCritic
from pyskick.models.memory_format import use_channels_last
from pyskick.models.packed import (
    interleave_demonstrations,
    pack,
    set_packed_convs,
    unpack_into,
)
from pyskick.run_dir import RunDir
from pyskick.sidekicks.base import Sidekick
from pyskick.timing import SpanTimer, span
from pyskick.training.batches import GridSource, resolve_data_on_device
from pyskick.training.compiled import CompiledNetwork
from pyskick.training.data import TrainData
from pyskick.training.graphs import StepGraph
from pyskick.training.loggers import Dispatcher
from pyskick.training.returns import reward_to_go
from pyskick.training.setup import Stage
from pyskick.training.step import StepMetrics, autocast
from pyskick.training.trainer import (
    Trainer,
    TrainResult,
    epoch_summary,
    perf_metrics,
    run_epoch,
)

PENDING = ".next"
"""Suffix of a checkpoint written but not yet committed (:func:`commit`)."""


@dataclass(frozen=True)
class PackMember:
    """One run of a pack: what :func:`~pyskick.training.train` takes for one run."""

    config: TrainConfig
    out_dir: str | os.PathLike[str]
    init: str | os.PathLike[str] | None = None
    sidekick: Sidekick | None = None
    actor: Actor | None = None
    loggers: Sequence[str] | None = None


_SAME_CONFIG = (
    "batch_size", "lr", "weight_decay", "frozen_batchnorm", "memorize", "start_zeroing",
    "save_every", "precision", "channels_last", "compile", "cuda_graph", "decode_once",
    "cudnn_benchmark", "packed_convs", "data_on_device", "deterministic",
)  # fmt: skip
"""Settings the runs of a pack must share that their configurations give as they are:
compared before any run is set up (seeded, the autotuner turned on), so that a refused pack
changes nothing in the process either. A pretraining pack leaves out the
:data:`~pyskick.config.TRAIN_ONLY_FIELDS` (a resumed pretraining keeps the recorded ones)."""


PACKABLE_CRITICS = ("critic", "asymm-critic")
"""The learned critics a pack packs (pyskick's own, residual: ``critic_residual = true``);
runs with another train alone."""


def pack_key(member: PackMember, *, done: int, stage: Stage = "train") -> tuple[Any, ...]:
    """What runs must share to be packed together, as far as it is known before they are set
    up (:class:`PackTrainer` checks all of it again): the stage, the architecture, T, the
    batch, Adam's settings, the freezing, the environment's rules, the device and data
    placement, how the step runs (precision, layout, decoding, compiling, CUDA graph, autotuner,
    the packed convolutions, determinism), the epochs reached and to reach, and the critic (the
    average baseline for runs that learn no actions). A run with a critic no pack takes (a
    plugin's, or a critic of returns) gets a key of its own: it trains alone."""
    c = member.config
    actor = member.actor
    learned = actor.learned if actor is not None else c.actor == "learned"
    critic = c.critic if stage == "train" and learned and c.T > 1 else "average"
    sidekick = member.sidekick
    radius = c.reward_radius
    if sidekick is not None and sidekick.reward_radius is not None:
        radius = sidekick.reward_radius
    learned_critic = critic != "average"
    if learned_critic and (critic not in PACKABLE_CRITICS or not c.critic_residual):
        # A plugin's critic, or a critic of returns: PackTrainer refuses both; alone.
        return ("alone", str(Path(member.out_dir).resolve()))
    return (
        stage, c.model, c.T, member.init is not None, c.fix_decode, radius, c.device, c.epochs,
        *(getattr(c, name) for name in _SAME_CONFIG), critic,
        c.critic_gate if learned_critic else None,
        c.critic_residual if learned_critic else None, done,
    )  # fmt: skip


def train_pack(
    members: Sequence[PackMember],
    data: TrainData,
    *,
    stage: Stage = "train",
    resume: bool = False,
) -> list[TrainResult]:
    """Train ``members`` together as one pack (see the module docstring); one
    :class:`~pyskick.training.TrainResult` per run, in order.

    Raises:
        ValueError: runs that cannot share a pack (one line naming the setting and the
            runs), or any refusal of a run alone.
    """
    return PackTrainer(members, data, stage=stage, resume=resume).fit()


# ------------------------------------------------------------------------- commits
def pending(path: Path) -> Path:
    """Where ``path`` is written before its pack commits it."""
    return path.with_name(path.name + PENDING)


def commit(writes: Sequence[tuple[Path, dict[str, Any]]]) -> None:
    """Write several checkpoints as one: each to its :func:`pending` file (atomically), then
    each renamed over its destination, ``best.pt`` files before ``latest.pt`` files in both
    phases. A kill in the first phase leaves every destination as it was, in the second a set
    that :func:`recover` completes: the pending ``latest.pt`` files, written last and renamed
    last, say which phase a kill interrupted."""
    ordered = sorted(writes, key=lambda write: write[0].name != "best.pt")
    for path, state in ordered:
        save_checkpoint(pending(path), state)
    for path, _ in ordered:
        pending(path).replace(path)
    for folder in {path.parent for path, _ in writes}:
        with contextlib.suppress(OSError):
            fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def recover(run_dirs: Sequence[Path]) -> None:
    """Finish or undo a :func:`commit` that a kill interrupted (the caller holds the locks).

    The commit of epoch E wrote every pending ``best.pt``, then every run's pending
    ``latest.pt`` (epoch E), before renaming any, bests first: if every run now holds either
    its pending ``latest.pt`` or a ``latest.pt`` of epoch E, the renames had begun and are
    finished; otherwise (no pending ``latest.pt`` at all, or some run without one and still
    at an older epoch) the pending files are dropped and every run stays at its last
    committed epoch, ``best.pt`` included.
    """
    leftovers = [pending(run / name) for run in run_dirs for name in ("best.pt", "latest.pt")]
    leftovers = [path for path in leftovers if path.is_file()]
    if not leftovers:
        return
    epochs = [
        int(load_checkpoint(path)["epoch"])
        for path in leftovers
        if path.name.startswith("latest.pt")
    ]
    newest = max(epochs, default=None)
    complete = newest is not None and all(
        pending(run / "latest.pt").is_file() or _epoch(run / "latest.pt") == newest
        for run in run_dirs
    )
    for path in leftovers:  # bests before latests, as commit renames them
        if complete:
            path.replace(path.with_name(path.name[: -len(PENDING)]))
        else:
            path.unlink()


def recover_recorded(run_dirs: Sequence[Path]) -> None:
    """:func:`recover` the packs that ``run_dirs`` were trained in, as their ``config.json``
    records them (each pack's folders locked meanwhile): what must happen before anyone reads
    a packed run's epoch."""
    packs: dict[tuple[str, ...], list[Path]] = {}
    for run in run_dirs:
        members = pack_members(run)
        if members is not None and any(
            pending(member / name).is_file()
            for member in members
            for name in ("best.pt", "latest.pt")
        ):
            packs[tuple(str(p) for p in members)] = members
    for members in packs.values():
        with contextlib.ExitStack() as locks:
            for folder in sorted(members, key=str):
                locks.enter_context(RunDir(folder).locked())
            recover(members)


def pack_members(run: Path) -> list[Path] | None:
    """The folders of the pack ``run`` records in its ``config.json`` (None for a run trained
    alone, or none recorded): its own folder and the others at their recorded places relative
    to it, so that a folder of packed runs may be moved as a whole."""
    record = (RunDir(run).recorded_config() or {}).get("pack")
    if not record:
        return None
    here = Path(record["runs"][record["index"]])
    return [(run / os.path.relpath(other, here)).resolve() for other in record["runs"]]


def _epoch(path: Path) -> int | None:
    return int(load_checkpoint(path)["epoch"]) if path.is_file() else None


# ---------------------------------------------------------------------- optimizer
class PackedAdam:
    """One Adam over the packed parameters: per element, so R Adams. A parameter that some
    runs do not train (their solo optimizer does not hold it) is put back for those runs after
    each step (weight decay would move it), and its state slices are never handed to them.

    Args:
        named: the packed parameters, by their (solo) names.
        trained: name -> ``[R]`` bool, the runs that train the parameter.
        lr, weight_decay: the runs' (shared) Adam settings.
        capturable: Adam's step counts on the device (a step replayed as a CUDA graph).
    """

    def __init__(
        self,
        named: Sequence[tuple[str, nn.Parameter]],
        trained: dict[str, Tensor],
        *,
        lr: float,
        weight_decay: float,
        capturable: bool = False,
    ) -> None:
        self.names = [name for name, _ in named]
        self.params = [param for _, param in named]
        self.trained = trained
        self.optimizer = torch.optim.Adam(
            self.params, lr=lr, weight_decay=weight_decay, capturable=capturable
        )
        self._kept = [
            (param, (~trained[name]).nonzero().flatten().to(param.device))
            for name, param in named
            if not bool(trained[name].all())
        ]

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def step(self) -> None:
        """One Adam step, the parameters of runs that do not train them put back."""
        kept = [param.detach().index_select(0, rows) for param, rows in self._kept]
        self.optimizer.step()
        with torch.no_grad():
            for (param, rows), values in zip(self._kept, kept, strict=True):
                param.index_copy_(0, rows, values)

    def load_runs(
        self, optimizers: Sequence[torch.optim.Optimizer], names: list[list[str]]
    ) -> None:
        """Take each run's Adam state (``names[r]``: its optimizer's parameters, in order)."""
        states = [
            {names[r][index]: state for index, state in o.state_dict()["state"].items()}
            for r, o in enumerate(optimizers)
        ]
        for name, param in zip(self.names, self.params, strict=True):
            runs = [r for r in range(len(optimizers)) if name in states[r]]
            if not runs:
                continue
            steps = {float(states[r][name]["step"]) for r in runs}
            if len(steps) > 1:
                raise UserError(
                    f"the runs of a pack have taken different numbers of steps ({sorted(steps)})"
                )
            state: dict[str, Any] = {"step": states[runs[0]][name]["step"].clone()}
            for key in ("exp_avg", "exp_avg_sq"):
                stacked = torch.zeros_like(param)
                for r in runs:
                    stacked[r] = states[r][name][key]
                state[key] = stacked
            self.optimizer.state[param] = state

    def write_runs(
        self, optimizers: Sequence[torch.optim.Optimizer], names: list[list[str]]
    ) -> None:
        """Hand each run its slices of the Adam state, in its own optimizer's layout."""
        for r, optimizer in enumerate(optimizers):
            solo = optimizer.state_dict()
            state: dict[int, dict[str, Tensor]] = {}
            for index, name in enumerate(names[r]):
                packed = self.optimizer.state.get(self.params[self.names.index(name)])
                if packed:
                    state[index] = {
                        "step": packed["step"].clone(),
                        "exp_avg": packed["exp_avg"][r].clone(),
                        "exp_avg_sq": packed["exp_avg_sq"][r].clone(),
                    }
            solo["state"] = state
            optimizer.load_state_dict(solo)


def clip_per_run(params: Sequence[nn.Parameter], max_norms: Tensor) -> Tensor:
    """Clip each run's gradients to its own total norm (``clip_grad_norm_`` per run).

    Args:
        params: packed parameters ``[R, ...]``.
        max_norms: ``[R]`` each run's largest norm.

    Returns:
        ``[R]`` each run's total norm before clipping.
    """
    grads = [p.grad for p in params if p.grad is not None]
    R = max_norms.shape[0]
    if not grads:
        return max_norms.new_zeros(R)
    norms = torch.stack([torch.linalg.vector_norm(g.reshape(R, -1), dim=1) for g in grads])
    total = torch.linalg.vector_norm(norms, dim=0)
    scale = (max_norms / (total + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(scale.view(R, *([1] * (g.dim() - 1))))
    return total


# ----------------------------------------------------------------------- baselines
class PackedBaselines:
    """The runs' average baselines and control variates as ``[R, 4]`` and ``[R, 2]`` float64
    sums on the device (each run's :class:`~pyskick.training.baselines.AverageBaseline` and
    :class:`~pyskick.training.baselines.ControlVariate`, updated together)."""

    def __init__(self, trainers: Sequence[Trainer]) -> None:
        self.sums = torch.stack([t.baseline.sums for t in trainers]).clone()
        self.cv = torch.stack([t.control_variate.sums for t in trainers]).clone()
        decays = {t.control_variate.decay for t in trainers}
        if len(decays) > 1:
            raise UserError("the runs of a pack need one control-variate decay")
        self.decay = decays.pop()

    def write_runs(self, trainers: Sequence[Trainer]) -> None:
        for r, trainer in enumerate(trainers):
            trainer.baseline.sums.copy_(self.sums[r])
            trainer.control_variate.sums.copy_(self.cv[r])

    def add(self, final: Tensor, intrinsic: Tensor, learns: Tensor) -> None:
        """Add a batch (``final [B, R]``, ``intrinsic [T-1, B, R]``) for the runs that learn
        their actions (``learns [R]`` 0/1)."""
        B, R = final.shape
        counts = final.new_full((R,), float(B), dtype=torch.float64)
        steps = final.new_full((R,), float(intrinsic.shape[0] * B), dtype=torch.float64)
        batch = torch.stack(
            [
                -final.double().sum(0),
                counts,
                intrinsic.double().sum((0, 1)),
                steps,
            ],
            dim=1,
        )
        self.sums += batch * learns.double()[:, None]

    def values(self, T: int, scales: Tensor) -> Tensor:
        """``[T-1, R]`` float32 baseline of each action step (``scales [R]`` float64)."""
        final_sum, final_count, intr_sum, intr_count = self.sums.unbind(1)
        zero = self.sums.new_zeros(())
        final_mean = torch.where(final_count > 0, final_sum / final_count, zero)
        intr_mean = torch.where(intr_count > 0, intr_sum / intr_count, zero)
        remaining = torch.arange(T - 1, 0, -1, dtype=torch.float64, device=self.sums.device)
        return (final_mean + remaining[:, None] * (intr_mean * scales)).to(torch.float32)

    def weights(self) -> Tensor:
        """``[R]`` control-variate weights ``clamp(cross / square, 0, 1)`` (0 while square
        is 0)."""
        cross, square = self.cv.unbind(1)
        return torch.where(square > 0, (cross / square).clamp(0.0, 1.0), torch.zeros_like(square))

    def add_cv(self, sums: Tensor) -> None:
        """Add a batch's ``[R, 2]`` control-variate sums."""
        self.cv.mul_(self.decay).add_(sums)


# ---------------------------------------------------------------------------- loss
class PackedLoss(NamedTuple):
    total: Tensor
    """The sum of every run's loss (each run's parameters get only its own gradient)."""
    per_run: StepMetrics
    """Each run's parts, ``[R]`` (losses as batch means)."""


def packed_loss(
    rollout: Rollout,
    runs: int,
    *,
    baseline: Tensor | None,
    scales: Tensor,
    learns: Tensor,
    weights: Tensor | None,
    settings: dict[str, Tensor],
) -> tuple[Tensor, dict[str, Tensor]]:
    """Every run's :func:`~pyskick.training.losses.completion_loss`, at once.

    Args:
        rollout: the pack's episodes, ``[T, B * R]`` (episode ``b * R + r``).
        runs: R.
        baseline: ``[T-1, R]`` average baselines (None when no run learns its actions).
        scales: ``[R]`` float32 sidekick scales.
        learns: ``[R]`` float 1 where a run learns its actions by policy gradient.
        weights: ``[R]`` residual critics' weights in the advantages (1: the whole output),
            or None without critics.
        settings: ``[R]`` ``reward_scale``, ``lambda_entropy``, ``critic_coeff``,
            ``supervised_scale``.

    Returns:
        ``(total, parts)``: the scalar to differentiate, and ``[R]`` ``reconstruction``,
        ``policy``, ``entropy``, ``critic``, ``supervised`` (detached).
    """
    R = runs
    T, episodes = rollout.rec_errors.shape
    B = episodes // R
    rec = rollout.rec_errors.view(T, B, R).mean(1).sum(0)
    zero = rec.new_zeros(R)
    parts = {"reconstruction": rec.detach()}
    if T == 1 or baseline is None:
        parts.update(policy=zero, entropy=zero, critic=zero, supervised=zero)
        return rec.sum(), parts

    def runs_view(x: Tensor) -> Tensor:
        return x.view(T - 1, B, R)

    rl = runs_view((~rollout.supervised).to(rec.dtype))
    sup = runs_view(rollout.supervised.to(rec.dtype))
    rewards = runs_view(rollout.intrinsic) * scales
    rewards = rewards.clone()
    rewards[-1] -= rollout.rec_errors[-1].detach().view(B, R)
    returns = runs_view(reward_to_go(rewards.reshape(T - 1, episodes)))
    base = baseline[:, None, :]
    if rollout.values is None:
        advantages = returns - base
        critic = zero
    else:
        v = runs_view(rollout.values)
        assert weights is not None
        advantages = returns - (base + weights * v.detach())
        critic = settings["critic_coeff"] * ((returns - (v + base)).pow(2) * rl).sum((0, 1)) / B
    log_probs = runs_view(rollout.log_probs)
    policy = -(log_probs * settings["reward_scale"] * advantages * rl).sum((0, 1)) / B
    entropy = -settings["lambda_entropy"] * (runs_view(rollout.entropies) * rl).sum((0, 1)) / B
    supervised = -settings["supervised_scale"] * (log_probs * sup).sum((0, 1)) / B
    extra = learns * (policy + entropy + critic + supervised)
    total = (rec + extra).sum()
    parts.update(
        policy=(learns * policy).detach(),
        entropy=(learns * entropy).detach(),
        critic=(learns * critic).detach(),
        supervised=(learns * supervised).detach(),
    )
    return total, parts


def packed_cv_sums(rollout: Rollout, runs: int, baseline: Tensor, scales: Tensor) -> Tensor:
    """``[R, 2]`` float64 ``(sum (R - B) v, sum v^2)`` of each run's policy-gradient steps
    (:func:`~pyskick.training.losses.control_variate_sums` per run)."""
    T1, episodes = rollout.log_probs.shape
    B = episodes // runs
    assert rollout.values is not None
    rl = (~rollout.supervised).double().view(T1, B, runs)
    rewards = (rollout.intrinsic.view(T1, B, runs) * scales).clone()
    rewards[-1] -= rollout.rec_errors[-1].detach().view(B, runs)
    returns = reward_to_go(rewards.reshape(T1, episodes)).view(T1, B, runs).double()
    centred = returns - baseline[:, None, :].double()
    values = rollout.values.detach().double().view(T1, B, runs)
    return torch.stack(
        [(centred * values * rl).sum((0, 1)), (values * values * rl).sum((0, 1))], dim=1
    )


# --------------------------------------------------------------------------- batches
class PackBatch(NamedTuple):
    """One batch of every run, on the device."""

    indices: Tensor
    """``[R, B]`` each run's positions in the training split."""
    starts: Tensor
    """``[R, B]`` each run's start views."""
    grids: Tensor
    """``[B * R, N, M, C, H, W]`` uint8, episode ``b * R + r`` = run r's b-th."""


# ---------------------------------------------------------------------------- trainer
_SAME = (
    ("stage", lambda t: t.stage),
    ("the model (architecture and data shape)", lambda t: t.model_config),
    ("T", lambda t: t.T),
    ("frozen modules", lambda t: t.policy.frozen_modules),
    ("reward_radius", lambda t: t.config.reward_radius),
    ("device", lambda t: t.device),
    ("the epoch reached", lambda t: t.start_epoch),
    ("epochs", lambda t: t.epochs),
    ("critic", lambda t: None if t.critic is None else type(t.critic).__name__),
    ("critic_gate", lambda t: t.config.critic_gate if t.critic is not None else None),
)
"""What the runs of a pack must share once they are set up (a sidekick's radius, the stage's
T and epochs, the checkpoint reached, the critic), with how it is named in a refusal."""


def _refuse_differences(what: str, values: Sequence[Any], folders: Sequence[Path]) -> None:
    """Raise :class:`UserError` naming the first run whose ``what`` differs from the first's."""
    for folder, value in zip(folders[1:], values[1:], strict=True):
        if value != values[0]:
            raise UserError(
                f"{folders[0]} and {folder} cannot share a pack: {what} "
                f"differs ({values[0]!r} vs {value!r})"
            )


class PackTrainer:
    """Train R runs as one pack (see the module docstring).

    Args:
        members: the runs.
        data: their (shared) viewgrids.
        stage: ``"pretrain"`` or ``"train"``.
        resume: continue every run from its ``latest.pt``.
    """

    def __init__(
        self,
        members: Sequence[PackMember],
        data: TrainData,
        *,
        stage: Stage = "train",
        resume: bool = False,
    ) -> None:
        if not members:
            raise ValueError("a pack needs at least one run")
        paths = [Path(m.out_dir).resolve() for m in members]
        if len(set(paths)) < len(paths):
            raise UserError("the runs of a pack need distinct folders")
        self.members = list(members)
        self.data = data
        self.stage = stage
        self.runs = len(members)
        # Relative to the folders' common parent: a folder of packs may be moved as a whole.
        common = Path(os.path.commonpath(paths)) if len(paths) > 1 else paths[0].parent
        record = [str(p.relative_to(common)) for p in paths]
        self.trainers = [
            Trainer(
                m.config,
                m.out_dir,
                data,
                stage=stage,
                init=m.init,
                resume=resume,
                sidekick=m.sidekick,
                actor=m.actor,
                loggers=m.loggers,
            )
            for m in members
        ]
        for r, trainer in enumerate(self.trainers):
            trainer.pack_record = {"runs": record, "index": r}
        self._locks = contextlib.ExitStack()
        self._is_set_up = False
        self._step_graph: StepGraph | None = None

    # ----------------------------------------------------------------------- set-up
    def setup(self) -> PackTrainer:
        """Lock every run's folder (held until :meth:`fit` ends), finish an interrupted
        commit, compare the settings their configurations give (:data:`_SAME_CONFIG`), set
        every run up (:meth:`Trainer.setup`: every refusal of a run alone), check that they
        can share a pack (:data:`_SAME`), and pack their networks, optimizers and
        baselines."""
        if self._is_set_up:
            return self
        try:
            for trainer in sorted(self.trainers, key=lambda t: str(t.run_dir.resolve())):
                self._locks.enter_context(trainer.run.locked())
            recover([t.run_dir for t in self.trainers])
            for name in _SAME_CONFIG:
                if self.stage == "pretrain" and name in TRAIN_ONLY_FIELDS:
                    continue
                values = [getattr(m.config, name) for m in self.members]
                _refuse_differences(name, values, [t.run_dir for t in self.trainers])
            self._share_data()
            for trainer in self.trainers:
                trainer.setup()
            self._check_packable()
            self._pack()
        except BaseException:
            self._locks.close()
            raise
        self._is_set_up = True
        return self

    def _share_data(self) -> None:
        """One copy of the viewgrids for every run."""
        first = self.members[0].config
        device = resolve_device(first.device)
        resident = resolve_data_on_device(
            first.data_on_device, [self.data.train, self.data.val], device
        )
        sources = (
            GridSource(self.data.train, device, resident=resident),
            GridSource(self.data.val, device, resident=resident),
        )
        for trainer in self.trainers:
            trainer._grid_sources = sources
        self.grids = sources[0]

    def _check_packable(self) -> None:
        trainers = self.trainers
        for t in trainers:
            if t.dist.distributed:
                raise UserError("a pack trains in one process: launch it without torchrun")
            if t.critic is not None and not isinstance(
                t.critic, PartialObservabilityCritic | FullObservabilityCritic
            ):
                raise UserError(
                    f"{t.run_dir}: critic {t.config.critic!r} is not one pyskick can pack; "
                    "train it alone"
                )
            if t.critic is not None and not t.config.critic_residual:
                raise UserError(
                    f"{t.run_dir}: a critic of returns (critic_residual = false) cannot be "
                    "packed; train it alone"
                )
        for what, key in _SAME:
            _refuse_differences(what, [key(t) for t in trainers], [t.run_dir for t in trainers])

    def _run_critics(self) -> list[nn.Module]:
        """Each run's critic, in order (``_SAME`` makes every run have one when the first has:
        refused before packing otherwise)."""
        critics = [t.critic for t in self.trainers]
        if any(critic is None for critic in critics):
            raise RuntimeError("a pack with critics has a run without one")
        return [critic for critic in critics if critic is not None]

    def _pack(self) -> None:
        trainers = self.trainers
        first = trainers[0]
        self.device = first.device
        self.T = first.T
        self.config = first.config
        self.start_epoch = first.start_epoch
        self.epochs = first.epochs
        R = self.runs
        self.policy = pack([t.policy for t in trainers])
        self.critic: nn.Module | None = None
        if first.critic is not None:
            self.critic = pack(self._run_critics(), image_encoder=self.policy.sense_im)
        set_packed_convs(self.policy, self.config.packed_convs)
        if self.critic is not None:
            set_packed_convs(self.critic, self.config.packed_convs)
        if self.config.channels_last:  # before the optimizer's state takes their layout
            use_channels_last(self.policy)
            if self.critic is not None:
                use_channels_last(self.critic)
        # What the step calls: the modules, or their compiled wrappers (config.compile; the
        # runs' own wrappers, made when they were set up, are never called).
        self.policy_step: nn.Module = self.policy
        self.critic_step: nn.Module | None = self.critic
        if self.config.compile:
            self.policy_step = CompiledNetwork(self.policy)
            if self.critic is not None:
                self.critic_step = CompiledNetwork(self.critic)
        self.env = make_env(
            first.model_config,
            self.T,
            self.data.channel_mean,
            reward_radius=first.config.reward_radius,
            start_zeroing=first.config.start_zeroing,
        )
        self.learns = torch.tensor([float(t.learn_actions) for t in trainers], device=self.device)
        self.any_learns = any(t.learn_actions for t in trainers)
        self.max_norms = torch.tensor(
            [t.config.grad_clip for t in trainers], dtype=torch.float32, device=self.device
        )
        self.settings = {
            name: torch.tensor(
                [float(getattr(t.config, name)) for t in trainers], device=self.device
            )
            for name in ("reward_scale", "lambda_entropy", "critic_coeff", "supervised_scale")
        }
        # The packed parameters and which runs train each (a random actor's act head, ...).
        self._solo_names: list[list[str]] = []
        trained: dict[str, list[bool]] = {}
        for t in trainers:
            names = [n for n, p in t.policy.named_parameters() if p.requires_grad]
            if t.critic is not None:
                names += [f"critic.{n}" for n, p in t.critic.named_parameters() if p.requires_grad]
            self._solo_names.append(names)
            for name in names:
                trained.setdefault(name, [False] * R)[trainers.index(t)] = True
        named = [(n, p) for n, p in self.policy.named_parameters() if n in trained]
        if self.critic is not None:
            named += [
                (f"critic.{n}", p)
                for n, p in self.critic.named_parameters()
                if f"critic.{n}" in trained
            ]
        for name, param in [
            *self.policy.named_parameters(),
            *(
                (f"critic.{n}", p)
                for n, p in (self.critic.named_parameters() if self.critic else ())
            ),
        ]:
            param.requires_grad_(name in trained)
        masks = {
            name: torch.tensor(runs, dtype=torch.bool, device=self.device)
            for name, runs in trained.items()
        }
        self.params = [p for _, p in named]
        self.optimizer = PackedAdam(
            named,
            masks,
            lr=self.config.lr,
            weight_decay=self.config.weight_decay,
            capturable=self.config.cuda_graph and self.device.type == "cuda",
        )
        self.optimizer.load_runs([t.optimizer for t in trainers], self._solo_names)
        self.baselines = PackedBaselines(trainers)

    # ------------------------------------------------------------------------ epochs
    def fit(self) -> list[TrainResult]:
        """Set up, record every run's folder and train the remaining epochs; one
        :class:`~pyskick.training.TrainResult` per run."""
        self.setup()
        try:
            with contextlib.ExitStack() as stack:
                for trainer in self.trainers:
                    stack.enter_context(trainer._open_run())
                loggers = [t._make_logger() for t in self.trainers]
                try:
                    self._train_epochs(loggers)
                finally:
                    for logger in loggers:
                        logger.close()
        finally:
            self._locks.close()
        return [
            TrainResult(
                run_dir=t.run_dir,
                stage=t.stage,
                best_val=t.best_val,
                epochs=len(t.history),
                history=list(t.history),
            )
            for t in self.trainers
        ]

    def _train_epochs(self, loggers: list[Dispatcher]) -> None:
        label = f"{self.stage} (pack of {self.runs})"
        with progress.stage(
            label, total=self.epochs, unit="epoch", lines="each", initial=self.start_epoch
        ) as epochs:
            for epoch in range(self.start_epoch, self.epochs):
                per_run = self.train_epoch(epoch)
                self.write_runs()
                vals = self.validate()
                improved = [
                    t.end_epoch(epoch, m, logger, val)
                    for t, m, logger, val in zip(self.trainers, per_run, loggers, vals, strict=True)
                ]
                self._checkpoint(epoch, improved)
                epochs.advance(metrics=_mean(epoch_summary(m) for m in per_run))

    def _checkpoint(self, epoch: int, improved: list[bool]) -> None:
        """Every run's ``latest.pt`` (and ``best.pt``) of ``epoch``, committed together."""
        writes: list[tuple[Path, dict[str, Any]]] = []
        due = self.trainers[0].checkpoint_due(epoch)
        for trainer, better in zip(self.trainers, improved, strict=True):
            if due:
                state = trainer.state_dict(epoch)
                writes.append((trainer.run.latest, state))
                best = state if better else trainer._best_state
                if best is not None:
                    writes.append((trainer.run.best, best))
                trainer._best_state = None
            elif better:
                trainer._best_state = copy.deepcopy(trainer.state_dict(epoch))
        if writes:
            commit(writes)

    def write_runs(self) -> None:
        """Hand the pack's state back to the R trainers (weights, BatchNorm statistics,
        Adam state, baselines), for validation and checkpoints."""
        trainers = self.trainers
        unpack_into(self.policy, [t.policy for t in trainers])
        if self.critic is not None:
            unpack_into(self.critic, self._run_critics())
        self.optimizer.write_runs([t.optimizer for t in trainers], self._solo_names)
        self.baselines.write_runs(trainers)

    def validate(self, *, packed: bool | None = None) -> list[float]:
        """Every run's :meth:`Trainer.validate`.

        Packed (the default on a GPU), all at once: the packed policy's episodes over the
        (shared) validation set (:func:`~pyskick.evaluation.evaluate_pack`), at the smallest
        of the runs' ``eval_batch_size`` for all runs together, so each pass's kernels serve
        every run. One by one, each run as alone: on the CPU by default (packed, it only tied
        there: 0.97-1.05x, 0.70-0.97x with grouped convolutions; docs/training.md, "Packed
        runs"), and for runs that validate with different metrics, with an actor that
        samples at test time, or where one sample's episodes of every run (``S * R``) are
        more than that batch size. Packed and alone agree within float32 rounding
        (``test_packed_runs.py``).
        """
        trainers = self.trainers
        if packed is None:
            packed = self.device.type == "cuda"
        batch_size = self.packed_validation_batch() if packed else None
        if batch_size is None:
            return [t.validate() for t in trainers]
        grids = trainers[0].val_source
        with progress.quiet():  # on the epoch's line, not one of its own
            results = evaluate_pack(
                self.policy,
                grids,
                actors=[t.val_actor for t in trainers],
                seeds=[t.config.seed for t in trainers],
                channel_mean=self.data.channel_mean,
                T=self.T,
                metric=trainers[0].config.val_metric,
                batch_size=batch_size,
                digest=False,
            )
        n = grids.shape[0]
        return [float(result.per_sample.sum() / n) for result in results]

    def packed_validation_batch(self) -> int | None:
        """The episodes per pass of a packed validation (the smallest of the runs'
        ``eval_batch_size``), or None where the runs can only validate one by one: different
        metrics, an actor that samples at test time, or one sample's episodes of every run
        (``S * R``) more than that batch."""
        trainers = self.trainers
        metrics = {t.config.val_metric for t in trainers}
        if len(metrics) > 1 or any(t.val_actor.mode(training=False) == "sample" for t in trainers):
            return None
        cfg = trainers[0].model_config
        starts = evaluation_starts(cfg.n_elevations, cfg.n_azimuths, metrics.pop()).numel()
        batch_size = min(
            resolve_eval_batch_size(t.config.eval_batch_size, t.model_config, self.device)
            for t in trainers
        )
        return None if starts * self.runs > batch_size else batch_size

    def batches(self, epoch: int) -> Iterator[PackBatch]:
        """The pack's batches of ``epoch``: batch b holds every run's b-th batch of its own
        epoch order (:meth:`Trainer.epoch_batches`), gathered in one go."""
        orders, starts = zip(*(t.epoch_batches(epoch) for t in self.trainers), strict=True)
        order = torch.stack(orders)  # [R, n_batches, B]
        start = torch.stack(starts)
        device_order, device_start = order.to(self.device), start.to(self.device)
        for b in range(order.shape[1]):
            rows = order[:, b].t().reshape(-1)
            device_rows = device_order[:, b].t().reshape(-1)
            grids = self.grids.rows(rows, device_rows)
            yield PackBatch(device_order[:, b], device_start[:, b], grids)

    def train_epoch(self, epoch: int) -> list[dict[str, float]]:
        """One pass of every run over its (reshuffled) training set; each run's metrics."""
        self.policy.train()
        if self.critic is not None:
            self.critic.train()
        trainers = self.trainers
        # The schedules move between epochs only: the scales of this epoch, copied once.
        scales = torch.tensor(
            [t.sidekick.reward_scale(epoch) for t in trainers],
            dtype=torch.float64,
            device=self.device,
        )
        sums: dict[str, Tensor] = {}
        samples = 0

        def step(batch: PackBatch, timer: SpanTimer) -> None:
            nonlocal samples
            metrics = self.train_step(batch, epoch, scales, timer)
            for name, value in metrics.named().items():  # [R] each, on the device
                sums[name] = sums[name] + value if name in sums else 0.0 + value
            samples += batch.grids.shape[0] // self.runs

        elapsed, spans = run_epoch(self, epoch, self.batches(epoch), step)
        read = dict(zip(sums, torch.stack(list(sums.values())).tolist(), strict=True))
        out = []
        for r in range(self.runs):
            metrics = {name: values[r] / samples for name, values in read.items()}
            metrics.update(perf_metrics(samples, elapsed, spans))
            out.append(metrics)
        self.baselines.write_runs(trainers)  # the schedule metrics read them
        for trainer, metrics in zip(trainers, out, strict=True):
            metrics.update(trainer.schedule_metrics(epoch))
        return out

    def _sidekick_inputs(
        self, batch: PackBatch, epoch: int
    ) -> tuple[Tensor | None, tuple[Tensor, Tensor] | None]:
        """Every run's reward maps ``[B * R, N, M]`` and demonstrations ``[T-1, B * R]``
        (zeros and unmasked for the runs without), each run's checked as a run alone's are
        (no read of the device) before they are stacked."""
        maps, demos = [], []
        B = batch.indices.shape[1]
        cfg = self.trainers[0].model_config
        for r, t in enumerate(self.trainers):
            reward_map = t.sidekick.reward_maps(batch.indices[r], epoch)
            demo = t.sidekick.demonstrations(batch.indices[r], batch.starts[r], epoch)
            forced = forced_demonstrations(t.actor, batch.indices[r], batch.starts[r])
            demo = forced if forced is not None else demo
            try:
                if reward_map is not None:
                    N, M = cfg.n_elevations, cfg.n_azimuths
                    checked_reward_maps(reward_map, B, N, M, self.device, check_values=False)
                if demo is not None:
                    demo = checked_demonstrations(demo, self.T, B, self.device)
            except UserError as exc:
                raise type(exc)(f"{t.run_dir}: {exc}") from None
            maps.append(reward_map)
            demos.append(demo)
        reward_maps = None
        if any(m is not None for m in maps):
            zeros = torch.zeros(
                B, cfg.n_elevations, cfg.n_azimuths, dtype=torch.float32, device=self.device
            )
            stacked = torch.stack([zeros if m is None else m for m in maps], dim=1)
            reward_maps = stacked.reshape(B * self.runs, *stacked.shape[2:])
        demonstrations = interleave_demonstrations(demos, self.T - 1, B, self.device)
        return reward_maps, demonstrations

    def _choose(self) -> Callable[[Tensor], Tensor]:
        """Each run's actions from its own mode and generator."""
        modes = [t.actor.mode(training=True) for t in self.trainers]
        generators = [t.action_generator for t in self.trainers]

        def choose(probs: Tensor) -> Tensor:
            per_run = probs.view(-1, self.runs, probs.shape[1])
            chosen = [
                select_actions(per_run[:, r], mode, generator=generator)
                for r, (mode, generator) in enumerate(zip(modes, generators, strict=True))
            ]
            return torch.stack(chosen, dim=1).reshape(-1)

        return choose

    def train_step(
        self, batch: PackBatch, epoch: int, scales: Tensor, timer: SpanTimer | None = None
    ) -> StepMetrics:
        """One step of every run (no host synchronisation, as a run alone); ``[R]`` metrics.
        With ``cuda_graph``, replayed as a CUDA graph, one per epoch (as a run alone's)."""
        if not self.config.cuda_graph:
            return self._step(batch, epoch, scales, timer)
        if self._step_graph is None:
            self._step_graph = StepGraph(
                lambda graphed, epoch, scales: self._step(graphed, epoch, scales),
                self.device,
                generators=[t.action_generator for t in self.trainers],
            )
        # The epoch's schedule values and its scales tensor are baked into its graph.
        return self._step_graph(batch, (epoch, id(scales)), epoch, scales)

    def _step(
        self, batch: PackBatch, epoch: int, scales: Tensor, timer: SpanTimer | None = None
    ) -> StepMetrics:
        """:meth:`train_step`, eager."""
        R = self.runs
        with span(timer, "side"):
            reward_maps, demonstrations = self._sidekick_inputs(batch, epoch)
        critic = self.critic
        with autocast(self.device, self.config.precision):
            rollout = collect_rollout(
                self.policy_step,
                self.env,
                batch.grids,
                mode="greedy",  # unused: choose draws every run's actions
                starts=batch.starts.t().reshape(-1),
                critic=self.critic_step,
                critic_full_obs=critic is not None and bool(critic.full_observability),
                reward_maps=reward_maps,
                demonstrations=demonstrations,
                paste=self.config.memorize,
                decode_once=self.config.decode_once,
                check_values=False,
                timer=timer,
                choose=self._choose(),
            )
        B = batch.grids.shape[0] // R
        baseline = None
        weights = None
        with span(timer, "side"):
            if self.any_learns and self.T > 1:
                final = rollout.rec_errors[-1].detach().view(B, R)
                self.baselines.add(final, rollout.intrinsic.view(self.T - 1, B, R), self.learns)
                baseline = self.baselines.values(self.T, scales)
                if critic is not None:
                    ones = torch.ones(R, device=self.device)
                    weights = self.baselines.weights().float() if self.config.critic_gate else ones
        scales32 = scales.float()
        total, parts = packed_loss(
            rollout,
            R,
            baseline=baseline,
            scales=scales32,
            learns=self.learns,
            weights=weights,
            settings=self.settings,
        )
        if baseline is not None and critic is not None and self.config.critic_gate:
            sums = packed_cv_sums(rollout, R, baseline, scales32)
            self.baselines.add_cv(sums * self.learns.double()[:, None])
        self.optimizer.zero_grad()
        total.backward()
        grad_norm = clip_per_run(self.params, self.max_norms)
        self.optimizer.step()
        final = rollout.rec_errors[-1].detach().view(B, R)
        if self.T > 1:
            entropy = rollout.entropies.detach().view(self.T - 1, B, R).mean(0).sum(0)
        else:
            entropy = final.new_zeros(R)
        loss = parts["reconstruction"] + parts["policy"] + parts["entropy"]
        loss = loss + parts["critic"] + parts["supervised"]
        return StepMetrics(
            rec_error=final.sum(0).double(),
            loss=loss.double() * B,
            policy_loss=parts["policy"].double() * B,
            entropy=entropy.double(),
            critic_loss=parts["critic"].double() * B,
            supervised_loss=parts["supervised"].double() * B,
            grad_norm=grad_norm.detach().double() * B,
        )


def _mean(rows: Iterable[dict[str, float]]) -> dict[str, float]:
    """The mean of each key over ``rows`` (a pack's progress line)."""
    listed = list(rows)
    return {key: sum(row[key] for row in listed) / len(listed) for key in listed[0]}
