"""Training configuration: one frozen dataclass, named presets, TOML and override loading.

The resolved config is a plain dict (:meth:`TrainConfig.to_dict`) saved as ``config.json`` in the
run folder and inside every checkpoint, so a run can always be rebuilt from what it wrote.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, get_args

from pyskick.envs.lookaround import START_ZEROING, StartZeroing
from pyskick.errors import UserError, UserFileNotFoundError, UserTypeError
from pyskick.metrics import DEFAULT_METRIC, METRICS
from pyskick.models import PRESETS as MODEL_PRESETS
from pyskick.models.packed import PACKED_CONVS, PackedConvs

DeviceName = Literal["auto", "cpu", "cuda"]
FrozenBatchNormName = Literal["train", "eval"]
DataOnDevice = Literal["auto", "on", "off"]
Precision = Literal["fp32", "bf16"]

_CHOICES: dict[str, tuple[str, ...]] = {
    "device": get_args(DeviceName),
    "data_on_device": get_args(DataOnDevice),
    "precision": get_args(Precision),
    "frozen_batchnorm": get_args(FrozenBatchNormName),
    "val_metric": tuple(METRICS),
    "start_zeroing": START_ZEROING,
    "packed_convs": PACKED_CONVS,
}
_POSITIVE_INTS = ("T", "epochs", "pretrain_epochs", "batch_size", "save_every")
# Names resolved in the plugin registry when a run starts (plugins may add more).
_REGISTERED_NAMES = ("critic", "actor", "sidekick")
TRAIN_ONLY_FIELDS = (
    "T",
    "epochs",
    "critic",
    "critic_coeff",
    "critic_residual",
    "critic_gate",
    "actor",
    "lambda_entropy",
    "reward_scale",
    "supervised_scale",
    "sidekick",
    "sidekick_options",
    "fix_decode",
    "frozen_batchnorm",
    "reward_radius",
    "start_zeroing",
    "eval_batch_size",
)
"""Fields that only matter after pretraining: the one-view cache keys a pretraining by the
others (their defaults in the cached run), and a resumed pretraining ignores them."""
RUNTIME_FIELDS = (
    "device",
    "data_on_device",
    "eval_batch_size",
    "save_every",
    "cuda_graph",
    "channels_last",
    "compile",
    "decode_once",
    "cudnn_benchmark",
    "packed_convs",
)
"""Fields that change where and how fast a run computes, never its results: a resumed run may
change them, and results recorded by ``reproduce`` do not depend on them."""
# A config is a few lines of TOML: anything larger is the wrong file (never read into memory).
MAX_CONFIG_BYTES = 1 << 20
# Fields of older configs that moved; from_dict drops them from configs that predate the move.
_MOVED = {"hybrid_schedule": "the demonstrating sidekicks' option hybrid_schedule"}
_NON_NEGATIVE_INTS = ("seed", "reward_radius")
_POSITIVE_FLOATS = ("lr", "grad_clip")
_NON_NEGATIVE_FLOATS = (
    "weight_decay",
    "lambda_entropy",
    "critic_coeff",
    "reward_scale",
    "supervised_scale",
)
_BOOLS = (
    "memorize",
    "fix_decode",
    "deterministic",
    "critic_residual",
    "critic_gate",
    "cuda_graph",
    "channels_last",
    "compile",
    "decode_once",
    "cudnn_benchmark",
)


@dataclass(frozen=True)
class TrainConfig:
    """Everything that decides a pretraining or training run.

    The defaults are the paper's (docs/paper-reference.md §4 and §9).

    Shapes of the viewgrids (N, M, C, view size) are not here: they come from the data.
    """

    model: str = "paper-sun360"
    """Model preset name (:data:`pyskick.models.PRESETS`); N, M, C and the view size are
    replaced by the data's."""
    T: int = 4
    """Glimpse budget of an episode (``-T/--glimpses``); pretraining always uses T = 1."""
    epochs: int = 1000
    """Epochs of policy training (:func:`~pyskick.training.train`)."""
    pretrain_epochs: int = 100
    """Epochs of one-view pretraining (:func:`~pyskick.training.pretrain`; README: 100)."""
    batch_size: int = 32
    """Global batch (viewgrids per optimiser step), split evenly across distributed ranks."""
    lr: float = 1e-4
    """Adam learning rate (constant: the authors use no schedule)."""
    weight_decay: float = 1e-6
    """Adam weight decay."""
    grad_clip: float = 10.0
    """Maximum total L2 norm of the gradients of the trainable parameters."""
    lambda_entropy: float = 1e-4
    """Weight of the entropy bonus on policy-gradient steps."""
    critic: str = "average"
    """A registered critic: "average" (running means), "critic" (learned, partial
    observability) or "asymm-critic" (learned, sees the whole grid: the asymm-ac baseline)."""
    critic_coeff: float = 1e-2
    """Weight of the learned critic's squared-error loss."""
    critic_residual: bool = True
    """A learned critic predicts the return minus the average baseline (it starts as the
    average baseline and learns what the state adds); False: it predicts the return itself,
    its output calibrated to the first batch's mean return (docs/deviations.md K6)."""
    critic_gate: bool = True
    """With ``critic_residual``: the advantages subtract the critic's output times its
    control-variate weight (``E[(R - B) v] / E[v^2]`` over the previous batches, clamped to
    [0, 1]; :class:`~pyskick.training.baselines.ControlVariate`), so a critic that does not yet
    explain the returns adds no noise; False: the whole output."""
    actor: str = "learned"
    """A registered actor: "learned" (the act head chooses), "random" (uniform actions:
    rnd-actions; only the reconstruction trains) or "demo-actions" (the demo sidekick's greedy
    coverage trajectories, also at test time)."""
    reward_scale: float = 1.0
    """Multiplier of the policy-gradient term (``--reward_scale``)."""
    supervised_scale: float = 1e-3
    """Weight of the NLL of a demonstrating sidekick's actions (``--supervised_scale``)."""
    sidekick: str = "none"
    """A registered sidekick: "none" (ltla), "rew" (ours(rew)), "demo" (ours(demo)) or a
    plugin's (``--sidekick``)."""
    sidekick_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """The sidekick's options (``--sidekick-option KEY=VALUE``, the ``[sidekick]`` TOML
    table): what was given before the run starts, every declared option with its default
    resolved once the run started (:mod:`pyskick.options`)."""
    memorize: bool = False
    """Paste observed views into the reconstruction during training too (evaluation always
    pastes)."""
    fix_decode: bool = False
    """Freeze the decoder too when training from a one-view model (``--fix_decode``)."""
    frozen_batchnorm: FrozenBatchNormName = "train"
    """BatchNorm of frozen modules: "train" keeps updating running statistics (the authors'
    behaviour, the default), "eval" fixes them."""
    val_metric: str = DEFAULT_METRIC
    """Validation metric (:data:`pyskick.metrics.METRICS`): "avg" (every other elevation and
    azimuth, mean over starts) or "adv" (all starts, max)."""
    eval_batch_size: int | Literal["auto"] = "auto"
    """Episodes per forward pass in validation and evaluation (memory and speed only; no
    effect on results); ``"auto"``: 256 on the CPU, sized to the free memory on a GPU
    (:func:`pyskick.evaluation.evaluate.auto_eval_batch_size`)."""
    reward_radius: int = 1
    """Chebyshev radius zeroed in a sidekick's reward map around each visited view."""
    start_zeroing: StartZeroing = "view"
    """What a sidekick's reward map loses at reset, the start view being seen: "view" (the
    start view only), "neighbourhood" (its reward-radius neighbourhood, like any visit) or
    "none" (nothing; the authors' rule). See docs/deviations.md E1."""
    seed: int = 123
    """Seed of the model initialisation, the shuffles, the starts and the action sampling."""
    deterministic: bool = False
    """Ask torch for deterministic algorithms (slower on GPU; CPU runs are deterministic
    anyway)."""
    device: DeviceName = "auto"
    """"auto" (CUDA when available), "cpu" or "cuda"."""
    data_on_device: DataOnDevice = "auto"
    """Keep the training and validation viewgrids on the device ("on"), or on the host,
    copying each batch ("off"); "auto": on when they fit in a quarter of the device's free
    memory. The CPU's data is always where it computes (docs/training.md, "Device data")."""
    save_every: int = 1
    """Write ``latest.pt`` every this many epochs (and after the last); ``best.pt`` is written
    with it when validation improved since. A killed run repeats the epochs after its last
    checkpoint."""
    precision: Precision = "fp32"
    """Arithmetic of the training steps: "fp32", or "bf16" (autocast: matrix products and
    convolutions in bfloat16, losses, normalisations and the optimizer in float32; the
    weights stay float32). Validation and evaluation compute in float32."""
    cuda_graph: bool = False
    """Capture the training step as one CUDA graph per epoch and replay it for every batch
    (CUDA only, one process; a pack's step too): the host launches one graph instead of
    ~1,200 kernels a step.
    Same arithmetic as the eager step, to float rounding (docs/training.md, "CUDA graphs")."""
    channels_last: bool = False
    """Keep the convolutions' weights, and so their activations, channels-last (NHWC), the
    layout cuDNN's tensor-core convolutions compute in, instead of transforming every
    convolution's input and output to it and back (docs/training.md, "Channels-last").
    Same arithmetic to float rounding; off: it did not pay on the CPU, nor on an H200 (0.85x
    for a pack of 15)."""
    compile: bool = False
    """Compile the training step's networks (the policy, and a learned critic) with
    ``torch.compile`` (inductor): fewer, fused kernels in their forward and backward passes,
    inside a CUDA graph too (docs/training.md, "Compiled networks"). Validation and evaluation
    run them uncompiled. Same arithmetic to float rounding; off by default (on the CPU it is
    slower; on an H200, in a CUDA graph, 1.07-1.18x faster)."""
    decode_once: bool = False
    """Decode an episode's T glimpses in one batch of ``T * B`` at its last glimpse, instead of
    one batch of B per glimpse: the decoder's layers after its BatchNorm launch a T-th of their
    kernels, each on T times the samples (docs/training.md, "Decoding once"). Each glimpse's
    BatchNorm statistics stay its own. Same arithmetic to float rounding; off by default (on the
    CPU 0.99-1.08x; on an H200, in a CUDA graph, 1.10-1.34x faster)."""
    cudnn_benchmark: bool = False
    """Turn cuDNN's autotuner on (``torch.backends.cudnn.benchmark``): each convolution shape
    times cuDNN's algorithms at its first call in the process and keeps the fastest, instead of
    the one its heuristics pick (docs/training.md, "cuDNN's autotuner"). It is a setting of
    the process, left on for the rest of it; ``False`` leaves the process's setting alone. No
    effect on the CPU. Same arithmetic to float rounding; excludes ``deterministic``; off by
    default (on an H200, in a CUDA graph, 1.04-1.44x faster)."""
    packed_convs: PackedConvs = "auto"
    """How a pack computes its convolutions and transposed convolutions: "grouped" (one grouped
    call per layer for all its runs), "per-run" (one call per run, on its slice of the
    channels), or "auto": run by run on the CPU, where oneDNN's grouped ones take slow paths,
    grouped on a GPU (docs/training.md, "Packed runs"). No effect on a run alone. Same
    arithmetic to float rounding; runs of a pack must agree."""

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or self.model not in MODEL_PRESETS:
            raise UserError(
                f"TrainConfig.model must be one of {', '.join(MODEL_PRESETS)}, got {self.model!r}"
            )
        for name, choices in _CHOICES.items():
            value = getattr(self, name)
            if value not in choices:
                raise UserError(
                    f"TrainConfig.{name} must be one of {', '.join(choices)}, got {value!r}"
                )
        batch = self.eval_batch_size
        if batch != "auto" and (isinstance(batch, bool) or not isinstance(batch, int)):
            raise UserTypeError(
                f"TrainConfig.eval_batch_size must be an int or 'auto', got {batch!r}"
            )
        if batch != "auto" and batch < 1:
            raise UserError(f"TrainConfig.eval_batch_size must be positive, got {batch}")
        for name in _REGISTERED_NAMES:
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise UserError(f"TrainConfig.{name} must be a registered name, got {value!r}")
        for name in _POSITIVE_INTS + _NON_NEGATIVE_INTS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise UserTypeError(f"TrainConfig.{name} must be an int, got {value!r}")
            if value < (1 if name in _POSITIVE_INTS else 0):
                kind = "positive" if name in _POSITIVE_INTS else ">= 0"
                raise UserError(f"TrainConfig.{name} must be {kind}, got {value}")
        for name in _POSITIVE_FLOATS + _NON_NEGATIVE_FLOATS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise UserTypeError(f"TrainConfig.{name} must be a number, got {value!r}")
            if not value == value or value in (float("inf"), float("-inf")):
                raise UserError(f"TrainConfig.{name} must be finite, got {value}")
            if value < 0 or (name in _POSITIVE_FLOATS and value == 0):
                kind = "positive" if name in _POSITIVE_FLOATS else ">= 0"
                raise UserError(f"TrainConfig.{name} must be {kind}, got {value}")
        for name in _BOOLS:
            if not isinstance(getattr(self, name), bool):
                raise UserTypeError(
                    f"TrainConfig.{name} must be a bool, got {getattr(self, name)!r}"
                )
        if self.cudnn_benchmark and self.deterministic:
            raise UserError(
                "TrainConfig.cudnn_benchmark and deterministic exclude each other: the "
                "autotuner picks cuDNN's algorithms by timing them"
            )
        options = self.sidekick_options
        if not isinstance(options, Mapping) or not all(
            isinstance(key, str) and isinstance(value, int | float | bool | str)
            for key, value in options.items()
        ):
            raise UserTypeError(
                "TrainConfig.sidekick_options must map option names to int, float, bool or "
                f"str values, got {options!r}"
            )
        # A private copy: the frozen config must not change with the caller's dict.
        object.__setattr__(self, "sidekick_options", dict(options))

    # ---- plain-type round trip -----------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of str, int, float and bool, and the sidekick options as a dict of those
        (JSON, TOML and checkpoint safe)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["sidekick_options"] = dict(self.sidekick_options)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainConfig:
        """Build a config from :meth:`to_dict`'s output; missing keys take the defaults.

        Raises:
            ValueError: an unknown key, or a value the config rejects.
            TypeError: a value of the wrong type.
        """
        if not isinstance(data, Mapping):
            raise UserTypeError(f"TrainConfig.from_dict needs a mapping, got {type(data).__name__}")
        names = [f.name for f in dataclasses.fields(cls)]
        if "sidekick_options" not in data:
            # Written before the sidekick options existed: drop the fields that moved there,
            # and keep the start rule of that time.
            data = {key: value for key, value in data.items() if key not in _MOVED}
            data.setdefault("start_zeroing", "neighbourhood")
        moved = sorted(set(data) & set(_MOVED))
        if moved:
            raise UserError(f"TrainConfig.{moved[0]} is now {_MOVED[moved[0]]}")
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise UserError(
                f"TrainConfig got unknown keys {', '.join(unknown)}; valid keys: {', '.join(names)}"
            )
        # An integer where a float is expected (lr = 1 in TOML) is fine; the reverse is not.
        floats = set(_POSITIVE_FLOATS + _NON_NEGATIVE_FLOATS)
        kwargs: dict[str, Any] = {
            key: float(value)
            if key in floats and isinstance(value, int) and not isinstance(value, bool)
            else value
            for key, value in data.items()
        }
        return cls(**kwargs)

    def replace(self, **changes: Any) -> TrainConfig:
        """A copy with ``changes`` applied (validated like :meth:`from_dict`)."""
        return TrainConfig.from_dict({**self.to_dict(), **changes})


TRAIN_PRESETS: Mapping[str, TrainConfig] = MappingProxyType(
    {
        "paper-sun360": TrainConfig(model="paper-sun360"),
        "paper-modelnet": TrainConfig(model="paper-modelnet"),
        # Small model, a few epochs: minutes on 2 CPU cores for a few hundred viewgrids.
        "cpu-demo": TrainConfig(
            model="cpu-demo",
            epochs=3,
            pretrain_epochs=3,
            lr=1e-3,
            eval_batch_size=64,
        ),
    }
)
"""Named training configs (read-only). Every preset runs on ``device="auto"`` (CUDA when
there is one, else the CPU; a run records what it used in ``config.json`` as ``device_used``),
so the README's flow uses a GPU where there is one. ``cpu-demo`` raises the learning rate to
1e-3 so a few epochs visibly learn and evaluates 64 episodes per pass: their tensors stay
under glibc's largest mmap threshold (32 MB), which made evaluation 1.6x faster on 2 cores than
256 (same results). The sidekicks' schedules scale with the run's epochs
(:mod:`pyskick.sidekicks.defaults`)."""


def paper_preset(grid_preset: str) -> str:
    """The paper's training preset for data of grid preset ``grid_preset``:
    ``paper-modelnet`` for ``modelnet-hard``, ``paper-sun360`` for any other (the default
    preset of ``train``, ``score`` and ``reproduce`` on that data)."""
    return "paper-modelnet" if grid_preset == "modelnet-hard" else "paper-sun360"


def train_preset(name: str) -> TrainConfig:
    """The :class:`TrainConfig` registered as ``name`` in :data:`TRAIN_PRESETS`.

    Raises:
        ValueError: unknown name; the message lists the valid ones.
    """
    try:
        return TRAIN_PRESETS[name]
    except KeyError:
        raise UserError(
            f"unknown training preset {name!r}; valid presets: {', '.join(TRAIN_PRESETS)}"
        ) from None


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    preset: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    default_preset: str = "paper-sun360",
) -> TrainConfig:
    """Resolve a config: preset, then a TOML file's keys, then ``overrides``.

    The TOML file is flat (``T = 4``, ``critic = "critic"``) and may name its own base with
    ``preset = "cpu-demo"``; an explicit ``preset`` argument wins over it. One table is
    allowed, ``[sidekick]``: its ``name`` key is the sidekick and the other keys are its
    options (``decay_every = 2``); given both ways, a top-level ``sidekick`` key must agree
    with ``name``. Options in ``overrides["sidekick_options"]`` are added to the file's
    (command-line options win).

    Args:
        path: TOML file, or None.
        preset: base preset name; wins over the TOML file's ``preset`` key.
        default_preset: the base when neither ``preset`` nor the file names one.
        overrides: final field values (e.g. from command-line flags); None values are ignored.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: unreadable TOML, unknown keys or invalid values (one line naming the field).
    """
    values: dict[str, Any] = {}
    if path is not None:
        values = _read_toml(Path(path))
    base_name = values.pop("preset", None) if preset is None else preset
    try:
        base = _preset_named(base_name, default_preset)
    except (ValueError, TypeError) as exc:
        raise _from_file(path, exc) if preset is None else exc from None
    in_file = {key: value for key, value in values.items() if key != "preset"}
    if in_file and not _valid(base, in_file):
        # A value the file holds that is bad on its own (a wrong type, out of range) is an
        # error even where the command line gives the field too; values that only contradict
        # each other are left to the merge below, which the command line may settle.
        for key, value in in_file.items():
            try:
                base.replace(**{key: value})
            except (ValueError, TypeError) as exc:
                raise _from_file(path, exc) from None
    given = {key: value for key, value in (overrides or {}).items() if value is not None}
    given_options = given.pop("sidekick_options", {})
    options = {**values.get("sidekick_options", {}), **given_options}
    values.update(given)
    if options:
        values["sidekick_options"] = options
    values.pop("preset", None)
    try:
        return base.replace(**values) if values else base
    except (ValueError, TypeError) as exc:
        # Name the file when the overrides alone are fine: the file holds the bad value, or,
        # where the file alone is fine too, the two contradict each other.
        alone = {**given, **({"sidekick_options": given_options} if given_options else {})}
        if path is None or not _valid(base, alone):
            raise
        both = bool(alone) and _valid(base, in_file)
        raise _from_file(path, exc, with_overrides=both) from None


def _preset_named(name: object, default: str) -> TrainConfig:
    """The preset ``name`` (``default`` when None)."""
    if name is not None and not isinstance(name, str):
        raise UserTypeError(f"preset must be a string, got {name!r}")
    return train_preset(name or default)


def _valid(base: TrainConfig, changes: Mapping[str, Any]) -> bool:
    """Whether ``base`` accepts ``changes``."""
    try:
        base.replace(**changes)
    except (ValueError, TypeError):
        return False
    return True


def _from_file(
    path: str | os.PathLike[str] | None, exc: Exception, *, with_overrides: bool = False
) -> Exception:
    """``exc`` (a ValueError or TypeError) with the config file's name in front, and
    ``with_overrides``, that the command line's values contradict it."""
    if path is None:
        return exc
    kind = UserTypeError if isinstance(exc, TypeError) else UserError
    together = " and the command line's options together" if with_overrides else ""
    return kind(f"config file {path}{together}: {exc}")


def config_sidekick_table(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The options set in a config file's ``[sidekick]`` table (its ``name`` left out), as
    typed in the file; empty when it has none.

    Raises:
        FileNotFoundError, ValueError: as :func:`load_config`.
    """
    return dict(_read_toml(Path(path)).get("sidekick_options", {}))


def config_preset(path: str | os.PathLike[str]) -> str | None:
    """The ``preset`` a config file names (None if it names none).

    Raises:
        FileNotFoundError, ValueError: as :func:`load_config`.
    """
    value = _read_toml(Path(path)).get("preset")
    if value is not None and not isinstance(value, str):
        raise UserTypeError(f"config file {path}: preset must be a string, got {value!r}")
    return value


def _read_toml(path: Path) -> dict[str, Any]:
    """A config file's keys, its ``[sidekick]`` table turned into ``sidekick`` and
    ``sidekick_options``.

    Raises:
        FileNotFoundError: no such file.
        ValueError: one line naming the file: a folder or special file, unreadable, too large,
            not UTF-8 text, not TOML, or not shaped like a config.
    """
    if not path.exists():
        raise UserFileNotFoundError(f"config file {path} does not exist")
    if path.is_dir():
        raise UserError(f"config file {path} is a directory, not a TOML file")
    if not path.is_file():  # a FIFO or device would block or never end
        raise UserError(f"config file {path} is not a regular file")
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise UserError(
                f"config file {path} is too large for a config ({size} bytes; at most "
                f"{MAX_CONFIG_BYTES}): is it the right file?"
            )
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"config file {path} cannot be read: {exc.strerror or exc}") from None
    try:
        # TOML is UTF-8 whatever the locale; a byte-order mark (some editors write one) is fine.
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"config file {path} is not a UTF-8 text file (byte 0x{data[exc.start]:02x} at "
            f"offset {exc.start}): a TOML config is expected"
        ) from None
    try:
        values = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"config file {path} is not valid TOML: {exc}") from None
    if "sidekick_options" in values:
        raise UserError(
            f"config file {path}: set sidekick options as keys of a [sidekick] table, "
            "not as sidekick_options"
        )
    table = values.pop("sidekick", None) if isinstance(values.get("sidekick"), dict) else None
    nested = sorted(key for key, value in values.items() if isinstance(value, dict))
    if nested:
        raise UserError(
            f"config file {path} must be flat apart from a [sidekick] table; got tables "
            f"{', '.join(nested)}"
        )
    if table is not None:
        options = dict(table)
        name = options.pop("name", None)
        if name is not None:
            values["sidekick"] = name
        values["sidekick_options"] = options
    return values
