"""The options every command shares, each declared once, and the resolution of their values
(datasets, run records, sidekick options)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from pyskick_cli.param_types import EvalBatchSize, RegisteredName

if TYPE_CHECKING:
    from pyskick.run_dir import Dataset

F = TypeVar("F", bound=Callable[..., Any])

# Spelled out so that `--help` does not import torch; a test checks it against TRAIN_PRESETS.
TRAIN_PRESET_NAMES = ("paper-sun360", "paper-modelnet", "cpu-demo")

DATASET_HELP = (
    "A registered dataset name (see `pyskick plugins --all`) or the path of a viewgrid .h5 file."
)
RUN_DATASET_HELP = " Default: the dataset RUN was trained on."


def resolve_dataset_path(value: str, param_hint: str = "--dataset") -> Path:
    """The HDF5 file behind ``--dataset`` (:func:`pyskick.data.resolve_dataset`): a path to a
    file, or a name registered by pyskick or a plugin.

    Raises:
        click.BadParameter: neither (exit 2); an unknown name lists the registered ones.
    """
    from pyskick.data import resolve_dataset

    try:
        return resolve_dataset(value)
    except (FileNotFoundError, ValueError) as exc:
        raise click.BadParameter(str(exc), param_hint=param_hint) from None


def check_run_dataset(run_dir: Path, dataset: Dataset, *, resume: bool) -> None:
    """Refuse to continue a run on another dataset, or to start one over an existing run or
    in a reproduce or export folder.

    Raises:
        click.BadParameter: exit 2, before anything is trained or written.
        UserError: (exit 2) a reproduce or export folder.
    """
    from pyskick.run_dir import RunDir

    run = RunDir(run_dir)
    if not resume:
        run.check_not_other_output()
        if run.has_checkpoint():
            raise click.BadParameter(
                f"{run_dir} already holds a run; add --resume or choose another folder",
                param_hint="--out",
            )
        return
    try:
        run.check_dataset(dataset)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--dataset") from None


def recorded_init(run_dir: Path) -> Path | None:
    """The one-view run a run started from, as recorded in ``RUN/dataset.json``."""
    from pyskick.run_dir import RunDir

    return RunDir(run_dir).recorded_init()


def registered(kind: str, name: str, option: str) -> Any:
    """The registry entry of ``name``; an unknown name is a usage error listing the valid ones."""
    from pyskick.plugins import get_registries
    from pyskick.registry import UnknownNameError

    try:
        return get_registries()[kind].get(name)
    except UnknownNameError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None


def training_dataset(dataset: str | None, out_dir: Path, *, resume: bool) -> str:
    """The dataset ``pretrain`` and ``train`` open: ``--dataset`` when given; else, resuming a
    run that records its dataset, that one (so that a resume never generates the default
    dataset only to refuse it), or the built-in dataset of that file's name where the file is
    gone (a cache folder moved, a run folder copied to another machine; its digest is still
    checked); else :data:`DEFAULT_DATASET`.

    Raises:
        click.BadParameter: the run's recorded data file is not here and is no built-in's
            (``--dataset`` must be given).
    """
    from pyskick.data.builtin import builtin_of_cache_file
    from pyskick.run_dir import RunDir

    if dataset is not None:
        return dataset
    recorded = RunDir(out_dir).recorded_dataset() if resume else None
    if recorded is None:
        return DEFAULT_DATASET
    if not recorded.is_file():
        builtin = builtin_of_cache_file(recorded)
        if builtin is not None:
            return builtin
    return str(run_dataset(out_dir))


def run_dataset(run: Path) -> Path:
    """The data file a run or export folder was trained on (from ``RUN/dataset.json``).

    Raises:
        click.BadParameter: the run has no record, or the recorded file is not here;
            ``--dataset`` must be given.
    """
    from pyskick.run_dir import RunDir

    recorded = RunDir(run if run.is_dir() else run.parent).recorded_dataset()
    if recorded is None:
        raise click.BadParameter(
            f"{run} does not record its dataset; pass --dataset", param_hint="--dataset"
        )
    if not recorded.is_file():  # e.g. an export made on another machine
        raise click.BadParameter(
            f"{run} was trained on {recorded}, which is not here; pass --dataset",
            param_hint="--dataset",
        )
    return recorded


def parse_sidekick_options(values: tuple[str, ...]) -> dict[str, str]:
    """``--sidekick-option`` values as a dict of strings.

    Raises:
        click.BadParameter: an item that is not KEY=VALUE, or a key given twice.
    """
    from pyskick.options import parse_assignments

    try:
        return parse_assignments(values)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--sidekick-option") from None


def recorded_config(run_dir: Path) -> dict[str, Any] | None:
    """The config a run recorded (``RUN/config.json``), or None without one."""
    from pyskick.run_dir import RunDir

    return RunDir(run_dir).recorded_config()


def resolve_sidekick(
    config: Any,
    spec: Any,
    *,
    given_name: bool,
    resume_dir: Path | None = None,
    config_path: Path | None = None,
) -> Any:
    """The run's sidekick (:func:`pyskick.sidekicks.for_run`, the one resolver): a new run's,
    or the one a resumed run (``resume_dir``) recorded, with its options; given options are
    checked against them. ``given_name``: whether the command (or its config file) named the
    sidekick; otherwise a resumed run keeps its own.

    The options of ``config_path``'s ``[sidekick]`` table are checked first, as typed in the
    file (a string is not an int), and an error there names the file, not the command line.

    Raises:
        click.BadParameter: an unknown sidekick, option or value, or one that differs from
            what the resumed run used (exit 2, before any work).
    """
    from pyskick.config import config_sidekick_table
    from pyskick.errors import UserError
    from pyskick.registry import UnknownNameError
    from pyskick.sidekicks import for_run

    recorded = recorded_config(resume_dir) if resume_dir is not None else None
    if recorded is not None and recorded.get("stage") != "train":
        recorded = None  # check_resumable refuses another stage
    table = config_sidekick_table(config_path) if config_path is not None else None
    typed = (f"config file {config_path}, [sidekick] table", table) if table else None
    try:
        return for_run(
            config.sidekick if given_name or recorded is None else None,
            config.sidekick_options,
            spec=spec,
            config=config,
            recorded=recorded,
            typed=typed,
        )
    except UnknownNameError as exc:
        raise click.BadParameter(str(exc), param_hint="--sidekick") from None
    except UserError as exc:
        message = str(exc)
        if typed is not None and message.startswith(typed[0]):
            raise  # the file's own error: exit 2 naming the file
        hint = "--sidekick-option"
        if message.startswith("cannot resume: the run used sidekick"):
            hint = "--sidekick"
        elif message.startswith("the run was started by a pyskick without"):
            hint = "--resume"
        raise click.BadParameter(message, param_hint=hint) from None


# ---- option declarations ----------------------------------------------------------------
# Each option that several commands take is declared once here; `NAME_option(**changes)` is
# its decorator, `changes` being a command's own help or default (never another meaning).


def shared_option(*decls: str, **attrs: Any) -> Callable[..., Callable[[F], F]]:
    """An option declared once: the returned factory makes its decorator, keyword arguments
    overriding the declaration's (e.g. a command's own default or help)."""

    def make(**changes: Any) -> Callable[[F], F]:
        options = {**attrs, **changes}
        if options.get("required"):
            # A required option has no default: since Click 8.3 even default=None would
            # satisfy it (the option then arrives as None).
            options.pop("default", None)
        return click.option(*decls, **options)

    return make


def _seed_in_range(_ctx: click.Context, _param: click.Parameter, value: int | None) -> int | None:
    """Refuse a seed above the one limit every command shares (before any work)."""
    if value is None:
        return None
    from pyskick.training.setup import MAX_SEED  # imports torch: only for a given seed

    if value > MAX_SEED:
        raise click.BadParameter(f"{value} is out of range (0 to {MAX_SEED})")
    return value


def _view_size_ok(_ctx: click.Context, _param: click.Parameter, value: int | None) -> int | None:
    """Refuse a view size the policies cannot take (before anything is generated)."""
    if value is not None and value % 8:
        raise click.BadParameter(f"{value} is not a multiple of 8 (16, 24, 32, ...)")
    return value


DEFAULT_DATASET = "synthetic-scenes"
dataset_option = shared_option(
    "--dataset", default=DEFAULT_DATASET, show_default=True, help=DATASET_HELP
)
preset_option = shared_option(
    "--preset",
    type=click.Choice(TRAIN_PRESET_NAMES),
    default=None,
    help="Training preset (default: paper-modelnet for ModelNet-Hard-shaped data, else "
    "paper-sun360).",
)
config_option = shared_option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A flat TOML file of TrainConfig fields (applied over the preset).",
)
device_option = shared_option(
    "--device",
    type=click.Choice(["auto", "cpu", "cuda"]),
    default=None,
    help="Where to run (default: the config's, auto = CUDA when available).",
)
seed_option = shared_option(
    "--seed",
    type=click.IntRange(min=0),
    callback=_seed_in_range,
    default=None,
    help="Random seed, 0 to 2^32-1.",
)
epochs_option = shared_option(
    "--epochs", type=click.IntRange(min=1), default=None, help="Epochs to train."
)
pretrain_epochs_option = shared_option(
    "--pretrain-epochs", type=click.IntRange(min=1), default=None, help="One-view epochs."
)
batch_size_option = shared_option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=None,
    help="Global training batch size (split over the processes of a torchrun launch).",
)
eval_batch_size_option = shared_option(
    "--eval-batch-size",
    type=EvalBatchSize(),
    default=None,
    help="Episodes per forward pass, or auto: 256 on the CPU, sized to the free memory on a "
    "GPU (memory and speed only; results do not change).",
)
data_on_device_option = shared_option(
    "--data-on-device",
    type=click.Choice(["auto", "on", "off"]),
    default=None,
    help="Keep the viewgrids on the GPU (on), on the host copying each batch (off), or auto: "
    "on when they fit in a quarter of its free memory (default: the config's, auto).",
)
precision_option = shared_option(
    "--precision",
    type=click.Choice(["fp32", "bf16"]),
    default=None,
    help="Arithmetic of the training steps: fp32, or bf16 autocast (matrix products and "
    "convolutions in bfloat16; default: the config's, fp32).",
)
cuda_graph_option = shared_option(
    "--cuda-graph/--no-cuda-graph",
    "cuda_graph",
    default=None,
    help="Replay the training step as a CUDA graph (one per epoch; CUDA, one process): one "
    "launch instead of ~1,200 a step (default: the config's, off).",
)
channels_last_option = shared_option(
    "--channels-last/--no-channels-last",
    "channels_last",
    default=None,
    help="Keep the convolutions channels-last (NHWC), the layout cuDNN's tensor-core "
    "convolutions compute in; same results to float rounding (default: the config's, off).",
)
compile_option = shared_option(
    "--compile/--no-compile",
    "compile",
    default=None,
    help="Compile the training step's networks with torch.compile (inductor): fewer, fused "
    "kernels; same results to float rounding, slower on the CPU (default: the config's, off).",
)
decode_once_option = shared_option(
    "--decode-once/--no-decode-once",
    "decode_once",
    default=None,
    help="Decode an episode's glimpses in one batch at its end instead of one batch per "
    "glimpse: fewer, larger kernels; same results to float rounding (default: the config's, "
    "off).",
)
cudnn_benchmark_option = shared_option(
    "--cudnn-benchmark/--no-cudnn-benchmark",
    "cudnn_benchmark",
    default=None,
    help="Turn cuDNN's autotuner on: each convolution shape times cuDNN's algorithms once and "
    "keeps the fastest; same results to float rounding, no effect on the CPU (default: the "
    "config's, off).",
)
pack_option = shared_option(
    "--pack",
    type=click.Choice(["auto", "on", "off"]),
    default="auto",
    show_default=True,
    help="Train the runs that can share a pack together, as one model (docs/training.md, "
    "'Packed runs'): auto = on a GPU, where it pays; on = also on the CPU; off = one run at a "
    "time.",
)
save_every_option = shared_option(
    "--save-every",
    type=click.IntRange(min=1),
    default=None,
    help="Write latest.pt every N epochs and after the last (default: the config's, 1).",
)
glimpses_option = shared_option(
    "-T",
    "--glimpses",
    "T",
    type=click.IntRange(min=1),
    default=None,
    help="Glimpses per episode (the paper's T; default: the preset's).",
)
split_option = shared_option(
    "--split", default="test", show_default=True, help="Split of the dataset file (a name)."
)
MAX_VIEW_SIZE = 1024  # a grid of 32 such views in 3 channels: 100 MB of uint8
view_size_option = shared_option(
    "--view-size",
    type=click.IntRange(min=16, max=MAX_VIEW_SIZE),
    callback=_view_size_ok,
    default=None,
    help="Side of every view in pixels: a multiple of 8, 16 to 1024 (synthetic-scenes only; "
    "default 32, SUN360's).",
)
one_view_option = shared_option(
    "--one-view",
    "one_view",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="A one-view run (run folder, export folder or checkpoint).",
)


def _registered_name_option(kind: str) -> Callable[..., Callable[[F], F]]:
    """``--KIND NAME``: a name registered for ``kind``, checked against the registry."""
    return shared_option(
        f"--{kind}",
        type=RegisteredName(kind),
        default=None,
        help=f"A registered {kind} (`pyskick plugins --all` describes them).",
    )


sidekick_name_option = _registered_name_option("sidekick")
critic_name_option = _registered_name_option("critic")
actor_name_option = _registered_name_option("actor")
sidekick_option_option = shared_option(
    "--sidekick-option",
    "sidekick_option",
    multiple=True,
    metavar="KEY=VALUE",
    help="Set an option of the sidekick (repeatable), e.g. decay_every=5; `pyskick plugins "
    "--all` lists each sidekick's options and defaults.",
)
methods_option = shared_option(
    "--methods",
    default=None,
    help="Comma-separated Table 1 rows (default: all; one-view is always run), e.g. "
    "'ltla,ours(rew)'; plugins add rows (`pyskick plugins --all` lists them).",
)
seeds_option = shared_option(
    "--seeds",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Training seeds per method: seed k of every method uses the same data order and "
    "starts, so methods are compared paired, seed by seed.",
)
plan_option = shared_option(
    "--plan",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="A power plan (`pyskick plan`) to judge the claims with: a claim with fewer seeds "
    "than the plan says it needs for 90% power is 'not resolved at this budget' (copied into "
    "the folder, which keeps using it).",
)

seed_offset_option = shared_option(
    "--seed-offset",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="The first seed index: seeds K..K+N-1 (more seeds for a claim, into this folder or "
    "another that `pyskick pool` pools with it).",
)
json_option = shared_option(
    "--json", "as_json", is_flag=True, help="Print one JSON object on stdout."
)


logger_option = shared_option(
    "--logger",
    "logger",
    multiple=True,
    metavar="NAME",
    help="Also send the metrics to this registered logger (repeatable): tensorboard or one "
    "a plugin adds (`pyskick plugins --all` lists them); metrics.jsonl is always written. "
    "Default: tensorboard when installed (train --resume: the loggers the run recorded).",
)


def resolve_loggers(given: tuple[str, ...], resume_dir: Path | None = None) -> list[str] | None:
    """The loggers of a run: ``--logger``'s, else those a resumed run recorded in
    ``config.json``, else None (the defaults). Each is built once here, so an unknown name or
    a missing package is refused before anything is written.

    Raises:
        click.BadParameter: an unknown logger or one that cannot be built (exit 2).
    """
    from pyskick.registry import PluginFailure
    from pyskick.training.loggers import make_loggers

    names: list[str] | None = list(given) if given else None
    source = ""
    if names is None and resume_dir is not None:
        saved = recorded_config(resume_dir) or {}
        recorded = saved.get("loggers")
        if isinstance(recorded, list) and all(isinstance(n, str) for n in recorded):
            names, source = recorded, " (recorded by the run; give --logger to choose others)"
    try:
        make_loggers(names)
    except PluginFailure:  # a broken plugin, not the --logger given
        raise
    except (ValueError, RuntimeError) as exc:
        raise click.BadParameter(f"{exc}{source}", param_hint="--logger") from None
    return names


def training_options(f: F) -> F:
    """Options shared by `pretrain` and `train` (each overrides the preset/config value)."""
    options = [
        dataset_option(
            default=None,
            show_default=False,
            help=f"{DATASET_HELP} Default: {DEFAULT_DATASET}; with --resume, the dataset the run "
            "was trained on.",
        ),
        preset_option(),
        config_option(),
        epochs_option(),
        batch_size_option(),
        click.option(
            "--lr",
            type=click.FloatRange(min=0, min_open=True),
            default=None,
            help="Adam learning rate.",
        ),
        seed_option(),
        device_option(),
        data_on_device_option(),
        precision_option(),
        cuda_graph_option(),
        channels_last_option(),
        compile_option(),
        cudnn_benchmark_option(),
        eval_batch_size_option(),
        save_every_option(),
        logger_option(),
        click.option(
            "--out",
            "out_dir",
            required=True,
            type=click.Path(file_okay=False, path_type=Path),
            help="Run folder to create (or to continue with --resume).",
        ),
        click.option(
            "--resume", is_flag=True, help="Continue the run in --out exactly where it stopped."
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f
