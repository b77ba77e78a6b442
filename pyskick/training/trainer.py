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
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from torch import Tensor, nn

from pyskick.actors import Actor, LearnedActor, make_actor
from pyskick.actors.base import forced_demonstrations
from pyskick.evaluation.evaluate import evaluate_policy, make_env
from pyskick.models import CompletionPolicy, ModelConfig, preset
from pyskick.models.critics import ValueHead
from pyskick.plugins import lookup
from pyskick.run_dir import CONFIG, RunDir, is_main_process
from pyskick.sidekicks.base import NoSidekick, Sidekick
from pyskick.sidekicks.factory import make_sidekick
from pyskick.training.baselines import AverageBaseline
from pyskick.training.checkpoint import (
    POLICY_KEYS,
    capture_rng_state,
    load_checkpoint,
    load_run,
    restore_rng_state,
    save_checkpoint,
)
from pyskick.training.config import TRAIN_ONLY_FIELDS, TrainConfig
from pyskick.training.data import TrainData
from pyskick.training.distributed import (
    DistContext,
    all_reduce_sum,
    init_distributed,
    resolve_device,
)
from pyskick.training.loggers import make_logger
from pyskick.training.losses import completion_loss, episode_rewards
from pyskick.training.returns import reward_to_go
from pyskick.training.rollout import Rollout, collect_rollout
from pyskick.training.seeding import seed_everything

Stage = Literal["pretrain", "train"]

# Fields that may change when a run is resumed (to extend it); anything else must match.
_RESUMABLE_CHANGES = ("epochs", "pretrain_epochs", "device")

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
    config: TrainConfig, out_dir: str | Path, data: TrainData, *, resume: bool = False
) -> TrainResult:
    """Train a one-view (T = 1) reconstruction model for ``config.pretrain_epochs`` epochs.

    Args:
        config: the run's config (its ``T`` is ignored: pretraining uses T = 1).
        out_dir: the run folder (created).
        data: training and validation viewgrids.
        resume: continue from ``out_dir/latest.pt``.
    """
    return Trainer(config, out_dir, data, stage="pretrain", resume=resume).fit()


def train(
    config: TrainConfig,
    out_dir: str | Path,
    data: TrainData,
    *,
    init: str | Path | None = None,
    resume: bool = False,
    sidekick: Sidekick | None = None,
    actor: Actor | None = None,
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
    ).fit()


class Trainer:
    """One stage of training: setup, :meth:`fit` -> :meth:`train_epoch` / :meth:`validate`.

    Building a trainer checks the whole request and writes nothing; :meth:`fit` locks the run
    folder (:class:`~pyskick.run_dir.RunDir`), removes stale temporaries, records
    ``config.json`` and trains. A run that starts from scratch drops the log and ``best.pt``
    of an abandoned attempt; a resumed one keeps the log records its checkpoint covers.

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

    Raises:
        ValueError: incompatible data, init or resumed run, an unknown critic or actor name
            (one line naming what differs), or a run folder another process writes
            (:class:`~pyskick.run_dir.RunLockedError`).
        FileNotFoundError: missing init, or nothing to resume.
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
    ) -> None:
        if not isinstance(config, TrainConfig):
            raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
        if not isinstance(data, TrainData):
            raise TypeError(f"data must be a TrainData, got {type(data).__name__}")
        if stage not in ("pretrain", "train"):
            raise ValueError(f"stage must be 'pretrain' or 'train', got {stage!r}")
        if actor is not None and not isinstance(actor, Actor):
            raise TypeError(f"actor must be a pyskick.actors.Actor, got {type(actor).__name__}")
        if actor is not None and stage == "train":
            config = config.replace(actor=actor.name)
        if sidekick is not None and not isinstance(sidekick, Sidekick):
            raise TypeError(
                f"sidekick must be a pyskick.sidekicks.Sidekick, got {type(sidekick).__name__}"
            )
        if sidekick is not None and stage == "train":
            config = config.replace(sidekick=sidekick.name, sidekick_options=dict(sidekick.options))
            if sidekick.reward_radius is not None:
                # The environment zeroes rewards around visited views as the maps assume (set
                # before a resumed run's config is compared with the recorded one).
                config = config.replace(reward_radius=sidekick.reward_radius)
        self.run = RunDir(out_dir)
        self.run_dir = self.run.path
        if is_main_process():
            self.run.check_free()
        if not resume and self.run.latest.exists():
            raise ValueError(
                f"{self.run_dir} already holds a run; resume it or choose another folder"
            )
        resume_state: dict[str, Any] | None = None
        # What the run to continue recorded: its checkpoint or, when it was killed before its
        # first checkpoint (it then starts again from scratch), the config it started with.
        recorded: dict[str, Any] | None = None
        if resume:
            if self.run.has_checkpoint():
                resume_state = recorded = load_checkpoint(self.run.latest)
            else:
                self.run.check_resumable(stage)
                saved = dict(self.run.read_record(CONFIG) or {})
                recorded = {"stage": saved.pop("stage", None), "config": saved}
        if recorded is not None:
            if recorded.get("stage") != stage:
                raise ValueError(
                    f"cannot resume a {recorded.get('stage')!r} run as a {stage!r} run"
                )
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
            sidekick = None
            actor = LearnedActor()
        # The critic's name is checked before anything is built; pretraining has none.
        critic_entry = (
            lookup("critic", config.critic, field="TrainConfig.critic")
            if stage == "train"
            else None
        )
        if resume_state is not None:
            init = resume_state.get("init")
        # The one-view run this run started from, saved in checkpoints for evaluate().
        self.init: str | None = str(Path(init).resolve()) if init is not None else None
        if sidekick is None and stage == "train":
            # The config's sidekick, with its recorded (or, for a new run, resolved) options.
            sidekick = make_sidekick(
                config.sidekick,
                one_view=None if self.init is None else Path(self.init),
                spec=data.spec,
                config=config,
                options=config.sidekick_options,
                field="TrainConfig.sidekick",
            )
            config = config.replace(sidekick_options=dict(sidekick.options))
            if sidekick.reward_radius is not None:
                config = config.replace(reward_radius=sidekick.reward_radius)
        self.config = config
        self.stage = stage
        self.data = data
        check_request(config, data)
        self.device = resolve_device(config.device, _local_rank())
        self.dist: DistContext = init_distributed(self.device)
        if config.batch_size % self.dist.world_size:
            raise ValueError(
                f"batch_size {config.batch_size} must be divisible by the number of "
                f"processes ({self.dist.world_size})"
            )
        self.epochs = config.pretrain_epochs if stage == "pretrain" else config.epochs
        self.T = config.T
        if actor is None:
            actor = make_actor(
                config.actor,
                one_view=None if self.init is None else Path(self.init),
                spec=data.spec,
                config=config,
                field="TrainConfig.actor",
            )
        self.actor: Actor = actor
        # Validation forces indices of the validation grids: its own instance, prepared once.
        self.val_actor: Actor = copy.deepcopy(actor)
        self.learn_actions = stage == "train" and actor.learned and config.T > 1
        self.sidekick: Sidekick = sidekick if sidekick is not None else NoSidekick()
        if _overrides(actor, Actor, "forced_actions") and _overrides(
            self.sidekick, Sidekick, "demonstrations"
        ):
            raise ValueError(
                f"actor {actor.name!r} forces the motions and sidekick {self.sidekick.name!r} "
                "demonstrates them: use one of the two"
            )

        seed_everything(config.seed, deterministic=config.deterministic)
        self.model_config = _model_config(config, data)
        self.policy = CompletionPolicy(self.model_config).to(self.device)
        if init is not None and resume_state is None:
            if stage != "train":
                raise ValueError("init is only for the train stage")
            self._load_init(init)
        frozen = init is not None
        if resume_state is not None:
            frozen = bool(resume_state["frozen"])
        if stage == "train" and frozen:
            self.policy.freeze_sense_and_fuse(
                include_decode=config.fix_decode, batchnorm=config.frozen_batchnorm
            )
        if not self.learn_actions:
            # No action is learned (T = 1, or a random or forcing actor): the act head gets no
            # gradient.
            self.policy.act.requires_grad_(False)
        self.critic = self._make_critic(critic_entry.factory) if critic_entry else None
        params = self.policy.trainable_parameters()
        if self.critic is not None:
            params += [p for p in self.critic.parameters() if p.requires_grad]
        self.params = params
        self.optimizer = torch.optim.Adam(params, lr=config.lr, weight_decay=config.weight_decay)
        self.baseline = AverageBaseline()
        self.env = make_env(
            self.model_config,
            self.T,
            data.channel_mean,
            reward_radius=config.reward_radius,
            start_zeroing=config.start_zeroing,
        )
        self.action_generator = torch.Generator(self.device).manual_seed(
            config.seed + 1_000_003 * (self.dist.rank + 1)
        )
        self.sidekick.prepare(data.train, T=self.T, device=self.device)
        self.actor.prepare(data.train, T=self.T, device=self.device)
        # Every rank prepares on the whole validation set (score caches and shards assume the
        # same grids everywhere); each then forces by positions in it.
        self.val_actor.prepare(data.val, T=self.T, device=self.device)

        self.start_epoch = 0
        # A learned critic of returns is put at their scale by the first batch (a resumed run
        # restores the flag); a residual critic starts at zero, i.e. at the average baseline.
        self.critic_calibrated = self.critic is None or config.critic_residual
        self.best_val = math.inf
        self.history: list[dict[str, float]] = []
        if resume_state is not None:
            self._restore(resume_state)

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

    # ---------------------------------------------------------------------------- setup
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

    def _restore(self, state: dict[str, Any]) -> None:
        if ModelConfig.from_dict(state["model_config"]) != self.model_config:
            raise ValueError(
                f"cannot resume: the data's viewgrids {list(self.data.grid_shape)} do not match "
                "the run's model"
            )
        self.policy.load_state_dict(state["model"])
        if self.critic is not None:
            # Checkpoints from before critic_residual existed hold critics of the return.
            recorded = bool(state["config"].get("critic_residual", False))
            if recorded != self.config.critic_residual:
                raise ValueError(
                    "cannot resume: the run's critic was trained with critic_residual = "
                    f"{recorded}, this run has {self.config.critic_residual}"
                )
            self.critic.load_state_dict(state["critic"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.baseline.load_state_dict(state["baseline"])
        self.sidekick.load_state_dict(state["sidekick"])
        restore_rng_state(state["rng"]["global"])
        action_states = state["rng"]["actions"]
        if len(action_states) != self.dist.world_size:
            raise ValueError(
                f"cannot resume: the run used {len(action_states)} processes, this one has "
                f"{self.dist.world_size}"
            )
        self.action_generator.set_state(action_states[self.dist.rank].to("cpu"))
        self.start_epoch = int(state["epoch"]) + 1
        self.critic_calibrated = bool(state.get("critic_calibrated", True))
        self.best_val = float(state["best_val"])
        self.history = [dict(item) for item in state["history"]]

    # ------------------------------------------------------------------------------ fit
    def fit(self) -> TrainResult:
        """Lock the run folder, record the run and train the remaining epochs; returns the
        run's summary.

        Raises:
            RunLockedError: another process writes the run folder.
        """
        if not self.dist.is_main:
            return self._fit()
        with self.run.locked():
            if self.start_epoch == 0:
                self.run.reset()  # the log and best.pt of an abandoned attempt
            self.run.write_record(CONFIG, {"stage": self.stage, **self.config.to_dict()})
            return self._fit()

    def _fit(self) -> TrainResult:
        # The log keeps exactly the records of the epochs the checkpoint covers (none for a
        # run that starts from scratch).
        logger = make_logger(
            self.run_dir, rank=self.dist.rank, keep_until_step=self.start_epoch - 1
        )
        try:
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
                logger.write(metrics, epoch)
                self.save(epoch, best=improved)
                _progress_line(self, epoch, metrics)
        finally:
            logger.close()
        return TrainResult(
            run_dir=self.run_dir,
            stage=self.stage,
            best_val=self.best_val,
            epochs=len(self.history),
            history=list(self.history),
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
        # Summed over batches (and later ranks): final error, loss parts, entropy, counts.
        sums = torch.zeros(8, dtype=torch.float64)
        env_seconds = 0.0
        step_seconds = 0.0
        epoch_tick = time.perf_counter()
        for b in range(order.shape[0]):
            tick = time.perf_counter()
            indices = order[b].to(self.device)
            batch_starts = starts[b].to(self.device)
            grids = self.data.train[order[b]].to(self.device, non_blocking=True)
            reward_maps = self.sidekick.reward_maps(indices, epoch)
            demos = self.sidekick.demonstrations(indices, batch_starts, epoch)
            forced = forced_demonstrations(self.actor, indices, batch_starts)
            if forced is not None:  # never both: checked when the trainer was built
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
            )
            self.optimizer.zero_grad(set_to_none=True)
            loss.total.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(self.params, cfg.grad_clip)
            self.optimizer.step()
            step_seconds += time.perf_counter() - tick
            env_seconds += side_seconds + rollout.env_seconds
            B = grids.shape[0]
            entropy = rollout.entropies.detach().mean(0).sum() if self.T > 1 else torch.zeros(())
            sums += torch.tensor(
                [
                    float(rollout.final_errors.sum()),
                    float(loss.total.detach()) * B,
                    float(loss.policy) * B,
                    float(entropy),
                    float(loss.critic) * B,
                    float(loss.supervised) * B,
                    float(grad_norm) * B,
                    B,
                ],
                dtype=torch.float64,
            )
            _progress_batch(self, epoch, b, order.shape[0])
        elapsed = time.perf_counter() - epoch_tick
        self._sync_buffers()
        sums = all_reduce_sum(sums, self.dist)
        n = float(sums[7])
        metrics = {
            "train/rec_error": float(sums[0]) / n,
            "train/loss": float(sums[1]) / n,
            "train/policy_loss": float(sums[2]) / n,
            "train/entropy": float(sums[3]) / n,
            "train/critic_loss": float(sums[4]) / n,
            "train/supervised_loss": float(sums[5]) / n,
            "train/grad_norm": float(sums[6]) / n,
            "perf/episodes_per_s": n / elapsed,
            "perf/env_share": env_seconds / step_seconds if step_seconds > 0 else 0.0,
            "perf/epoch_seconds": elapsed,
        }
        if self.stage == "train":
            metrics["sidekick/reward_scale"] = self.sidekick.reward_scale(epoch)
            metrics["baseline/final_reward_mean"] = self.baseline.final_mean
            metrics["baseline/intrinsic_mean"] = self.baseline.intrinsic_mean
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
        """Everything a resumed run needs, as plain types and tensors."""
        action_states = [self.action_generator.get_state()]
        if self.dist.distributed:
            gathered: list[Any] = [None] * self.dist.world_size
            torch.distributed.all_gather_object(gathered, action_states[0])
            action_states = gathered
        return {
            "stage": self.stage,
            "epoch": epoch,
            "init": self.init,
            "config": self.config.to_dict(),
            "model_config": self.model_config.to_dict(),
            "model": self.policy.state_dict(),
            "frozen": list(self.policy.frozen_modules),
            "critic": self.critic.state_dict() if self.critic is not None else None,
            "optimizer": self.optimizer.state_dict(),
            "baseline": self.baseline.state_dict(),
            "critic_calibrated": self.critic_calibrated,
            "sidekick": self.sidekick.state_dict(),
            "sidekick_name": self.sidekick.name,
            "rng": {"global": capture_rng_state(), "actions": action_states},
            "best_val": self.best_val,
            "history": list(self.history),
        }

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
        raise ValueError(f"seed {config.seed} is out of range (0 to {MAX_SEED})")
    resolve_device(config.device, _local_rank())
    if data.train.shape[0] < config.batch_size:
        raise ValueError(
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
        raise ValueError(
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
        raise ValueError(f"the data's viewgrids do not fit model {config.model!r}: {exc}") from None


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
            raise ValueError(
                f"cannot resume: config field {name} is {value!r} but the run used "
                f"{getattr(saved, name)!r}"
            )
    return saved.replace(**{name: getattr(config, name) for name in _RESUMABLE_CHANGES})


def _overrides(obj: object, base: type, method: str) -> bool:
    """Whether ``obj``'s class replaces ``base.method``."""
    return getattr(type(obj), method) is not getattr(base, method)


def _local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0"))


def _progress_batch(trainer: Trainer, epoch: int, batch: int, n_batches: int) -> None:
    """A live batch counter on an interactive stderr (rank 0 only)."""
    if trainer.dist.is_main and sys.stderr.isatty():
        sys.stderr.write(f"\r{trainer.stage} epoch {epoch + 1}/{trainer.epochs} ")
        sys.stderr.write(f"batch {batch + 1}/{n_batches}")
        sys.stderr.flush()


def _progress_line(trainer: Trainer, epoch: int, metrics: dict[str, float]) -> None:
    """The epoch's summary line on an interactive stderr (rank 0 only)."""
    if trainer.dist.is_main and sys.stderr.isatty():
        sys.stderr.write(
            f"\r{trainer.stage} epoch {epoch + 1}/{trainer.epochs}: "
            f"train {metrics['train/rec_error'] * 1e3:.2f} "
            f"val {metrics['val/rec_error'] * 1e3:.2f} (x1000)\n"
        )
        sys.stderr.flush()
