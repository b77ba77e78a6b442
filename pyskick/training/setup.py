"""Building a run: the trainer's set-up steps, and the checks of a run's request, init and
resumed config (docs/training.md, "Stages").

:class:`TrainerSetup` holds the steps that :meth:`Trainer.setup` runs in order (every refusal
comes from them, before anything is written); the functions below are the checks that the
command line also makes before any other work.
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import torch
from torch import nn

from pyskick.actors import Actor, LearnedActor, make_actor
from pyskick.checkpoint import POLICY_KEYS, check_one_view, load_checkpoint, load_run
from pyskick.config import RUNTIME_FIELDS, TRAIN_ONLY_FIELDS, TrainConfig
from pyskick.distributed import DistContext, init_distributed, is_main, resolve_device
from pyskick.envs.rollout import make_env
from pyskick.errors import UserError
from pyskick.models import CompletionPolicy, ModelConfig, preset
from pyskick.models.memory_format import use_channels_last
from pyskick.overrides import overrides
from pyskick.plugins import lookup
from pyskick.run_dir import CONFIG, RunDir, checkpoint_digest
from pyskick.sidekicks.base import NoSidekick, Sidekick
from pyskick.sidekicks.factory import RunSidekick, for_run
from pyskick.sidekicks.scores import has_scores
from pyskick.training.baselines import AverageBaseline, ControlVariate
from pyskick.training.batches import GridSource, resolve_data_on_device
from pyskick.training.compiled import CompiledNetwork, check_compile
from pyskick.training.data import TrainData
from pyskick.training.loggers import Dispatcher, make_loggers
from pyskick.training.seeding import seed_everything
from pyskick.training.state import (
    check_same_scores,
    restore_training,
    resumed_init,
    sidekick_scores,
)

if TYPE_CHECKING:
    pass

Stage = Literal["pretrain", "train"]

# Fields that may change when a run is resumed (to extend it, or to compute elsewhere or
# otherwise); anything else must match.
_RESUMABLE_CHANGES = ("epochs", "pretrain_epochs", *RUNTIME_FIELDS)

MAX_SEED = 2**32 - 1
"""The largest seed (32 bits: each epoch's generator is seeded with ``seed * 100_003 + epoch``,
which must fit in 64)."""


class TrainerSetup:
    """The set-up steps of :class:`~pyskick.training.Trainer` (see its docstring), each
    reading what the ones before it set."""

    # What the constructor sets (Trainer.__init__).
    config: TrainConfig
    stage: str  # a Stage, typed as Checkpointed (pyskick.training.state) declares it
    data: TrainData
    run: RunDir
    run_dir: Path
    resume: bool
    epochs: int
    _requested_config: TrainConfig
    _requested_init: str | os.PathLike[str] | None
    _given_sidekick: Sidekick | None
    _scores: Path | None
    _given_actor: Actor | None
    _logger_names: Sequence[str] | None
    _is_set_up: bool
    pack_record: dict[str, Any] | None
    _grid_sources: tuple[GridSource, GridSource] | None

    def setup(self) -> Any:
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
        # What the sidekick's scores depend on, recorded at the start: a resume whose scores
        # would differ (the one-view model trained further) is refused before any scoring.
        self.scored_with = sidekick_scores(self.sidekick, self.T)
        if checkpoint is not None:
            check_same_scores(self.run_dir, checkpoint.get("sidekick_scores"), self.scored_with)
        self._prepare_sidekick()
        self._place_data()
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
        self._run_sidekick: RunSidekick | None = None  # resolved here when resuming
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
        if not self.resume:
            self.run.check_not_other_output()
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
                # Not part of the config: free to change.
                saved.pop("loggers", None)
                saved.pop("device_used", None)
                pack = saved.pop("pack", None)
                recorded = {"stage": saved.pop("stage", None), "config": saved, "pack": pack}
        if recorded is not None:
            if recorded.get("stage") != stage:
                raise UserError(f"cannot resume a {recorded.get('stage')!r} run as a {stage!r} run")
            check_pack(self.run_dir, recorded.get("pack"), self.pack_record)
            # Without a sidekick object the run rebuilds its own (the one resolver, with the
            # resume rules): the recorded sidekick unless another was named, the recorded
            # options (given ones must agree), and the recorded radius. With one, the options
            # its record predates take the object's values (the others must agree).
            inherited: tuple[str, ...] = ()
            if sidekick is None:
                inherited = ("reward_radius",)
                if stage == "train":
                    self._run_sidekick = for_run(
                        None if config.sidekick == "none" else config.sidekick,
                        config.sidekick_options,
                        spec=self.data.spec,
                        config=config,
                        recorded=recorded.get("config") or {},
                        field="TrainConfig.sidekick",
                    )
                    config = config.replace(
                        sidekick=self._run_sidekick.name,
                        sidekick_options=self._run_sidekick.options,
                    )
            elif stage == "train":
                recorded = options_the_run_predates(recorded, config)
            config = resumed_config(recorded, config, stage, inherited)
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
        if stage == "train":
            check_policy_glimpses(config)
        init = self._requested_init
        if init is not None and checkpoint is None and stage != "train":
            raise ValueError("init is only for the train stage")
        # The one-view run this run started from, saved in checkpoints for evaluate(), and its
        # checkpoint's digest, which lets a resume find it at another place (a moved folder).
        self.init: str | None = str(Path(init).resolve()) if init is not None else None
        self.init_sha256: str | None = None
        record = self.run.dataset_record() if self.resume and checkpoint is None else None
        if checkpoint is not None:
            self.init, self.init_sha256 = resumed_init(self.run_dir, checkpoint, init)
        elif record is not None and stage == "train":
            # Killed before its first checkpoint: it starts again from the one it recorded.
            self.init, self.init_sha256 = resumed_init(self.run_dir, record, init)
        if checkpoint is None and self.init is not None:
            self.init_sha256 = checkpoint_digest(self.init)  # the bytes it starts from
        # Weights to load: a new run's init (a resumed run restores its own).
        self._init_weights = self.init if checkpoint is None else None
        self.config = config
        self.epochs = config.pretrain_epochs if stage == "pretrain" else config.epochs
        done = 0 if checkpoint is None else int(checkpoint["epoch"]) + 1
        if self.epochs < done:
            # Its checkpoints, log and best.pt are of more epochs than it would record.
            raise UserError(
                f"cannot resume {self.run_dir} for {self.epochs} epochs: it has trained {done} "
                f"(a resume extends a run; ask for at least {done})"
            )
        self.T = config.T
        return checkpoint

    def _make_sidekick(self) -> None:
        """Step 2: the training helper: the one given, or the registered ``config.sidekick``
        with its recorded (or, for a new run, resolved) options; :class:`NoSidekick` when
        pretraining. Its options and reward radius are recorded in the config."""
        sidekick = self._given_sidekick
        if sidekick is None:  # the config's ("none" when pretraining)
            run = self._run_sidekick or for_run(
                self.config.sidekick,
                self.config.sidekick_options,
                spec=self.data.spec,
                config=self.config,
                field="TrainConfig.sidekick",
            )
            sidekick = run.build(
                one_view=None if self.init is None else Path(self.init),
                spec=self.data.spec,
                config=self.config,
                channel_mean=self.data.channel_mean,  # grids built in memory have no spec
            )
            self.config = self.config.replace(sidekick_options=dict(sidekick.options))
            if sidekick.reward_radius is not None:
                self.config = self.config.replace(reward_radius=sidekick.reward_radius)
        self.sidekick: Sidekick = sidekick if sidekick is not None else NoSidekick()
        if self._scores is not None:  # the one place a score file reaches a sidekick
            if not has_scores(self.sidekick):
                raise UserError(
                    f"sidekick {self.sidekick.name!r} has no scores to load from a file"
                )
            self.sidekick.scores_file = self._scores  # type: ignore[attr-defined]

    def _init_distributed(self) -> None:
        """Step 3: the request's cheap checks, the device, under ``torchrun`` the process
        group (:attr:`dist`), and the metric loggers (:attr:`logger`, not started yet)."""
        check_request(self.config, self.data)
        self.device = resolve_device(self.config.device)
        self.dist: DistContext = init_distributed(self.device)
        if self.config.cuda_graph and self.dist.distributed:
            raise UserError("cuda_graph trains one process: drop it under torchrun")
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
        if overrides(actor, "forced_actions") and overrides(self.sidekick, "demonstrations"):
            raise UserError(
                f"actor {actor.name!r} forces the motions and sidekick {self.sidekick.name!r} "
                "demonstrates them: use one of the two"
            )

    def _build_models(self, checkpoint: dict[str, Any] | None) -> None:
        """Step 5: seed (and turn cuDNN's autotuner on when asked), then the policy
        (``init``'s weights, Sense and Fuse frozen), the critic, the optimizer, the baseline,
        the environment and the action generator (in this order: each draws from the seeded
        RNG)."""
        config = self.config
        seed_everything(config.seed, deterministic=config.deterministic)
        if config.cudnn_benchmark:  # the process's setting; False leaves it alone
            torch.backends.cudnn.benchmark = True
        self.model_config = model_config_for(config, self.data)
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
        if config.channels_last:  # before the optimizer's state takes their layout
            use_channels_last(self.policy)
            if self.critic is not None:
                use_channels_last(self.critic)
        params = self.policy.trainable_parameters()
        if self.critic is not None:
            params += [p for p in self.critic.parameters() if p.requires_grad]
        self.params = params
        self.optimizer: torch.optim.Optimizer = adam(params, config, self.device)
        self.baseline = AverageBaseline(self.device)
        self.control_variate = ControlVariate(device=self.device)
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

    def _place_data(self) -> None:
        """Step 7: the viewgrids where the episodes read them (``config.data_on_device``);
        a pack hands its runs one shared copy."""
        if self._grid_sources is not None:
            self.train_grids, self.val_grids = self._grid_sources
            return
        resident = resolve_data_on_device(
            self.config.data_on_device, [self.data.train, self.data.val], self.device
        )
        self.train_grids = GridSource(self.data.train, self.device, resident=resident)
        self.val_grids = GridSource(self.data.val, self.device, resident=resident)

    def _prepare_sidekick(self) -> None:
        """Step 6: the sidekick (its scores: computed, or read from the cache) and the actor
        prepared on the training viewgrids; the validation actor on the validation ones."""
        self.sidekick.prepare(self.data.train, T=self.T, device=self.device)
        self.actor.prepare(self.data.train, T=self.T, device=self.device)
        # Every rank prepares on the whole validation set (score caches and shards assume the
        # same grids everywhere); each then forces by positions in it.
        self.val_actor.prepare(self.data.val, T=self.T, device=self.device)

    def _restore(self, checkpoint: dict[str, Any]) -> None:
        """Step 8: continue where ``checkpoint`` stopped (:func:`restore_training`)."""
        restore_training(self, checkpoint, self.data.grid_shape)

    def _wrap_ddp(self) -> None:
        """Step 9: the modules that compute gradients, wrapped in DDP under ``torchrun``, and
        compiled with ``config.compile``."""
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
        if self.config.compile:  # around DDP, as torch.compile wants it
            self.policy_ddp = CompiledNetwork(self.policy_ddp)
            if self.critic_ddp is not None:
                self.critic_ddp = CompiledNetwork(self.critic_ddp)

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

    def _load_init(self, init: str | os.PathLike[str]) -> None:
        state = init_state(init, self.config, self.data, self.model_config, self.device)
        self.policy.load_state_dict(state["model"])


def check_pack(
    run_dir: Path, recorded: dict[str, Any] | None, requested: dict[str, Any] | None
) -> None:
    """Refuse to continue a run in another pack than the one it was trained in, or a packed
    run alone, or a run trained alone in a pack: its numbers would change
    (docs/training.md, "Packed runs").

    Raises:
        ValueError: one line naming the run and the pack it belongs to.
    """
    was = None if recorded is None else [str(p) for p in recorded["runs"]]
    now = None if requested is None else [str(p) for p in requested["runs"]]
    if was == now:
        return
    if was is None:
        raise UserError(f"cannot resume {run_dir} in a pack: it was trained alone")
    names = ", ".join(was)
    if now is None:
        raise UserError(
            f"cannot resume {run_dir} alone: it was trained in a pack of {len(was)} runs "
            f"({names}); resume the pack (rerun `pyskick reproduce` with the same methods and "
            "seeds)"
        )
    raise UserError(f"cannot resume {run_dir} in another pack: it was trained with {names}")


def adam(params: list[nn.Parameter], config: TrainConfig, device: torch.device) -> torch.optim.Adam:
    """The run's Adam; ``capturable`` (its step counts on the device) when the step is captured
    as a CUDA graph, which replays no host arithmetic."""
    capturable = config.cuda_graph and device.type == "cuda"
    return torch.optim.Adam(
        params, lr=config.lr, weight_decay=config.weight_decay, capturable=capturable
    )


def check_policy_glimpses(config: TrainConfig, source: object = None) -> None:
    """Refuse a policy run of one glimpse (``T = 1`` from a config file): nothing would move,
    so nothing of the policy would learn; one glimpse is the one-view model's pretraining.

    Args:
        config: the run's config.
        source: the config file it was read from (named in the error), or None.

    Raises:
        UserError: one line.
    """
    if config.T < 2:
        where = "" if source is None else f"config file {source}: "
        raise UserError(
            f"{where}T is {config.T}: a policy run needs at least 2 glimpses (the one-view model "
            "of one glimpse is trained by `pyskick pretrain`)"
        )


def check_device_request(config: TrainConfig) -> None:
    """The checks of a run that need neither model nor data: the seed's range, the device, and
    what ``cuda_graph`` and ``compile`` need there. ``pyskick reproduce`` makes them before it
    writes its folder's settings.

    Raises:
        UserError: one line naming the value.
    """
    if not 0 <= config.seed <= MAX_SEED:
        raise UserError(f"seed {config.seed} is out of range (0 to {MAX_SEED})")
    device = resolve_device(config.device)
    if config.cuda_graph and device.type != "cuda":
        raise UserError(f"cuda_graph needs a CUDA device; this run's device is {device.type}")
    if config.compile:
        check_compile(device)


def check_request(config: TrainConfig, data: TrainData) -> None:
    """The checks of a run that need no model, cheap enough to make before any other work:
    :func:`check_device_request`'s, and the batch size against the training split.

    Raises:
        UserError: one line naming the value.
    """
    check_device_request(config)
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
    init_state(init, config, data, model_config_for(config, data), "cpu")


def init_state(
    init: str | os.PathLike[str],
    config: TrainConfig,
    data: TrainData,
    model_config: ModelConfig,
    map_location: str | torch.device,
) -> dict[str, Any]:
    """The checkpoint state of ``init``, checked to be a one-view model of the run's
    architecture."""
    path, state = load_run(init, map_location=map_location, keys=POLICY_KEYS)
    check_one_view(path, state, "init")
    saved = ModelConfig.from_dict(state["model_config"])
    if saved != model_config:
        fix = _init_fix(saved, data)
        raise UserError(
            f"{path} holds a model of another architecture or data shape than this run "
            f"(model preset {config.model!r}, grids {list(data.grid_shape)}){fix}"
        )
    return state


def _init_fix(saved: ModelConfig, data: TrainData) -> str:
    """What makes a run fit an ``init`` model: the training preset (or ``model``) whose
    architecture it has on this data, or that its viewgrids are another shape."""
    from pyskick.config import TRAIN_PRESETS
    from pyskick.models.config import PRESETS

    N, M, C, H = data.grid_shape
    if saved.grid_shape != (N, M, C, H, H):
        return f": it was trained on viewgrids {list(saved.grid_shape)}, so use data of that shape"
    for name in PRESETS:
        if model_config_for(TrainConfig(model=name), data) == saved:
            presets = [p for p, c in TRAIN_PRESETS.items() if c.model == name]
            given = f"--preset {presets[0]}" if presets else f"model = {name!r} in --config"
            return f": it is a {name!r} model; train with {given}, whose model it is"
    return ": its architecture is no model preset; train with the config it was trained with"


def model_config_for(config: TrainConfig, data: TrainData) -> ModelConfig:
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


def options_the_run_predates(recorded: dict[str, Any], config: TrainConfig) -> dict[str, Any]:
    """A run resumed with a sidekick object: the options its record predates (the sidekick
    gained them since) take the object's values, as :func:`~pyskick.sidekicks.for_run` gives
    them their defaults when the run rebuilds its own sidekick; the options both have must
    agree.

    Args:
        recorded: what the run recorded (a checkpoint, or ``{"config": ...}``).
        config: the requested config, ``sidekick`` and ``sidekick_options`` the object's.

    Returns:
        ``recorded``, or a copy whose config holds the merged options.

    Raises:
        UserError: an option both have differs (naming both values).
    """
    saved = recorded.get("config") or {}
    if "sidekick_options" not in saved or saved.get("sidekick") != config.sidekick:
        return recorded  # an older record, or another sidekick: resumed_config refuses
    kept = dict(saved["sidekick_options"])
    for key, value in config.sidekick_options.items():
        if key in kept and kept[key] != value:
            raise UserError(
                f"cannot resume: sidekick {config.sidekick!r} option {key} is {value!r} but the "
                f"run used {kept[key]!r}"
            )
    merged = {**config.sidekick_options, **kept}
    return {**recorded, "config": {**saved, "sidekick_options": merged}}


def resumed_config(
    state: dict[str, Any], config: TrainConfig, stage: str, inherited: tuple[str, ...] = ()
) -> TrainConfig:
    """The saved config with only the resumable fields taken from ``config``: the stage's
    epoch count (``pretrain_epochs`` for a pretraining, ``epochs`` for a policy run) and the
    runtime fields. The other count is the saved one, whatever ``config`` says (a policy
    run's ``pretrain_epochs`` records how its one-view model was pretrained: a resume's
    command-line default must not rewrite it), as are ``inherited`` fields."""
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
    taken = ("pretrain_epochs" if stage == "pretrain" else "epochs", *RUNTIME_FIELDS)
    return saved.replace(**{name: getattr(config, name) for name in taken})
