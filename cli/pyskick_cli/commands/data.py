"""``pyskick data``: make, convert, inspect and preview viewgrid datasets."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from pyskick_cli.outputs import check_not_in_input_folder, check_outputs, overwrite_option
from pyskick_cli.shared_options import (
    json_option,
    resolve_dataset_path,
    seed_option,
    split_option,
    view_size_option,
)

F = TypeVar("F", bound=Callable[..., Any])

if TYPE_CHECKING:
    from pyskick.data.hdf5_read import ViewgridSplit


@click.group()
def data() -> None:
    """Make, convert, inspect and preview viewgrid datasets (HDF5)."""


# The most viewgrids `data make` generates (~100 GB of SUN360-like grids, all held in memory).
MAX_NUM = 1_000_000


@data.command()
@click.argument("name")
@click.option(
    "--out", required=True, type=click.Path(dir_okay=False, path_type=Path), help="Output .h5 file."
)
@click.option(
    "--num",
    type=click.IntRange(min=3, max=MAX_NUM),
    default=None,
    help=f"Number of viewgrids, 3 to {MAX_NUM} (synthetic-objects: 4 or more; default: the "
    "dataset's).",
)
@seed_option(help="Generator seed, 0 to 2^32-1 (default: the dataset's).")
@view_size_option()
@overwrite_option
def make(
    name: str, out: Path, num: int | None, seed: int | None, view_size: int | None, overwrite: bool
) -> None:
    """Generate the built-in dataset NAME (e.g. synthetic-scenes) into --out."""
    import time

    from pyskick.data.builtin import check_builtin_name, make_builtin

    check_builtin_name(name)
    if view_size is not None and name != "synthetic-scenes":
        raise click.BadParameter(
            f"only synthetic-scenes takes a view size, not {name}", param_hint="--view-size"
        )
    check_outputs([out], overwrite=overwrite)
    start = time.perf_counter()
    path = make_builtin(name, out, num, seed, view_size)
    click.echo(f"wrote {path} in {time.perf_counter() - start:.1f} s", err=True)


def _conversion_options(split_help: str, strict_help: str) -> Callable[[F], F]:
    """The options every converter shares: FOLDER, --out, --split-fractions, --seed, --strict."""

    def decorate(f: F) -> F:
        options = [
            click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path)),
            click.option(
                "--out",
                required=True,
                type=click.Path(dir_okay=False, path_type=Path),
                help="Output .h5 file.",
            ),
            click.option(
                "--split-fractions",
                "split_text",
                default="0.7,0.15,0.15",
                show_default=True,
                metavar="TRAIN,VAL,TEST",
                help=split_help,
            ),
            seed_option(
                default=0,
                show_default=True,
                help="Seed of the split and of the augmented copies (0 to 2^32-1).",
            ),
            click.option(
                "--strict/--no-strict", default=False, show_default=True, help=strict_help
            ),
            overwrite_option,
        ]
        for option in reversed(options):
            f = option(f)
        return f

    return decorate


def _report_written(path: Path) -> None:
    from pyskick.data.hdf5_read import ViewgridFile

    f = ViewgridFile(path)
    sizes = ", ".join(f"{s} {f.num_samples(s)}" for s in f.splits)
    click.echo(f"wrote {path} ({sizes})", err=True)


# The most augmented copies per training source (each is a full viewgrid held in memory).
MAX_AUGMENT = 1000


def _augment_option(help: str) -> Callable[[F], F]:
    return click.option(
        "--augment",
        type=click.IntRange(min=0, max=MAX_AUGMENT),
        default=0,
        show_default=True,
        metavar="K",
        help=help,
    )


@data.command("from-panoramas")
@_conversion_options(
    "train,val,test fractions.",
    "Fail (exit 2) on any unreadable, unsupported or non-2:1 input instead of skipping it.",
)
@_augment_option(
    "Add K augmented viewgrids per training panorama (random continuous yaw, pitch and roll "
    "within 5 degrees, mirrored half the time); val and test are never augmented."
)
@click.option(
    "--max-pixels",
    type=click.IntRange(min=1),
    default=None,
    help="The largest image to read, in pixels (default 600,000,000: a 32768x16384 stitched "
    "panorama fits); a larger one is skipped, or refused with --strict, before it is decoded.",
)
def from_panoramas(
    folder: Path,
    out: Path,
    split_text: str,
    seed: int,
    strict: bool,
    overwrite: bool,
    augment: int,
    max_pixels: int | None,
) -> None:
    """Convert equirectangular JPG/PNG files and cubemap folders under FOLDER into viewgrids.

    \b
    Accepted images: 8- and 16-bit RGB, grey (L, 16-bit I;16), 1-bit, palette (P) and any of
    them with transparency (composited over black). Other modes (e.g. CMYK) are skipped, or
    refused with --strict.
    """
    from pyskick.data.panoramas import DEFAULT_MAX_PIXELS, convert_panoramas, parse_split

    fractions = parse_split(split_text)
    check_not_in_input_folder([out], folder)
    check_outputs([out], overwrite=overwrite)
    _report_written(
        convert_panoramas(
            folder,
            out,
            split=fractions,
            seed=seed,
            strict=strict,
            augment=augment,
            max_pixels_per_image=DEFAULT_MAX_PIXELS if max_pixels is None else max_pixels,
        )
    )


@data.command("from-meshes")
@_conversion_options(
    "train,val,test fractions of the seen classes.",
    "Fail (exit 2) on any unreadable mesh instead of skipping it.",
)
@click.option(
    "--unseen-classes",
    default="",
    help="Comma-separated classes (folder names) to hold out as the test_unseen split.",
)
@_augment_option(
    "Add K augmented viewgrids per training mesh (the object turned by a random angle about its "
    "up axis, mirrored half the time, lights drawn again); other splits are never augmented."
)
def from_meshes(
    folder: Path,
    out: Path,
    split_text: str,
    seed: int,
    strict: bool,
    overwrite: bool,
    unseen_classes: str,
    augment: int,
) -> None:
    """Render OBJ/OFF meshes under FOLDER (class = top-level folder) as 5x9 grayscale viewgrids."""
    from pyskick.data.mesh_dataset import convert_meshes
    from pyskick.data.panoramas import parse_split

    fractions = parse_split(split_text)
    check_not_in_input_folder([out], folder)
    check_outputs([out], overwrite=overwrite)
    unseen = tuple(c.strip() for c in unseen_classes.split(",") if c.strip())
    _report_written(
        convert_meshes(
            folder,
            out,
            split=fractions,
            seed=seed,
            unseen_classes=unseen,
            strict=strict,
            augment=augment,
        )
    )


def _summary(path: Path) -> dict[str, Any]:
    from pyskick.data.hdf5_read import ViewgridFile

    f = ViewgridFile(path)
    splits = {}
    for name in f.splits:
        ds = f.dataset(name)
        stats = _channel_stats(f.split(name))
        splits[name] = {"shape": list(ds.shape), "dtype": str(ds.dtype), **stats}
    return {
        "path": str(f.path),
        "preset": f.spec.preset,
        "grid": {
            "n_elevations": f.spec.n_elevations,
            "n_azimuths": f.spec.n_azimuths,
            "channels": f.spec.channels,
            "view_size": f.spec.view_size,
            "elevations_deg": list(f.spec.elevations_deg),
            "azimuths_deg": list(f.spec.azimuths_deg),
            "fov_deg": f.spec.fov_deg,
            "channel_mean": list(f.spec.channel_mean),
        },
        "attributes": f.attrs,
        "splits": splits,
    }


def _channel_stats(split: ViewgridSplit) -> dict[str, list[float]]:
    """Per-channel mean, std, min and max over a split, read in chunks."""
    import torch

    c = split.spec.channels
    total = torch.zeros(c, dtype=torch.float64)
    squares = torch.zeros(c, dtype=torch.float64)
    lo = torch.full((c,), 255.0, dtype=torch.float64)
    hi = torch.zeros(c, dtype=torch.float64)
    count = 0
    # Blocks of bounded bytes (each becomes float64, 8x larger), so a split of any size fits.
    for block in split.blocks(max_bytes=8 * 2**20):
        values = block.permute(3, 0, 1, 2, 4, 5).reshape(c, -1).double()
        total += values.sum(1)
        squares += (values * values).sum(1)
        lo = torch.minimum(lo, values.min(1).values)
        hi = torch.maximum(hi, values.max(1).values)
        count += values.shape[1]
    mean = total / count
    std = (squares / count - mean * mean).clamp(min=0).sqrt()
    return {
        "mean": [round(v, 3) for v in mean.tolist()],
        "std": [round(v, 3) for v in std.tolist()],
        "min": [int(v) for v in lo.tolist()],
        "max": [int(v) for v in hi.tolist()],
    }


@data.command()
@click.argument("dataset")
@json_option(help="Print one JSON object instead of text.")
def info(dataset: str, as_json: bool) -> None:
    """Show the splits, shapes, preset, attributes and per-channel statistics of DATASET.

    DATASET: a registered dataset name (see `pyskick plugins --all`) or the path of a viewgrid
    .h5 file.
    """
    report = _summary(resolve_dataset_path(dataset, "DATASET"))
    if as_json:
        # default=str: attributes of unusual HDF5 types are shown, not refused
        click.echo(json.dumps(report, indent=2, sort_keys=True, default=str))
        return
    g = report["grid"]
    click.echo(f"{report['path']}: preset {report['preset']}")
    click.echo(
        f"grid: {g['n_elevations']}x{g['n_azimuths']} views of {g['channels']}x{g['view_size']}x"
        f"{g['view_size']}, fov {g['fov_deg']:g} deg, elevations {g['elevations_deg']}, "
        f"azimuths {g['azimuths_deg']}, channel mean {g['channel_mean']}"
    )
    for name, s in report["splits"].items():
        click.echo(
            f"{name}: shape {tuple(s['shape'])} {s['dtype']}; per channel mean {s['mean']} "
            f"std {s['std']} min {s['min']} max {s['max']}"
        )
    for key, value in sorted(report["attributes"].items()):
        click.echo(f"attr {key}: {value}")


@data.command()
@click.argument("dataset")
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Output .png file.",
)
@split_option(help="Split to show (a name).")
@click.option(
    "--num", type=click.IntRange(min=1), default=4, show_default=True, help="Number of viewgrids."
)
@click.option(
    "--scale",
    type=click.IntRange(min=1, max=16),
    default=2,
    show_default=True,
    help="Pixel upscaling.",
)
@overwrite_option
def preview(dataset: str, out: Path, split: str, num: int, scale: int, overwrite: bool) -> None:
    """Write a contact sheet of a few viewgrids of DATASET, each laid out N rows x M columns.

    DATASET: a registered dataset name (see `pyskick plugins --all`) or the path of a viewgrid
    .h5 file.
    """
    from pyskick.data.preview import check_preview_path, render_preview

    check_preview_path(out)
    check_outputs([out], overwrite=overwrite)
    path = resolve_dataset_path(dataset, "DATASET")
    written = render_preview(path, out, split=split, num=num, scale=scale)
    click.echo(f"wrote {written}", err=True)
