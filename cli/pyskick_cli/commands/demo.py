"""``pyskick demo``: ``pyskick reproduce`` on the embedded default, sized for a laptop CPU.

It generates a synthetic-scenes dataset into the output folder and runs every Table 1 method
whose plugins are installed, one seed, with the ``cpu-demo`` preset. The defaults take about
12 minutes on 2 CPU cores (docs/reproduce.md has the measured costs). Rerunning continues
where it stopped and skips what is finished.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from pyskick_cli.commands.reproduce import parse_methods, run_table

DATA_SEED = 123


@click.command()
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("runs/demo"),
    show_default=True,
    help="Folder of the dataset, the runs, the table and the report.",
)
@click.option(
    "--num", type=click.IntRange(min=10), default=800, show_default=True,
    help="Synthetic scenes to generate (80% train, 10% val, 10% test).",
)  # fmt: skip
@click.option(
    "--pretrain-epochs", type=click.IntRange(min=1), default=6, show_default=True,
    help="Epochs of one-view pretraining.",
)  # fmt: skip
@click.option(
    "--epochs", type=click.IntRange(min=1), default=4, show_default=True,
    help="Epochs of policy training of every method.",
)  # fmt: skip
@click.option(
    "--batch-size", type=click.IntRange(min=1), default=32, show_default=True,
    help="Batch size of every stage.",
)  # fmt: skip
@click.option(
    "--methods",
    default=None,
    help="Comma-separated Table 1 rows (default: every method whose plugins are installed).",
)
def demo(
    out: Path, num: int, pretrain_epochs: int, epochs: int, batch_size: int, methods: str | None
) -> None:
    """Reproduce Table 1 on synthetic scenes (cpu-demo preset, every installed method) and
    print the table and where the report is."""
    from pyskick.data.builtin import make_builtin
    from pyskick.experiments import available_methods, check_available, select_methods
    from pyskick.experiments.layout import SETTINGS_FILE
    from pyskick.experiments.methods import METHODS
    from pyskick.plugins import get_registries

    started = time.perf_counter()
    data_path = out / f"synthetic-scenes-n{num}-s{DATA_SEED}.h5"
    record = out / SETTINGS_FILE
    if record.is_file():  # refuse before generating data that the folder's runs did not use
        recorded = json.loads(record.read_text()).get("dataset")
        if recorded != str(data_path.resolve()):
            raise ValueError(
                f"{out} holds a demo on {recorded}, not on {num} scenes; "
                "use another --out or the same --num"
            )
    chosen = parse_methods(methods)
    if chosen is None:
        chosen = [m.name for m in available_methods(get_registries())]
        skipped = [m.name for m in METHODS if m.name not in chosen]
        if skipped:
            click.echo(f"demo: skipping {', '.join(skipped)} (plugins not installed)", err=True)
    # An unknown name, or one whose plugin is missing, fails before the data are generated.
    check_available(select_methods(chosen), get_registries())
    if not data_path.exists():
        click.echo(f"demo: generating {num} synthetic scenes", err=True)
        out.mkdir(parents=True, exist_ok=True)
        make_builtin("synthetic-scenes", data_path, num, DATA_SEED)
    run_table(
        data_path, out, methods=chosen, started=started, preset="cpu-demo", epochs=epochs,
        pretrain_epochs=pretrain_epochs, batch_size=batch_size, device="cpu",
    )  # fmt: skip
