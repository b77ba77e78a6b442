"""Pretraining and policy training: the epoch loop, validation, checkpoints and exact resume.

Two stages (docs/paper-reference.md §4.1):

- :func:`pretrain`: one-view reconstruction, T = 1, every module that gets a gradient trained
  (the act head gets none at T = 1 and is left untouched);
- :func:`train`: T glimpses from a one-view model (``init``), Sense and Fuse frozen; an
  :class:`~pyskick.actors.Actor` picks the motions (the act head, learned by REINFORCE with a
  registered critic, or random or forced motions that train the reconstruction alone),
  optionally helped by a :class:`~pyskick.sidekicks.Sidekick`.

The trainer is split along what it holds: its set-up steps are in
:mod:`pyskick.training.setup`, one batch's work in :mod:`pyskick.training.step`
(:func:`~pyskick.training.step.train_step`, which never waits for the device), where batches
come from in :mod:`pyskick.training.batches`, and what a checkpoint holds in
:mod:`pyskick.training.state`. This module runs the epochs: the batches of each, validation,
logging and checkpoints. Validation is deterministic
(:func:`~pyskick.evaluation.evaluate.evaluate_policy`) and touches no training state.
``latest.pt`` is written every ``save_every`` epochs and after the last, ``best.pt`` with it
when validation improved; both hold everything needed to continue exactly (``resume=True``).
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from pyskick import progress
from pyskick.actors import Actor
from pyskick.checkpoint import save_checkpoint
from pyskick.config import TrainConfig
from pyskick.distributed import all_reduce_sum, is_main, settle_collectives
from pyskick.envs.rollout import Rollout
from pyskick.errors import UserError, UserTypeError
from pyskick.evaluation.evaluate import evaluate_policy
from pyskick.models.critics import ValueHead
from pyskick.run_dir import RunDir
from pyskick.sidekicks.base import Sidekick
from pyskick.timing import SpanTimer, synchronize
from pyskick.training.batches import GridSource, epoch_batches, epoch_order
from pyskick.training.data import TrainData
from pyskick.training.graphs import StepGraph
from pyskick.training.loggers import Dispatcher, RunInfo
from pyskick.training.losses import episode_rewards
from pyskick.training.metric_sums import MetricSums
from pyskick.training.returns import reward_to_go
from pyskick.training.setup import Stage, TrainerSetup
from pyskick.training.state import training_state
from pyskick.training.step import Batch, StepMetrics, train_step

# What setup() builds (named when read before it ran).
_SET_UP_ATTRIBUTES = frozenset(
    {
        "T", "init", "sidekick", "device", "dist", "actor", "val_actor", "learn_actions",
        "model_config", "policy", "critic", "params", "optimizer", "baseline", "control_variate",
        "env", "action_generator", "start_epoch", "critic_calibrated", "best_val", "history",
        "scored_with", "init_sha256",
        "policy_ddp", "critic_ddp", "logger", "train_grids", "val_grids",
    }
)  # fmt: skip


@dataclass(frozen=True)
class TrainResult:
    """What a finished (or resumed and finished) run left behind."""

    run_dir: Path
    """The run folder (config.json, metrics.jsonl, latest.pt, best.pt)."""
    stage: str
    """``"pretrain"`` or ``"train"``."""
    best_val: float
    """Best validation error (mean per-sample MSE, unscaled)."""
    epochs: int
    """Epochs completed."""
    history: list[dict[str, float]] = field(default_factory=list)
    """Per epoch: ``epoch``, ``train_error``, ``val_error``."""


def pretrain(
    config: TrainConfig,
    out_dir: str | os.PathLike[str],
    data: TrainData,
    *,
    resume: bool = False,
    loggers: Sequence[str] | None = None,
) -> TrainResult:
    """Train a one-view (T = 1) reconstruction model for ``config.pretrain_epochs`` epochs.

    Args:
        config: the run's config (its ``T`` is ignored: pretraining uses T = 1).
        out_dir: the run folder (created).
        data: training and validation viewgrids.
        resume: continue from ``out_dir/latest.pt``.
        loggers: registered logger names (see :class:`Trainer`).
    """
    return Trainer(config, out_dir, data, stage="pretrain", resume=resume, loggers=loggers).fit()


def train(
    config: TrainConfig,
    out_dir: str | os.PathLike[str],
    data: TrainData,
    *,
    init: str | os.PathLike[str] | None = None,
    resume: bool = False,
    sidekick: Sidekick | None = None,
    actor: Actor | None = None,
    loggers: Sequence[str] | None = None,
    scores: str | os.PathLike[str] | None = None,
) -> TrainResult:
    """Train the look-around policy for ``config.epochs`` epochs.

    Args:
        config: the run's config.
        out_dir: the run folder (created).
        data: training and validation viewgrids.
        init: a pretrained run folder (its ``best.pt``) or checkpoint to start from; its
            Sense and Fuse are frozen. None trains from scratch without freezing.
        resume: continue from ``out_dir/latest.pt`` (``init`` is then not needed; given, it
            must be the run's own one-view model, at its recorded place or, moved, the same
            checkpoint bytes elsewhere).
        sidekick: reward or demonstration helper; None builds the registered
            ``config.sidekick`` with ``config.sidekick_options`` (see :class:`Trainer`).
        actor: what picks the motions; None builds the registered ``config.actor`` (see
            :class:`Trainer`).
        loggers: registered logger names (see :class:`Trainer`).
        scores: the sidekick's precomputed score file (``pyskick score``), instead of the
            score cache (see :class:`Trainer`).
    """
    return Trainer(
        config,
        out_dir,
        data,
        stage="train",
        init=init,
        resume=resume,
        sidekick=sidekick,
        actor=actor,
        loggers=loggers,
        scores=scores,
    ).fit()


class Trainer(TrainerSetup):
    """One stage of training: :meth:`setup`, then :meth:`fit` -> :meth:`train_epoch` (one
    :meth:`train_step` per batch) / :meth:`validate` per epoch.

    Constructing a trainer only checks the arguments' types: it reads and writes nothing,
    scores nothing and joins no process group. :meth:`setup` (which :meth:`fit` runs first)
    builds everything in named steps, each reading what the ones before it set:

    1. :meth:`_resolve_config`: the requested config, a given sidekick's or actor's name and
       options, a resumed run's recorded config and the one-view ``init``; refuses a folder
       another process writes, or that holds a run when not resuming;
    2. :meth:`_make_sidekick`: the registered ``config.sidekick`` (unless one was given);
    3. :meth:`_init_distributed`: the device and, under ``torchrun``, the process group;
    4. :meth:`_make_actor`: the actor, and its copy that moves in validation;
    5. :meth:`_build_models`: seeding, the policy (from ``init``), the critic, the optimizer,
       the environment and the action generator;
    6. :meth:`_prepare_sidekick`: the sidekick and the actors prepared on the data (sidekick
       scoring: the one step that may take minutes);
    7. :meth:`_place_data`: the viewgrids on the device, or on the host
       (``config.data_on_device``);
    8. :meth:`_restore`: a resumed run's checkpoint (weights, optimizer, RNGs, epoch);
    9. :meth:`_wrap_ddp`: DDP wrappers under ``torchrun``.

    Every refusal comes from these steps, before anything is written. :meth:`fit` locks the
    run folder first (:meth:`RunDir.claimed`: a second writer is refused before any work, and a
    refused fit removes the folder it created), sets up, then :meth:`_open_run` (decides again
    under the lock whether the folder holds a run, drops the log and ``best.pt`` of an
    abandoned attempt when starting from scratch, records ``config.json``),
    :meth:`_make_logger` and trains the remaining epochs, reporting them to
    :mod:`pyskick.progress`.

    Args:
        config: the run's config.
        out_dir: the run folder.
        data: training and validation viewgrids.
        stage: ``"pretrain"`` or ``"train"``.
        init: checkpoint or run folder whose model weights start the run (train stage). A
            resumed run keeps its own: one given must be it, at its recorded place or at
            another with the same checkpoint bytes (a moved folder: the run records the new
            place); anything else is refused.
        resume: continue from ``out_dir/latest.pt``; a run killed before its first
            checkpoint (``config.json`` but no ``latest.pt``) starts again from scratch.
        sidekick: training helper (train stage). None builds the registered
            ``config.sidekick`` through :func:`~pyskick.sidekicks.for_run`, the one resolver
            (``one_view=init``, the data's spec, ``config.sidekick_options``; a resumed run
            keeps its recorded sidekick and options, given ones must agree); a sidekick given here
            replaces ``config.sidekick`` and ``config.sidekick_options`` by its ``name`` and
            ``options``. Its ``reward_radius``, if any, sets ``config.reward_radius``.
        actor: what picks the motions (train stage). None builds the registered
            ``config.actor`` with ``factory(one_view=init, spec=data.spec, config=config)``;
            an Actor given here replaces ``config.actor`` by its name. It is prepared on the
            training viewgrids; a deep copy of it, prepared once on the validation viewgrids,
            moves in validation. Forced motions are taken as demonstrations on every step.
        loggers: registered logger names for the metrics (``jsonl`` is always on); None:
            :func:`~pyskick.training.loggers.default_loggers`. Recorded in ``config.json``,
            not compared on resume (:mod:`pyskick.training.loggers`).
        scores: a precomputed score file (``pyskick score``) that the sidekick (a
            :class:`~pyskick.sidekicks.ScoredSidekick`) loads instead of the score cache;
            refused for a sidekick without scores, and stale scores are refused when loaded.

    Raises:
        TypeError: an argument of the wrong type (on construction).
        ValueError: a bad ``stage`` (on construction); from :meth:`setup`: incompatible data,
            init or resumed run, an unknown critic or actor name (one line naming what
            differs), or a run folder another process writes
            (:class:`~pyskick.run_dir.RunLockedError`).
        FileNotFoundError: from :meth:`setup`: missing init, or nothing to resume.
    """

    def __init__(
        self,
        config: TrainConfig,
        out_dir: str | os.PathLike[str],
        data: TrainData,
        *,
        stage: Stage,
        init: str | os.PathLike[str] | None = None,
        resume: bool = False,
        sidekick: Sidekick | None = None,
        actor: Actor | None = None,
        loggers: Sequence[str] | None = None,
        scores: str | os.PathLike[str] | None = None,
    ) -> None:
        if not isinstance(config, TrainConfig):
            raise UserTypeError(f"config must be a TrainConfig, got {type(config).__name__}")
        if not isinstance(data, TrainData):
            raise UserTypeError(f"data must be a TrainData, got {type(data).__name__}")
        if stage not in ("pretrain", "train"):
            raise UserError(f"stage must be 'pretrain' or 'train', got {stage!r}")
        if actor is not None and not isinstance(actor, Actor):
            raise UserTypeError(f"actor must be a pyskick.actors.Actor, got {type(actor).__name__}")
        if sidekick is not None and not isinstance(sidekick, Sidekick):
            raise UserTypeError(
                f"sidekick must be a pyskick.sidekicks.Sidekick, got {type(sidekick).__name__}"
            )
        self.config = config
        """The run's config: as requested until :meth:`setup`, then as resolved."""
        self.stage = stage
        self.data = data
        self.run = RunDir(out_dir)
        self.run_dir = self.run.path
        self.resume = resume
        self.epochs = config.pretrain_epochs if stage == "pretrain" else config.epochs
        """Epochs the run has when finished (resumable: taken from ``config``)."""
        self._requested_config = config
        self._requested_init = init
        self._given_sidekick = sidekick
        self._scores = None if scores is None else Path(scores)
        self._given_actor = actor
        self._logger_names = loggers
        self._is_set_up = False
        self._best_state: dict[str, Any] | None = None
        self.pack_record: dict[str, Any] | None = None
        """Set by a pack (:mod:`pyskick.training.pack`): the run folders it trains together
        and this run's index; recorded in ``config.json`` and every checkpoint."""
        self._grid_sources: tuple[GridSource, GridSource] | None = None
        self._step_graph: StepGraph | None = None

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes that do not exist (yet): name the missing step.
        if name in _SET_UP_ATTRIBUTES:
            raise AttributeError(
                f"Trainer.{name} is built by setup() (fit() runs it); call setup() first"
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ------------------------------------------------------------------------------ fit
    def fit(self) -> TrainResult:
        """Set up (:meth:`setup`), lock and record the run folder (:meth:`_open_run`) and
        train the remaining epochs; returns the run's summary.

        Progress goes to :mod:`pyskick.progress`: a stage named after the run's stage with
        one advance (and line) per epoch carrying ``train_error``, ``val_error`` and
        ``loss``, and inside it one stage per epoch with one advance per batch.

        Raises:
            RunLockedError: another process writes the run folder.
        """
        with ExitStack() as stack:
            if is_main():  # the lock first: a second writer is refused before any work
                stack.enter_context(self.run.claimed())
            self.setup()
            with self._open_run():
                # The log keeps exactly the records of the epochs the checkpoint covers (none
                # for a run that starts from scratch).
                logger = self._make_logger()
                try:
                    self._train_epochs(logger)
                finally:
                    logger.close()
            # Under torchrun: gloo's threads done with the last collectives before anything
            # may tear the group down (a hang at exit otherwise, pyskick.distributed).
            settle_collectives()
        return TrainResult(
            run_dir=self.run_dir,
            stage=self.stage,
            best_val=self.best_val,
            epochs=len(self.history),
            history=list(self.history),
        )

    @contextmanager
    def _open_run(self) -> Iterator[None]:
        """Hold the run folder's lock for the block (rank 0; the other ranks write nothing):
        a run that starts from scratch first drops the log and ``best.pt`` of an abandoned
        attempt; ``config.json`` records the resolved config."""
        if not self.dist.is_main:
            yield
            return
        with self.run.locked():
            if self.start_epoch == 0:
                # Decided again under the lock: another process may have trained into the
                # folder since set-up looked (setup scores the sidekick's data first).
                if self.run.latest.exists():
                    raise UserError(
                        f"{self.run_dir} holds a run now (another process trained into it "
                        "while this one set up); nothing changed"
                    )
                self.run.reset()  # the log and best.pt of an abandoned attempt
            self.run.record_start(
                self.stage,
                self.config.to_dict(),
                dataset=self.data.file or self.data.source,
                init=self.init,
                init_sha256=self.init_sha256,
                loggers=self.logger.names,
                pack=self.pack_record,
                device=str(self.device),
            )
            yield

    def _save_best(self, state: dict[str, Any]) -> None:
        """Write a kept best state as ``best.pt`` (rank 0)."""
        if self.dist.is_main:
            save_checkpoint(self.run.best, state)

    def _make_logger(self) -> Dispatcher:
        """The run's metric loggers (built by :meth:`setup`; rank 0 writes, see
        :mod:`pyskick.training.loggers`), started: the log keeps exactly the records of the
        epochs the checkpoint covers (none for a run that starts from scratch)."""
        self.logger.start(
            RunInfo(self.run_dir, self.stage, self.config.to_dict(), self.start_epoch, self.epochs)
        )
        return self.logger

    def _train_epochs(self, logger: Dispatcher) -> None:
        """Train, validate, log and checkpoint every remaining epoch (``latest.pt`` every
        ``save_every`` epochs and after the last; ``best.pt`` with it when validation improved
        since the last one, holding the best epoch's state)."""
        with progress.stage(
            self.stage, total=self.epochs, unit="epoch", lines="each", initial=self.start_epoch
        ) as epochs:
            for epoch in range(self.start_epoch, self.epochs):
                metrics = self.train_epoch(epoch)
                improved = self.end_epoch(epoch, metrics, logger)
                if self.checkpoint_due(epoch):
                    if self._best_state is not None and not improved:
                        self._save_best(self._best_state)
                    self._best_state = None
                    self.save(epoch, best=improved)
                elif improved:  # kept (copied) until the next checkpoint writes it
                    self._best_state = copy.deepcopy(self.state_dict(epoch))
                epochs.advance(metrics=epoch_summary(metrics))

    def end_epoch(
        self, epoch: int, metrics: dict[str, float], logger: Dispatcher, val: float | None = None
    ) -> bool:
        """After ``epoch``'s training: validate (unless its pack did: ``val``), keep the
        history, advance the sidekick's schedules and log ``metrics`` (completed with the
        validation's); whether validation improved."""
        if val is None:
            val = self.validate()
        metrics["val/rec_error"] = val
        improved = val < self.best_val
        if improved:
            self.best_val = val
        metrics["val/best_rec_error"] = self.best_val
        self.history.append(
            {"epoch": epoch, "train_error": metrics["train/rec_error"], "val_error": val}
        )
        self.sidekick.on_epoch_end(epoch)
        logger.log(epoch, metrics)
        return improved

    def checkpoint_due(self, epoch: int) -> bool:
        """Whether ``latest.pt`` is written after ``epoch`` (every ``save_every`` epochs and
        after the last)."""
        return (epoch + 1) % self.config.save_every == 0 or epoch + 1 == self.epochs

    def epoch_batches(self, epoch: int) -> tuple[Tensor, Tensor]:
        """This rank's ``[n_batches, B_local]`` sample indices and start views of ``epoch``
        (CPU; :func:`~pyskick.training.batches.epoch_order`)."""
        cfg = self.config
        return epoch_order(
            cfg.seed,
            epoch,
            self.data.train.shape[0],
            cfg.batch_size,
            self.model_config.n_views,
            rank=self.dist.rank,
            world_size=self.dist.world_size,
        )

    def batches(self, epoch: int) -> Iterator[Batch]:
        """The batches of ``epoch`` on the device
        (:func:`~pyskick.training.batches.epoch_batches`)."""
        order, starts = self.epoch_batches(epoch)
        return epoch_batches(self.train_grids, order, starts, self.device)

    def train_step(
        self, batch: Batch, epoch: int = 0, timer: SpanTimer | None = None
    ) -> StepMetrics:
        """One batch: episodes, loss, one optimiser update; the metrics stay on the device
        (:func:`~pyskick.training.step.train_step`: no host synchronisation).

        Args:
            batch: from :meth:`batches`.
            epoch: the epoch the sidekick's inputs are for.
            timer: receives the sidekick's and the environment's time.
        """
        if not self.config.cuda_graph or not self.critic_calibrated:
            # A critic of returns is calibrated at the first batch the policy acts in (every
            # step demonstrated, as ours(demo)'s first epochs are, defers it) by a read of the
            # device, which a capture refuses: the steps stay eager until then.
            return train_step(self, batch, epoch, timer)
        if self._step_graph is None:
            self._step_graph = StepGraph(
                lambda graphed, epoch: train_step(self, graphed, epoch),
                self.device,
                generators=[self.action_generator],
            )
        # The epoch decides the sidekick's schedule values: one graph per epoch. A replay
        # times no spans (the environment's share is not measured).
        return self._step_graph(batch, epoch, epoch)

    def train_epoch(self, epoch: int) -> dict[str, float]:
        """One pass over the (reshuffled) training set; returns the epoch's metrics (the one
        read of the device's sums is at the end)."""
        self.policy.train()
        if self.critic is not None:
            self.critic.train()
        sums = MetricSums()

        def step(batch: Batch, timer: SpanTimer) -> None:
            metrics = self.train_step(batch, epoch, timer)
            # Each metric summed over the batch's samples; the means divide by all samples.
            sums.add(batch.grids.shape[0], **metrics.named())

        elapsed, spans = run_epoch(self, epoch, self.batches(epoch), step)
        self._sync_buffers()
        sums = sums.all_reduce(self.dist, self.device)
        metrics = sums.means()
        metrics.update(perf_metrics(sums.samples, elapsed, spans))
        metrics.update(self.schedule_metrics(epoch))
        return metrics

    def schedule_metrics(self, epoch: int) -> dict[str, float]:
        """The sidekick's scale, the baseline's means and the critic's weight after ``epoch``
        (train stage; reads the device)."""
        if self.stage != "train":
            return {}
        metrics = {
            "sidekick/reward_scale": self.sidekick.reward_scale(epoch),
            "baseline/final_reward_mean": self.baseline.final_mean,
            "baseline/intrinsic_mean": self.baseline.intrinsic_mean,
        }
        if self.critic is not None and self.config.critic_residual and self.config.critic_gate:
            metrics["critic/weight"] = float(self.control_variate.weight)
        return metrics

    def calibrate_critic(self, rollout: Rollout, sidekick_scale: float) -> Rollout:
        """Start a learned critic at the scale of the returns (see
        :class:`~pyskick.models.critics.ValueHead`): its output becomes the mean return of the
        first batch that has policy-gradient steps (over all ranks), and this batch's values
        move with it. Critics that are not a ``ValueHead`` are left as they are. Reads the
        device (once: only a critic of returns, ``critic_residual = false``, needs it)."""
        critic = self.critic
        if not isinstance(critic, ValueHead) or rollout.values is None:
            self.critic_calibrated = True
            return rollout
        rl = (~rollout.supervised).double()
        returns = reward_to_go(episode_rewards(rollout, sidekick_scale)).detach().double()
        total = all_reduce_sum(torch.stack([(returns * rl).sum(), rl.sum()]), self.dist).tolist()
        if total[1] == 0:  # every step demonstrated: wait for a batch the policy acts in
            return rollout
        mean = total[0] / total[1]
        before = float(critic.output_layer.bias.detach())
        critic.start_at(mean)
        self.critic_calibrated = True
        # The output weights are zero: every value of this batch is the old bias.
        return rollout._replace(values=rollout.values - before + mean)

    def _sync_buffers(self) -> None:
        """Give every rank rank 0's BatchNorm statistics (DDP does so only before a forward,
        so the last batch leaves them rank-local); validation and checkpoints then agree."""
        if not self.dist.distributed:
            return
        for module in (self.policy, self.critic):
            if module is not None:
                for buffer in module.buffers():
                    torch.distributed.broadcast(buffer, src=0)

    def validate(self) -> float:
        """Mean per-sample error on the validation set (deterministic; ``config.val_metric``).

        Each rank evaluates every ``world_size``-th viewgrid; the sums are combined. The
        viewgrids are read where :meth:`setup` put them (no copy, no digest per epoch).
        """
        cfg = self.config
        n = self.data.val.shape[0]
        grids = self.val_source
        positions = torch.arange(self.dist.rank, n, self.dist.world_size)
        if self.dist.world_size > 1:
            grids = grids[positions.to(grids.device)]
        total = torch.zeros(2, dtype=torch.float64, device=self.device)
        if grids.shape[0] > 0:
            with progress.quiet():  # on the epoch's line, not one of its own
                result = evaluate_policy(
                    self.policy,
                    grids,
                    sample_indices=positions,
                    channel_mean=self.data.channel_mean,
                    T=self.T,
                    metric=cfg.val_metric,
                    actor=self.val_actor,
                    batch_size=cfg.eval_batch_size,
                    seed=cfg.seed,
                    digest=False,
                )
            total[0] = result.per_sample.sum().item()
            total[1] = grids.shape[0]
        total = all_reduce_sum(total, self.dist)
        return float(total[0] / total[1])

    @property
    def val_source(self) -> Tensor:
        """The validation viewgrids, where :meth:`setup` put them."""
        grids = self.val_grids.resident if self.val_grids.on_device else self.data.val
        assert grids is not None
        return grids

    # ----------------------------------------------------------------------- checkpoints
    def state_dict(self, epoch: int) -> dict[str, Any]:
        """Everything a resumed run needs after ``epoch`` (:func:`training_state`)."""
        return training_state(self, epoch)

    def save(self, epoch: int, *, best: bool) -> None:
        """Write ``latest.pt`` (and ``best.pt`` when ``best``) on rank 0."""
        state = self.state_dict(epoch)
        if not self.dist.is_main:
            return
        save_checkpoint(self.run.latest, state)
        if best:
            save_checkpoint(self.run.best, state)


def run_epoch(
    trainer: Trainer | Any,
    epoch: int,
    batches: Iterator[Any],
    step: Callable[[Any, SpanTimer], None],
) -> tuple[float, dict[str, float]]:
    """Run ``step(batch, timer)`` on every batch of ``epoch``, under the epoch's progress
    stage, each step in the timer's span ``"step"``.

    Args:
        trainer: a :class:`Trainer` or a pack (its ``device``, ``stage``, ``epochs``,
            ``config`` and ``data``).
        epoch: the epoch.
        batches: its batches.
        step: one batch's work (it keeps the metrics it wants).

    Returns:
        The epoch's wall time (between two synchronisations of the device) and the timer's
        seconds per span.
    """
    timer = SpanTimer(trainer.device)
    synchronize(trainer.device)
    tick = time.perf_counter()
    with progress.stage(
        f"{trainer.stage} epoch {epoch + 1}/{trainer.epochs}",
        total=trainer.data.train.shape[0] // trainer.config.batch_size,
        unit="batch",
        lines="none",
    ) as bar:
        for batch in batches:
            with timer.span("step"):
                step(batch, timer)
            bar.advance()
    synchronize(trainer.device)
    return time.perf_counter() - tick, timer.totals()


def perf_metrics(samples: float, elapsed: float, spans: dict[str, float]) -> dict[str, float]:
    """``perf/*`` of an epoch: episodes per second, the share of the step spent in the
    environment and the sidekick (``spans`` of a :class:`~pyskick.timing.SpanTimer`), the
    epoch's seconds."""
    side = spans.get("env", 0.0) + spans.get("side", 0.0)
    return {
        "perf/episodes_per_s": samples / elapsed,
        "perf/env_share": side / spans["step"] if spans.get("step") else 0.0,
        "perf/epoch_seconds": elapsed,
    }


def epoch_summary(metrics: dict[str, float]) -> dict[str, float]:
    """What an epoch's progress line shows."""
    return {
        "train_error": metrics["train/rec_error"],
        "val_error": metrics["val/rec_error"],
        "loss": metrics["train/loss"],
    }
