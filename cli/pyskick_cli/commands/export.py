"""``pyskick export``: a run as a self-contained model folder to share."""

from __future__ import annotations

from pathlib import Path

import click

from pyskick_cli.shared_options import dataset_option, resolve_dataset_path


@click.command()
@click.argument("run", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(path_type=Path),
    help="The export folder to create (written whole, then renamed into place).",
)
@dataset_option(
    default=None,
    show_default=False,
    help="The data RUN was trained on, if its file has moved since (a registered name or a "
    "path; its SHA-256 must be the one RUN/dataset.json records). Default: the recorded path.",
)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace an export folder that exists at --out (default: refuse, exit 2).",
)
def export(run: Path, out_dir: Path, dataset: str | None, overwrite: bool) -> None:
    """Export RUN's best.pt to a folder that evaluate, visualize, train --init and the
    Gymnasium environment load like a run: model.safetensors (the weights, loaded without
    unpickling), config.json (training config and architecture), dataset.json (the data's
    name, SHA-256, geometry and channel mean), pyskick-export.json (format and provenance) and
    README.md, a model card with the method, data, training command, epochs, seed and the
    run's recorded avg/adv evaluations of these weights.
    """
    from pyskick.experiments.export import export_run

    data = None if dataset is None else resolve_dataset_path(dataset)
    written = export_run(run, out_dir, dataset=data, overwrite=overwrite)
    click.echo(str(written))
