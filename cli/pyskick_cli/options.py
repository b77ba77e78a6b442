"""Options and argument resolution shared by the training and evaluation commands."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

# Spelled out so that `--help` does not import torch; a test checks it against TRAIN_PRESETS.
TRAIN_PRESET_NAMES = ("paper-sun360", "paper-modelnet", "cpu-demo")

DATASET_HELP = (
    "A registered dataset name (see `pyskick plugins --all`) or the path of a viewgrid .h5 file."
)


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


def check_run_dataset(run_dir: Path, dataset: Path, *, resume: bool) -> None:
    """Refuse to continue a run on another dataset, or to start one over an existing run.

    Raises:
        click.BadParameter: exit 2, before anything is trained or written.
    """
    from pyskick.run_dir import RunDir

    run = RunDir(run_dir)
    if not resume:
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


def run_dataset(run: Path) -> Path:
    """The data file a run was trained on (from ``RUN/dataset.json``).

    Raises:
        click.BadParameter: the run has no record; ``--dataset`` must be given.
    """
    from pyskick.run_dir import RunDir

    recorded = RunDir(run if run.is_dir() else run.parent).recorded_dataset()
    if recorded is None:
        raise click.BadParameter(
            f"{run} does not record its dataset; pass --dataset", param_hint="--dataset"
        )
    return recorded


def sidekick_option_option(f: F) -> F:
    """``--sidekick-option KEY=VALUE``, repeatable."""
    return click.option(
        "--sidekick-option",
        "sidekick_option",
        multiple=True,
        metavar="KEY=VALUE",
        help="Set an option of the sidekick (repeatable), e.g. decay_every=5; `pyskick plugins "
        "--all` lists each sidekick's options and defaults.",
    )(f)


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


def recorded_sidekick(run_dir: Path) -> str | None:
    """The sidekick a training run recorded in ``config.json`` (None for another folder)."""
    saved = recorded_config(run_dir)
    return saved.get("sidekick") if saved and saved.get("stage") == "train" else None


def resolve_run_options(config: Any, spec: Any, resume_dir: Path | None) -> dict[str, Any]:
    """The sidekick options of a run: resolved for a new run, the recorded ones when resuming
    (``resume_dir``); given options are checked against them.

    Raises:
        click.BadParameter: an unknown option or bad value, or one that differs from what the
            resumed run used (exit 2, before anything is written).
    """
    from pyskick.sidekicks.factory import run_options

    recorded = None
    saved = recorded_config(resume_dir) if resume_dir is not None else None
    if saved is not None and saved.get("stage") == "train":
        if "sidekick_options" not in saved and config.sidekick != "none":
            raise click.BadParameter(
                f"{resume_dir} was started by a pyskick without sidekick options; resume it "
                "with that version",
                param_hint="--resume",
            )
        saved = {"sidekick": "none", "sidekick_options": {}, **saved}
        used = registered("sidekick", saved["sidekick"], "--sidekick").name
        if registered("sidekick", config.sidekick, "--sidekick").name != used:
            raise click.BadParameter(
                f"cannot resume: the run used sidekick {used!r}, not {config.sidekick!r}",
                param_hint="--sidekick",
            )
        recorded = saved["sidekick_options"]
    try:
        return run_options(
            config.sidekick, config.sidekick_options, spec=spec, config=config, recorded=recorded
        )
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--sidekick-option") from None


def dataset_option(f: F) -> F:
    return click.option(
        "--dataset", default="synthetic-scenes", show_default=True, help=DATASET_HELP
    )(f)


def device_option(f: F) -> F:
    return click.option(
        "--device",
        type=click.Choice(["auto", "cpu", "cuda"]),
        default=None,
        help="Where to run (default: the config's, auto = CUDA when available).",
    )(f)


def training_options(f: F) -> F:
    """Options shared by `pretrain` and `train` (each overrides the preset/config value)."""
    options = [
        dataset_option,
        click.option(
            "--preset",
            type=click.Choice(TRAIN_PRESET_NAMES),
            default=None,
            help="Training preset (default: paper-modelnet for ModelNet-Hard-shaped data, else "
            "paper-sun360).",
        ),
        click.option(
            "--config",
            "config_path",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            default=None,
            help="A flat TOML file of TrainConfig fields (applied over the preset).",
        ),
        click.option("--epochs", type=click.IntRange(min=1), default=None, help="Epochs to train."),
        click.option(
            "--batch-size", type=click.IntRange(min=1), default=None, help="Global batch size."
        ),
        click.option(
            "--lr",
            type=click.FloatRange(min=0, min_open=True),
            default=None,
            help="Adam learning rate.",
        ),
        click.option("--seed", type=int, default=None, help="Random seed."),
        device_option,
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
