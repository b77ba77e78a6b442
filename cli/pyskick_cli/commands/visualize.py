"""``pyskick visualize``: episode figures, policy heatmaps, learning curves and sidekick maps
of a run."""

from __future__ import annotations

from pathlib import Path

import click

from pyskick_cli.outputs import check_outputs, overwrite_option
from pyskick_cli.shared_options import (
    DATASET_HELP,
    RUN_DATASET_HELP,
    dataset_option,
    device_option,
    one_view_option,
    recorded_init,
    resolve_dataset_path,
    run_dataset,
    seed_option,
    split_option,
)


def _curve_runs(run: Path, curves: tuple[Path, ...]) -> dict[str, Path]:
    """Legend label -> run folder: RUN (when it logged metrics) then every --curves run."""
    from pyskick.viz.curves import METRICS_FILE

    run_dir = run if run.is_dir() else run.parent
    folders = ([run_dir] if (run_dir / METRICS_FILE).is_file() else []) + list(curves)
    names = [folder.resolve().name for folder in folders]
    labels = [
        str(folder) if names.count(name) > 1 else name
        for folder, name in zip(folders, names, strict=True)
    ]
    return dict(zip(labels, folders, strict=True))


def _one_view_run(run: Path, one_view: Path | None, stage: str | None) -> Path:
    """The one-view run the sidekick maps are scored with (one given is checked to be one)."""
    if one_view is not None:
        from pyskick.checkpoint import POLICY_KEYS, check_one_view, load_run

        check_one_view(*load_run(one_view, keys=POLICY_KEYS), "--one-view")
        return one_view
    if stage == "pretrain":
        return run
    init = recorded_init(run if run.is_dir() else run.parent)
    if init is None:
        raise click.BadParameter(
            f"{run} does not record the one-view run it started from; pass --one-view",
            param_hint="--sidekick-maps",
        )
    return init


def _figures(
    out_dir: Path,
    chosen: list[int],
    kinds: list[str],
    *,
    curves: bool,
    animations: tuple[str, ...] = (),
) -> list[Path]:
    """Every figure a call may write: ``example{k}_grid{i}_{kind}.png`` per drawn viewgrid,
    ``example{k}_grid{i}_episode.{gif,mp4}`` per animation format, and ``learning_curves.png``
    with ``curves``."""
    paths = [
        out_dir / f"example{k}_grid{i}_{kind}.png" for k, i in enumerate(chosen) for kind in kinds
    ]
    paths += [
        out_dir / f"example{k}_grid{i}_episode.{fmt}"
        for k, i in enumerate(chosen)
        for fmt in animations
    ]
    return paths + ([out_dir / "learning_curves.png"] if curves else [])


@click.command()
@click.argument("run", type=click.Path(exists=True, path_type=Path))
@dataset_option(default=None, show_default=False, help=DATASET_HELP + RUN_DATASET_HELP)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for the figures (created).",
)
@split_option()
@click.option(
    "--examples", type=click.IntRange(min=1), default=3, show_default=True,
    help="Viewgrids to draw (chosen at random from the split).",
)  # fmt: skip
@seed_option(
    default=0, show_default=True,
    help="Seed of the viewgrids, the start views and the heatmap optimiser (0 to 2^32-1).",
)  # fmt: skip
@click.option("--no-heatmaps", "no_heatmaps", is_flag=True, help="Skip the Eq. 10 policy heatmaps.")
@click.option(
    "--curves",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Another run whose validation curve joins RUN's in learning_curves.png (repeatable).",
)
@click.option(
    "--sidekick-maps",
    "sidekick_maps",
    is_flag=True,
    help="Also draw the reward sidekick's score maps and the demonstration sidekick's coverage "
    "grid of the same viewgrids, scored by the one-view model (RUN itself if it is one, else "
    "the run it started from, or --one-view).",
)
@one_view_option(help="The one-view run (folder or checkpoint) that scores the sidekick maps.")
@click.option(
    "--gif",
    is_flag=True,
    help="Also animate each example episode as exampleK_gridI_episode.gif: one frame per "
    "glimpse with the views seen so far, the reconstruction after it and the move taken.",
)
@click.option(
    "--mp4",
    is_flag=True,
    help="Also write the same animation as exampleK_gridI_episode.mp4 (needs imageio-ffmpeg).",
)
@device_option(
    default="auto", show_default=True, help="Where the models run (auto = CUDA when available)."
)
@overwrite_option
def visualize(
    run: Path,
    dataset: str | None,
    out_dir: Path,
    split: str,
    examples: int,
    seed: int,
    no_heatmaps: bool,
    curves: tuple[Path, ...],
    sidekick_maps: bool,
    one_view: Path | None,
    gif: bool,
    mp4: bool,
    device: str,
    overwrite: bool,
) -> None:
    """Draw figures of RUN (a run folder, using its best.pt, or a checkpoint) on a split.

    \b
    Per example: exampleK_gridI_episode.png (true grid, reconstruction after each glimpse,
    trajectory) and exampleK_gridI_heatmaps.png (Eq. 10 policy heatmaps); learning_curves.png
    (validation error x1000 per epoch); with --sidekick-maps, exampleK_gridI_reward_maps.png
    and exampleK_gridI_coverage.png; with --gif (--mp4), exampleK_gridI_episode.gif (.mp4), the
    episode animated glimpse by glimpse. Figures already in --out are refused unless
    --overwrite.
    """
    from pyskick.data import ViewgridFile
    from pyskick.distributed import resolve_device
    from pyskick.errors import GridShapeError, UserError
    from pyskick.run_dir import load_policy
    from pyskick.sidekicks import nms_preset
    from pyskick.viz import draw_sidekick_maps, plot_learning_curves, visualize_run
    from pyskick.viz.animation import MP4_HINT, check_formats
    from pyskick.viz.curves import read_curve
    from pyskick.viz.run_figures import check_run_grids, choose_examples

    if out_dir.exists() and not out_dir.is_dir():
        raise click.BadParameter(f"{out_dir} exists and is not a folder", param_hint="--out")
    animations = ("gif",) * gif + ("mp4",) * mp4
    try:
        check_formats(animations)
    except ImportError:
        raise click.BadParameter(MP4_HINT, param_hint="--mp4") from None
    source = ViewgridFile(run_dataset(run) if dataset is None else resolve_dataset_path(dataset))
    if split not in source.splits:
        raise click.BadParameter(
            f"split {split!r} is not in {source.path} (splits: {', '.join(source.splits)})",
            param_hint="--split",
        )
    where = str(resolve_device(device))
    saved = load_policy(run, where)
    # Everything is checked before the first figure is written.
    curve_runs = _curve_runs(run, curves)
    for folder in curve_runs.values():
        read_curve(folder, "val/rec_error")
    scorer = _one_view_run(run, one_view, saved.stage) if sidekick_maps else None
    grids = source.split(split).load()
    models = [("RUN", run, saved.policy)]
    if scorer is not None:
        models.append(("the one-view run", scorer, load_policy(scorer, where).policy))
    for role, path, policy in models:
        try:
            check_run_grids(grids, policy)
        except GridShapeError as exc:  # the file, split and model that do not fit
            raise UserError(
                f"{source.path} (split {split!r}) does not fit {role} {path}: {exc}"
            ) from None
    chosen, _ = choose_examples(grids.shape[0], examples, seed, saved.policy.config.n_views)
    kinds = ["episode"] + (["heatmaps"] if not no_heatmaps and saved.T > 1 else [])
    kinds += ["reward_maps", "coverage"] if sidekick_maps else []
    figures = _figures(
        out_dir, chosen.tolist(), kinds, curves=bool(curve_runs), animations=animations
    )
    check_outputs(figures, overwrite=overwrite)
    mean = tuple(source.spec.channel_mean)
    written = visualize_run(
        run,
        grids,
        channel_mean=mean,
        out_dir=out_dir,
        examples=examples,
        seed=seed,
        heatmaps=not no_heatmaps,
        device=where,
        spec=source.spec,
        animations=animations,
    )
    if curve_runs:
        written.append(plot_learning_curves(curve_runs, out_dir / "learning_curves.png"))
    if scorer is not None:
        written += draw_sidekick_maps(
            scorer,
            grids[chosen],
            channel_mean=mean,
            out_dir=out_dir,
            names=[f"example{k}_grid{i}" for k, i in enumerate(chosen.tolist())],
            nms=nms_preset(source.spec.preset),
            device=where,
        )
    for path in written:
        click.echo(str(path))
