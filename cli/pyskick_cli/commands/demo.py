"""``pyskick demo``: the main job on the embedded default, small enough for a laptop CPU.

It makes a synthetic-scenes dataset, pretrains the one-view model, trains ltla (the learned
look-around policy, no sidekick) and rnd-actions (the same agent moving at random), evaluates
all three with the paper's avg and adv metrics and prints the table. Re-running continues
where it stopped and skips what is finished.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click


def _stage(runs: Path, name: str) -> tuple[Path, bool]:
    run = runs / name
    return run, (run / "latest.pt").exists()


def _row(name: str, results: dict) -> dict:
    row = {"method": name}
    for metric, result in results.items():
        row[metric] = result.to_dict()
    return row


def format_table(rows: list[dict]) -> str:
    """A Markdown table: mean ×1000 ± standard error and % improvement over one-view."""
    lines = [
        "| method | avg ×1000 | avg % better | adv ×1000 | adv % better |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        cells = [row["method"]]
        for metric in ("avg", "adv"):
            r = row[metric]
            cells.append(f"{r['mean_x1000']:.2f} ± {r['stderr_x1000']:.2f}")
            pct = r.get("improvement_pct")
            cells.append("-" if pct is None else f"{pct:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


@click.command()
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("runs/demo"),
    show_default=True,
    help="Folder of the dataset, the runs and the table.",
)
@click.option(
    "--num", type=click.IntRange(min=10), default=1000, show_default=True,
    help="Synthetic scenes to generate (80% train, 10% val, 10% test).",
)  # fmt: skip
@click.option(
    "--pretrain-epochs", type=click.IntRange(min=1), default=8, show_default=True,
    help="Epochs of one-view pretraining.",
)  # fmt: skip
@click.option(
    "--epochs", type=click.IntRange(min=1), default=8, show_default=True,
    help="Epochs of policy training (ltla, rnd-actions).",
)  # fmt: skip
@click.option(
    "--batch-size", type=click.IntRange(min=1), default=32, show_default=True,
    help="Batch size of every stage.",
)  # fmt: skip
@click.option("--seed", type=int, default=123, show_default=True, help="Random seed.")
def demo(
    out: Path, num: int, pretrain_epochs: int, epochs: int, batch_size: int, seed: int
) -> None:
    """Run the main job on synthetic scenes with the cpu-demo preset and print the table."""
    from pyskick.data import ViewgridFile
    from pyskick.data.builtin import make_builtin
    from pyskick.evaluation import evaluate
    from pyskick.training import TrainData, load_config, pretrain, train

    start = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    data_path = out / f"synthetic-scenes-n{num}-s{seed}.h5"
    if not data_path.exists():
        click.echo(f"demo: generating {num} synthetic scenes", err=True)
        make_builtin("synthetic-scenes", data_path, num, seed)
    source = ViewgridFile(data_path)
    data = TrainData.from_file(data_path)
    test = source.split("test").load()
    mean = tuple(source.spec.channel_mean)
    # Runs depend on the data and the batch: other settings get their own folder (more epochs
    # extend the same runs).
    runs_dir = out / f"runs-n{num}-s{seed}-b{batch_size}"
    config = load_config(
        preset="cpu-demo",
        overrides={
            "pretrain_epochs": pretrain_epochs,
            "epochs": epochs,
            "batch_size": batch_size,
            "seed": seed,
        },
    )

    one_view, resume = _stage(runs_dir, "one-view")
    click.echo("demo: pretraining the one-view model", err=True)
    pretrain(config, one_view, data, resume=resume)
    runs = {"one-view": one_view}
    for name, actor in (("rnd-actions", "random"), ("ltla", "learned")):
        run, resume = _stage(runs_dir, name)
        click.echo(f"demo: training {name}", err=True)
        train(config.replace(actor=actor), run, data, init=one_view, resume=resume)
        runs[name] = run

    click.echo("demo: evaluating", err=True)
    rows = []
    baselines: dict = {}
    for name, run in runs.items():
        results = {}
        for metric in ("avg", "adv"):
            results[metric] = evaluate(
                run, test, metric, channel_mean=mean, baseline=baselines.get(metric), seed=seed
            )
        if name == "one-view":
            baselines = results
        rows.append(_row(name, results))
    table = format_table(rows)
    (out / "table.md").write_text(table + "\n")
    (out / "table.json").write_text(json.dumps({"rows": rows, "n_test": len(test)}, indent=2))
    click.echo(table)
    click.echo(
        f"demo: done in {time.perf_counter() - start:.0f} s; table in {out / 'table.md'}",
        err=True,
    )
