"""Options and argument resolution shared by the training and evaluation commands."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

DATASET_HELP = (
    "A registered dataset name (see `pyskick plugins --all`; default synthetic-scenes) or the "
    "path of a viewgrid .h5 file."
)


def resolve_dataset_path(value: str) -> Path:
    """The HDF5 file behind ``--dataset``: an existing path, or a registered name.

    Raises:
        click.BadParameter: neither (exit 2), listing the registered names.
    """
    path = Path(value)
    if path.suffix in (".h5", ".hdf5") or path.exists():
        if not path.is_file():
            raise click.BadParameter(f"dataset file {path} does not exist", param_hint="--dataset")
        return path
    from pyskick.plugins import get_registries
    from pyskick.registry import UnknownNameError

    try:
        entry = get_registries().dataset.get(value)
    except UnknownNameError as exc:
        raise click.BadParameter(str(exc), param_hint="--dataset") from None
    return Path(entry.factory())


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
            default=None,
            help="Training preset: paper-sun360, paper-modelnet or cpu-demo (default: "
            "paper-modelnet for ModelNet-Hard-shaped data, else paper-sun360).",
        ),
        click.option(
            "--config",
            "config_path",
            type=click.Path(dir_okay=False, path_type=Path),
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
