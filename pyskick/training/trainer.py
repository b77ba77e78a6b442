"""Pretraining and policy training: the epoch loop, validation, checkpoints and exact resume.

Two stages (docs/paper-reference.md §4.1):

- :func:`pretrain`: one-view reconstruction, T = 1, every module that gets a gradient trained
  (the act head gets none at T = 1 and is left untouched);
- :func:`train`: T glimpses from a one-view model (``init``), Sense and Fuse frozen; an
  :class:`~pyskick.actors.Actor` picks the motions (the act head, learned by REINFORCE with a
  registered critic, or random or forced motions that train the reconstruction alone),
  optionally helped by a :class:`~pyskick.sidekicks.Sidekick`.

Every epoch reshuffles the training set and draws fresh starts from a generator seeded by
``(seed, epoch)``, so any epoch's data order is reproducible on its own. Validation is
deterministic (:func:`~pyskick.evaluation.evaluate.evaluate_policy`) and touches no training
state. ``latest.pt`` is written after every epoch, ``best.pt`` when validation improves; both
hold everything needed to continue exactly (``resume=True``).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from torch import Tensor, nn

from pyskick import progress
from pyskick.actors import Actor, LearnedActor, make_actor
from pyskick.actors.base import forced_demonstrations
from pyskick.checkpoint import (
    POLICY_KEYS,
    load_checkpoint,
    load_run,
    restore_training,
    save_checkpoint,
    training_state,
)
from pyskick.config import TRAIN_ONLY_FIELDS, TrainConfig
from pyskick.distributed import (
    DistContext,
    all_reduce_sum,
    init_distributed,
    is_main,
    resolve_device,
)
from pyskick.envs.rollout import Rollout, collect_rollout, make_env
from pyskick.errors import UserError
from pyskick.evaluation.evaluate import evaluate_policy
from pyskick.models import CompletionPolicy, ModelConfig, preset
from pyskick.models.critics import ValueHead
from pyskick.plugins import lookup
from pyskick.run_dir import CONFIG, RunDir
from pyskick.sidekicks.base import NoSidekick, Sidekick
from pyskick.sidekicks.factory import make_sidekick
from pyskick.training.baselines import AverageBaseline, ControlVariate
from pyskick.training.data import TrainData
from pyskick.training.loggers import Dispatcher, RunInfo, make_loggers
from pyskick.training.losses import completion_loss, control_variate_sums, episode_rewards
from pyskick.training.metric_sums import MetricSums
from pyskick.training.returns import reward_to_go
from pyskick.training.seeding import seed_everything

Stage = Literal["pretrain", "train"]

# Fields that may change when a run is resumed (to extend it); anything else must match.
_RESUMABLE_CHANGES = ("epochs", "pretrain_epochs", "device")

# What setup() builds (named when read before it ran).
_SET_UP_ATTRIBUTES = frozenset(
    {
        "T", "init", "sidekick", "device", "dist", "actor", "val_actor", "learn_actions",
        "model_config", "policy", "critic", "params", "optimizer", "baseline", "control_variate",
        "env", "action_generator", "start_epoch", "critic_calibrated", "best_val", "history",
        "policy_ddp", "critic_ddp", "logger",
    }
)  # fmt: skip

MAX_SEED = 2**32 - 1
"""The largest seed (32 bits: each epoch's generator is seeded with ``seed * 100_003 + epoch``,
which must fit in 64)."""


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
    out_dir: str | Path,
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
    out_dir: str | Path,
    data: TrainData,
    *,
    init: str | Path | None = None,
    resume: bool = False,
    sidekick: Sidekick | None = None,
    actor: Actor | None = None,
    loggers: Sequence[str] | None = None,
) -> TrainResult:
    """Train the look-around policy for ``config.epochs`` epochs.

    Args:
        config: the run's config.
        out_dir: the run folder (created).
        data: training and validation viewgrids.
        init: a pretrained run folder (its ``best.pt``) or checkpoint to start from; its
            Sense and Fuse are frozen. None trains from scratch without freezing.
        resume: continue from ``out_dir/latest.pt`` (``init`` is then not needed).
        sidekick: reward or demonstration helper; None builds the registered
            ``config.sidekick`` with ``config.sidekick_options`` (see :class:`Trainer`).
        actor: what picks the motions; None builds the registered ``config.actor`` (see
            :class:`Trainer`).
        loggers: registered logger names (see :class:`Trainer`).
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
    ).fit()


class Trainer:
    """One stage of training: :meth:`setup`, then :meth:`fit` -> :meth:`train_epoch` /
    :meth:`validate` per epoch.

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
    7. :meth:`_restore`: a resumed run's checkpoint (weights, optimizer, RNGs, epoch);
    8. :meth:`_wrap_ddp`: DDP wrappers under ``torchrun``.

    Every refusal comes from these steps, before anything is written. :meth:`fit` then
    :meth:`_open_run` (locks the run folder, drops the log and ``best.pt`` of an abandoned
    attempt when starting from scratch, records ``config.json``), :meth:`_make_logger` and
    trains the remaining epochs, reporting them to :mod:`pyskick.progress`.

    Args:
        config: the run's config.
        out_dir: the run folder.
        data: training and validation viewgrids.
        stage: ``"pretrain"`` or ``"train"``.
        init: checkpoint or run folder whose model weights start the run (train stage).
        resume: continue from ``out_dir/latest.pt``; a run killed before its first
            checkpoint (``config.json`` but no ``latest.pt``) starts again from scratch.
        sidekick: training helper (train stage). None builds the registered
            ``config.sidekick`` with :func:`~pyskick.sidekicks.make_sidekick` (``one_view=init``,
            the data's spec, ``options=config.sidekick_options``); a sidekick given here
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
        out_dir: str | Path,
        data: TrainData,
        *,
        stage: Stage,
        init: str | Path | None = None,
        resume: bool = False,
        sidekick: Sidekick | None = None,
        actor: Actor | None = None,
        loggers: Sequence[str] | None = None,
    ) -> None:
        if not isinstance(config, TrainConfig):
            raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
        if not isinstance(data, TrainData):
            raise TypeError(f"data must be a TrainData, got {type(data).__name__}")
        if stage not in ("pretrain", "train"):
            raise ValueError(f"stage must be 'pretrain' or 'train', got {stage!r}")
        if actor is not None and not isinstance(actor, Actor):
            raise TypeError(f"actor must be a pyskick.actors.Actor, got {type(actor).__name__}")
        if sidekick is not None and not isinstance(sidekick, Sidekick):
            raise TypeError(
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
        self._given_actor = actor
        self._logger_names = loggers
        self._is_set_up = False

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes that do not exist (yet): name the missing step.
        if name in _SET_UP_ATTRIBUTES:
            raise AttributeError(
                f"Trainer.{name} is built by setup() (fit() runs it); call setup() first"
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ---------------------------------------------------------------------------- setup
    def setup(self) -> Trainer:
        """Run the setup steps (see the class docstring); a second call does nothing.

        Returns:
            The trainer, set up.
        """
        if self._is_set_up:
            return self
        checkpoint = self._resolve_config()
        self._make_sidekick()
        self._init_distributed()
        self._make_actor()
        self._build_models(checkpoint)
        self._prepare_sidekick()
        self.start_epoch = 0
        # A learned critic of returns is put at their scale by the first batch (a resumed run
        # restores the flag); a residual critic starts at zero, i.e. at the average baseline.
        self.critic_calibrated = self.critic is None or self.config.critic_residual
        self.best_val = math.inf
        self.history: list[dict[str, float]] = []
        if checkpoint is not None:
            self._restore(checkpoint)
        self._wrap_ddp()
        self._is_set_up = True
        return self

    def _resolve_config(self) -> dict[str, Any] | None:
        """Step 1: the run's config and ``init``; refusals of the run folder and of a resumed
        run whose config differs. Reads the folder, writes nothing.

        Returns:
            The checkpoint to resume from, or None.
        """
        config, stage = self._requested_config, self.stage
        sidekick, actor = self._given_sidekick, self._given_actor
        if actor is not None and stage == "train":
            config = config.replace(actor=actor.name)
        if sidekick is not None and stage == "train":
            config = config.replace(sidekick=sidekick.name, sidekick_options=dict(sidekick.options))
            if sidekick.reward_radius is not None:
                # The environment zeroes rewards around visited views as the maps assume (set
                # before a resumed run's config is compared with the recorded one).
                config = config.replace(reward_radius=sidekick.reward_radius)
        if is_main():
            self.run.check_free()
        if not self.resume and self.run.latest.exists():
            raise UserError(
                f"{self.run_dir} already holds a run; resume it or choose another folder"
            )
        checkpoint: dict[str, Any] | None = None
        # What the run to continue recorded: its checkpoint or, when it was killed before its
        # first checkpoint (it then starts again from scratch), the config it started with.
        recorded: dict[str, Any] | None = None
        if self.resume:
            if self.run.has_checkpoint():
                checkpoint = recorded = load_checkpoint(self.run.latest)
            else:
                self.run.check_resumable(stage)
                saved = dict(self.run.read_record(CONFIG) or {})
                saved.pop("loggers", None)  # not part of the config: free to change
                saved.pop("loggers", None)  # not part of the config: free to change
                recorded = {"stage": saved.pop("stage", None), "config": saved}
        if recorded is not None:
            if recorded.get("stage") != stage:
                raise UserError(f"cannot resume a {recorded.get('stage')!r} run as a {stage!r} run")
            # Without a sidekick object the run rebuilds its own: the recorded radius, and the
            # recorded sidekick and options unless others were given.
            inherited: tuple[str, ...] = ()
            if sidekick is None:
                inherited = ("reward_radius",)
                inherited += ("sidekick",) if config.sidekick == "none" else ()
                inherited += ("sidekick_options",) if not config.sidekick_options else ()
            config = _resumed_config(recorded, config, stage, inherited)
        if stage == "pretrain":
            # One glimpse, no actions: the actor, critic and sidekick settings are moot.
            config = config.replace(T=1, critic="average", sidekick="none", sidekick_options={})
            self._given_sidekick = None
            self._given_actor = LearnedActor()
        # The critic's name is checked before anything is built; pretraining has none.
        self._critic_entry = (
            lookup("critic", config.critic, field="TrainConfig.critic")
            if stage == "train"
            else None
        )
        init = self._requested_init if checkpoint is None else checkpoint.get("init")
        if init is not None and checkpoint is None and stage != "train":
            raise ValueError("init is only for the train stage")
        # The one-view run this run started from, saved in checkpoints for evaluate().
        self.init: str | None = str(Path(init).resolve()) if init is not None else None
        # Weights to load: a new run's init (a resumed run restores its own).
        self._init_weights = init if checkpoint is None else None
        self.config = config
        self.epochs = config.pretrain_epochs if stage == "pretrain" else config.epochs
        self.T = config.T
        return checkpoint

    def _make_sidekick(self) -> None:
        """Step 2: the training helper: the one given, or the registered ``config.sidekick``
        with its recorded (or, for a new run, resolved) options; :class:`NoSidekick` when
        pretraining. Its options and reward radius are recorded in the config."""
        sidekick = self._given_sidekick
        if sidekick is None:  # the config's ("none" when pretraining)
            sidekick = make_sidekick(
                self.config.sidekick,
                one_view=None if self.init is None else Path(self.init),
                spec=self.data.spec,
                config=self.config,
                options=self.config.sidekick_options,
                field="TrainConfig.sidekick",
            )
            self.config = self.config.replace(sidekick_options=dict(sidekick.options))
            if sidekick.reward_radius is not None:
                self.config = self.config.replace(reward_radius=sidekick.reward_radius)
        self.sidekick: Sidekick = sidekick if sidekick is not None else NoSidekick()

    def _init_distributed(self) -> None:
        """Step 3: the request's cheap checks, the device, under ``torchrun`` the process
        group (:attr:`dist`), and the metric loggers (:attr:`logger`, not started yet)."""
        check_request(self.config, self.data)
        self.device = resolve_device(self.config.device)
        self.dist: DistContext = init_distributed(self.device)
        self.logger: Dispatcher = make_loggers(self._logger_names, rank=self.dist.rank)
        if self.config.batch_size % self.dist.world_size:
            raise UserError(
                f"batch_size {self.config.batch_size} must be divisible by the number of "
                f"processes ({self.dist.world_size})"
            )

    def _make_actor(self) -> None:
        """Step 4: what picks the motions in training and its own copy for validation;
        whether the act head learns."""
        actor = self._given_actor
        if actor is None:
            actor = make_actor(
                self.config.actor,
                one_view=None if self.init is None else Path(self.init),
                spec=self.data.spec,
                config=self.config,
                field="TrainConfig.actor",
            )
        self.actor: Actor = actor
        # Validation forces indices of the validation grids: its own instance, prepared once.
        self.val_actor: Actor = copy.deepcopy(actor)
        self.learn_actions = self.stage == "train" and actor.learned and self.config.T > 1
        if _overrides(actor, Actor, "forced_actions") and _overrides(
            self.sidekick, Sidekick, "demonstrations"
        ):
            raise UserError(
                f"actor {actor.name!r} forces the motions and sidekick {self.sidekick.name!r} "
                "demonstrates them: use one of the two"
            )

    def _build_models(self, checkpoint: dict[str, Any] | None) -> None:
        """Step 5: seed, then the policy (``init``'s weights, Sense and Fuse frozen), the
        critic, the optimizer, the baseline, the environment and the action generator (in this
        order: each draws from the seeded RNG)."""
        config = self.config
        seed_everything(config.seed, deterministic=config.deterministic)
        self.model_config = _model_config(config, self.data)
        self.policy = CompletionPolicy(self.model_config).to(self.device)
        if self._init_weights is not None:
            self._load_init(self._init_weights)
        frozen = self.init is not None
        if checkpoint is not None:
            frozen = bool(checkpoint["frozen"])
        if self.stage == "train" and frozen:
            self.policy.freeze_sense_and_fuse(
                include_decode=config.fix_decode, batchnorm=config.frozen_batchnorm
            )
        if not self.learn_actions:
            # No action is learned (T = 1, or a random or forcing actor): the act head gets no
            # gradient.
            self.policy.act.requires_grad_(False)
        entry = self._critic_entry
        self.critic = self._make_critic(entry.factory) if entry is not None else None
        params = self.policy.trainable_parameters()
        if self.critic is not None:
            params += [p for p in self.critic.parameters() if p.requires_grad]
        self.params = params
        self.optimizer = torch.optim.Adam(params, lr=config.lr, weight_decay=config.weight_decay)
        self.baseline = AverageBaseline()
        self.control_variate = ControlVariate()
        self.env = make_env(
            self.model_config,
            self.T,
            self.data.channel_mean,
            reward_radius=config.reward_radius,
            start_zeroing=config.start_zeroing,
        )
        self.action_generator = torch.Generator(self.device).manual_seed(
            config.seed + 1_000_003 * (self.dist.rank + 1)
        )

    def _prepare_sidekick(self) -> None:
        """Step 6: the sidekick (its scores: computed, or read from the cache) and the actor
        prepared on the training viewgrids; the validation actor on the validation ones."""
        self.sidekick.prepare(self.data.train, T=self.T, device=self.device)
        self.actor.prepare(self.data.train, T=self.T, device=self.device)
        # Every rank prepares on the whole validation set (score caches and shards assume the
        # same grids everywhere); each then forces by positions in it.
        self.val_actor.prepare(self.data.val, T=self.T, device=self.device)

    def _restore(self, checkpoint: dict[str, Any]) -> None:
        """Step 7: continue where ``checkpoint`` stopped (:func:`restore_training`)."""
        restore_training(self, checkpoint, self.data.grid_shape)

    def _wrap_ddp(self) -> None:
        """Step 8: the modules that compute gradients, wrapped in DDP under ``torchrun``."""
        self.policy_ddp: nn.Module = self.policy
        self.critic_ddp: nn.Module | None = self.critic
        if self.dist.distributed:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.policy_ddp = nn.parallel.DistributedDataParallel(self.policy, device_ids=ids)
            if self.critic is not None:
                # Demonstrated steps have no critic term, so a batch may leave it unused.
                self.critic_ddp = nn.parallel.DistributedDataParallel(
                    self.critic, device_ids=ids, find_unused_parameters=True
                )

    def _make_critic(self, factory: Callable[..., Any]) -> nn.Module | None:
        """The registered critic's module, or None for the average baseline (or when no
        action is learned)."""
        if not self.learn_actions:
            return None
        critic = factory(model_config=self.model_config, policy=self.policy)
        if critic is None:
            return None
        name = self.config.critic
        if not isinstance(critic, nn.Module):
            raise TypeError(
                f"critic {name!r} built a {type(critic).__name__}, not a torch.nn.Module or None"
            )
        if not isinstance(getattr(critic, "full_observability", None), bool):
            raise TypeError(f"critic {name!r} has no bool attribute full_observability")
        return critic.to(self.device)

    def _load_init(self, init: str | Path) -> None:
        state = _init_state(init, self.config, self.data, self.model_config, self.device)
        self.policy.load_state_dict(state["model"])

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
        self.setup()
        with self._open_run():
            # The log keeps exactly the records of the epochs the checkpoint covers (none for
            # a run that starts from scratch).
            logger = self._make_logger()
            try:
                self._train_epochs(logger)
            finally:
                logger.close()
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
                self.run.reset()  # the log and best.pt of an abandoned attempt
            self.run.record_start(
                self.stage,
                self.config.to_dict(),
                dataset=self.data.source,
                init=self.init,
                loggers=self.logger.names,
            )
            yield

    def _make_logger(self) -> Dispatcher:
        """The run's metric loggers (built by :meth:`setup`; rank 0 writes, see
        :mod:`pyskick.training.loggers`), started: the log keeps exactly the records of the
        epochs the checkpoint covers (none for a run that starts from scratch)."""
        self.logger.start(
            RunInfo(self.run_dir, self.stage, self.config.to_dict(), self.start_epoch, self.epochs)
        )
        return self.logger

    def _train_epochs(self, logger: Dispatcher) -> None:
        """Train, validate, log and checkpoint every remaining epoch."""
        with progress.stage(
            self.stage, total=self.epochs, unit="epoch", lines="each", initial=self.start_epoch
        ) as epochs:
            for epoch in range(self.start_epoch, self.epochs):
                metrics = self.train_epoch(epoch)
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
                self.save(epoch, best=improved)
                epochs.advance(
                    metrics={
                        "train_error": metrics["train/rec_error"],
                        "val_error": val,
                        "loss": metrics["train/loss"],
                    },
                )

    def epoch_batches(self, epoch: int) -> tuple[Tensor, Tensor]:
        """This rank's ``[n_batches, B_local]`` sample indices and start views of ``epoch``.

        The permutation and the starts of the *global* batches come from a generator seeded
        by ``(seed, epoch)``, identical on every rank; rank r takes the r-th slice of each
        global batch, so a run on k processes sees the same batches as a single process.
        The last ``n % batch_size`` samples of each (reshuffled) epoch are left out.
        """
        cfg = self.config
        generator = torch.Generator().manual_seed(cfg.seed * 100_003 + epoch)
        n = self.data.train.shape[0]
        n_batches = n // cfg.batch_size
        order = torch.randperm(n, generator=generator)[: n_batches * cfg.batch_size]
        starts = torch.randint(
            self.model_config.n_views, (n_batches * cfg.batch_size,), generator=generator
        )
        local = cfg.batch_size // self.dist.world_size
        lo = self.dist.rank * local
        shape = (n_batches, cfg.batch_size)
        return order.view(shape)[:, lo : lo + local], starts.view(shape)[:, lo : lo + local]

    def train_epoch(self, epoch: int) -> dict[str, float]:
        """One pass over the (reshuffled) training set; returns the epoch's metrics."""
        cfg = self.config
        self.policy.train()
        if self.critic is not None:
            self.critic.train()
        order, starts = self.epoch_batches(epoch)
        n_batches = order.shape[0]
        sums = MetricSums()
        env_seconds = 0.0
        step_seconds = 0.0
        epoch_tick = time.perf_counter()
        with progress.stage(
            f"{self.stage} epoch {epoch + 1}/{self.epochs}",
            total=n_batches,
            unit="batch",
            lines="none",
        ) as batches:
            for b in range(n_batches):
                tick = time.perf_counter()
                indices = order[b].to(self.device)
                batch_starts = starts[b].to(self.device)
                grids = self.data.train[order[b]].to(self.device, non_blocking=True)
                reward_maps = self.sidekick.reward_maps(indices, epoch)
                demos = self.sidekick.demonstrations(indices, batch_starts, epoch)
                forced = forced_demonstrations(self.actor, indices, batch_starts)
                if forced is not None:  # never both: checked when the trainer was set up
                    demos = forced
                sidekick_scale = self.sidekick.reward_scale(epoch)
                side_seconds = time.perf_counter() - tick
                rollout = collect_rollout(
                    self.policy_ddp,
                    self.env,
                    grids,
                    mode=self.actor.mode(training=True),
                    starts=batch_starts,
                    generator=self.action_generator,
                    critic=self.critic_ddp,
                    critic_full_obs=self.critic is not None and self.critic.full_observability,
                    reward_maps=reward_maps,
                    demonstrations=demos,
                    paste=cfg.memorize,
                )
                if not self.critic_calibrated:
                    rollout = self._calibrate_critic(rollout, sidekick_scale)
                tick_baseline = time.perf_counter()
                baseline = None
                uses_baseline = self.critic is None or cfg.critic_residual
                if self.learn_actions and uses_baseline and self.T > 1:
                    self._update_baseline(rollout.final_errors, rollout.intrinsic)
                    baseline = self.baseline.values(self.T, sidekick_scale, self.device)
                gated = baseline is not None and rollout.values is not None and cfg.critic_gate
                side_seconds += time.perf_counter() - tick_baseline
                loss = completion_loss(
                    rollout,
                    baseline=baseline,
                    sidekick_scale=sidekick_scale,
                    learn_actions=self.learn_actions,
                    reward_scale=cfg.reward_scale,
                    lambda_entropy=cfg.lambda_entropy,
                    critic_coeff=cfg.critic_coeff,
                    supervised_scale=cfg.supervised_scale,
                    critic_weight=self.control_variate.weight if gated else 1.0,
                )
                if gated:  # after the loss: the weight comes from earlier batches only
                    cv_sums = control_variate_sums(rollout, baseline, sidekick_scale)
                    self.control_variate.update(*all_reduce_sum(cv_sums, self.dist).tolist())
                self.optimizer.zero_grad(set_to_none=True)
                loss.total.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(self.params, cfg.grad_clip)
                self.optimizer.step()
                step_seconds += time.perf_counter() - tick
                env_seconds += side_seconds + rollout.env_seconds
                B = grids.shape[0]
                entropy = (
                    rollout.entropies.detach().mean(0).sum() if self.T > 1 else torch.zeros(())
                )
                # Each metric summed over the batch's samples; the means divide by all samples.
                sums.add(
                    B,
                    **{
                        "train/rec_error": float(rollout.final_errors.sum()),
                        "train/loss": float(loss.total.detach()) * B,
                        "train/policy_loss": float(loss.policy) * B,
                        "train/entropy": float(entropy),
                        "train/critic_loss": float(loss.critic) * B,
                        "train/supervised_loss": float(loss.supervised) * B,
                        "train/grad_norm": float(grad_norm) * B,
                    },
                )
                batches.advance()
        elapsed = time.perf_counter() - epoch_tick
        self._sync_buffers()
        sums = sums.all_reduce(self.dist)
        metrics = sums.means()
        metrics.update(
            {
                "perf/episodes_per_s": sums.samples / elapsed,
                "perf/env_share": env_seconds / step_seconds if step_seconds > 0 else 0.0,
                "perf/epoch_seconds": elapsed,
            }
        )
        if self.stage == "train":
            metrics["sidekick/reward_scale"] = self.sidekick.reward_scale(epoch)
            metrics["baseline/final_reward_mean"] = self.baseline.final_mean
            metrics["baseline/intrinsic_mean"] = self.baseline.intrinsic_mean
            if self.critic is not None and self.config.critic_residual and self.config.critic_gate:
                metrics["critic/weight"] = self.control_variate.weight
        return metrics

    def _calibrate_critic(self, rollout: Rollout, sidekick_scale: float) -> Rollout:
        """Start a learned critic at the scale of the returns (see
        :class:`~pyskick.models.critics.ValueHead`): its output becomes the mean return of the
        first batch that has policy-gradient steps (over all ranks), and this batch's values
        move with it. Critics that are not a ``ValueHead`` are left as they are."""
        critic = self.critic
        if not isinstance(critic, ValueHead) or rollout.values is None:
            self.critic_calibrated = True
            return rollout
        rl = (~rollout.supervised).double()
        returns = reward_to_go(episode_rewards(rollout, sidekick_scale)).detach().double()
        total = all_reduce_sum(
            torch.stack([(returns * rl).sum(), rl.sum()]).cpu(), self.dist
        ).tolist()
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

    def _update_baseline(self, final_errors: Tensor, intrinsic: Tensor) -> None:
        """Add this batch (all ranks) to the running means; training rollouts only."""
        sums = torch.tensor(
            [
                -float(final_errors.double().sum()),
                final_errors.numel(),
                float(intrinsic.double().sum()),
                intrinsic.numel(),
            ],
            dtype=torch.float64,
        )
        final_sum, final_count, intr_sum, intr_count = all_reduce_sum(sums, self.dist).tolist()
        self.baseline.update(final_sum, int(final_count), intr_sum, int(intr_count))

    def validate(self) -> float:
        """Mean per-sample error on the validation set (deterministic; ``config.val_metric``).

        Each rank evaluates every ``world_size``-th viewgrid; the sums are combined.
        """
        cfg = self.config
        positions = torch.arange(self.dist.rank, self.data.val.shape[0], self.dist.world_size)
        shard = self.data.val[positions]
        total = torch.zeros(2, dtype=torch.float64)
        if shard.shape[0] > 0:
            with progress.quiet():  # on the epoch's line, not one of its own
                result = evaluate_policy(
                    self.policy,
                    shard,
                    sample_indices=positions,
                    channel_mean=self.data.channel_mean,
                    T=self.T,
                    metric=cfg.val_metric,
                    actor=self.val_actor,
                    batch_size=cfg.eval_batch_size,
                    seed=cfg.seed,
                )
            total += torch.tensor([float(result.per_sample.sum()), shard.shape[0]])
        total = all_reduce_sum(total, self.dist)
        return float(total[0] / total[1])

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


def check_request(config: TrainConfig, data: TrainData) -> None:
    """The checks of a run that need no model, cheap enough to make before any other work:
    the seed's range, the device, the batch size against the training split.

    Raises:
        ValueError: one line naming the value.
    """
    if not 0 <= config.seed <= MAX_SEED:
        raise UserError(f"seed {config.seed} is out of range (0 to {MAX_SEED})")
    resolve_device(config.device)
    if data.train.shape[0] < config.batch_size:
        raise UserError(
            f"batch_size {config.batch_size} exceeds the {data.train.shape[0]} training viewgrids"
        )


def check_init(init: str | Path, config: TrainConfig, data: TrainData) -> None:
    """Refuse an ``init`` that is no one-view model for this config and data (not a run or
    checkpoint, a damaged checkpoint, another architecture) before any other work.

    Raises:
        FileNotFoundError: no checkpoint there.
        ValueError: not a pyskick checkpoint, or another architecture or data shape.
    """
    _init_state(init, config, data, _model_config(config, data), "cpu")


def _init_state(
    init: str | Path,
    config: TrainConfig,
    data: TrainData,
    model_config: ModelConfig,
    map_location: str | torch.device,
) -> dict[str, Any]:
    """The checkpoint state of ``init``, checked against the run's model."""
    path, state = load_run(init, map_location=map_location, keys=POLICY_KEYS)
    if ModelConfig.from_dict(state["model_config"]) != model_config:
        raise UserError(
            f"{path} holds a model of another architecture or data shape than this run "
            f"(model preset {config.model!r}, grids {list(data.grid_shape)})"
        )
    return state


def _model_config(config: TrainConfig, data: TrainData) -> ModelConfig:
    """The model preset with the data's grid shape."""
    N, M, C, H = data.grid_shape
    base = preset(config.model)
    try:
        return ModelConfig.from_dict(
            {
                **base.to_dict(),
                "n_elevations": N,
                "n_azimuths": M,
                "channels": C,
                "view_size": H,
            }
        )
    except (TypeError, ValueError) as exc:
        raise UserError(f"the data's viewgrids do not fit model {config.model!r}: {exc}") from None


def _resumed_config(
    state: dict[str, Any], config: TrainConfig, stage: Stage, inherited: tuple[str, ...] = ()
) -> TrainConfig:
    """The saved config with only the resumable fields taken from ``config``; ``inherited``
    fields are the saved ones, whatever ``config`` says."""
    saved = TrainConfig.from_dict(state["config"])
    ignored = TRAIN_ONLY_FIELDS if stage == "pretrain" else inherited
    for name, value in config.to_dict().items():
        if name in _RESUMABLE_CHANGES or name in ignored:
            continue
        if getattr(saved, name) != value:
            raise UserError(
                f"cannot resume: config field {name} is {value!r} but the run used "
                f"{getattr(saved, name)!r}"
            )
    return saved.replace(**{name: getattr(config, name) for name in _RESUMABLE_CHANGES})


def _overrides(obj: object, base: type, method: str) -> bool:
    """Whether ``obj``'s class replaces ``base.method``."""
    return getattr(type(obj), method) is not getattr(base, method)
