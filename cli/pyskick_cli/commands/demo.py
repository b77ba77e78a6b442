"""``pyskick demo``: ``pyskick reproduce`` on the embedded default, sized for 2 CPU cores.

It generates a synthetic-scenes dataset (16-pixel views) into the output folder and runs, with
the ``cpu-demo`` preset and 18 seeds of 5-epoch runs, the methods that show the paper's
effects: one-view, rnd-actions, ltla, ours(rew) and ours(demo) (``--full``: every Table 1
method whose plugins are installed). The report (``index.html``, ``table.md``) says in words
whether each effect holds, judged by paired intervals across seeds with the demo's power plan
(``pyskick/builtins/demo_plan.json``, from a 32-seed pilot on the validation split): four of
the five claims have ≥ 90 % power at 18 seeds within 15 minutes on 2 cores; ours(rew)'s
learning speed (≈ 45 %, ≈ 53 seeds needed) is *not resolved at this budget*. The pilot, the
plan and the measured costs: docs/reproduce.md, "The demo's power plan".
Rerunning continues where it stopped.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

import click

from pyskick.errors import UserError
from pyskick_cli.commands.reproduce import SIDEKICK_OPTION_HELP, parse_methods, run_table
from pyskick_cli.shared_options import (
    batch_size_option,
    epochs_option,
    methods_option,
    pack_option,
    parse_sidekick_options,
    plan_option,
    pretrain_epochs_option,
    seed_offset_option,
    seeds_option,
    sidekick_option_option,
    view_size_option,
)

DATA_SEED = 123
NUM = 800
"""Scenes of the demo's dataset (80 % train, 10 % val, 10 % test)."""
SUN360_VIEW_SIZE = 32  # pyskick.data.SUN360.view_size (not imported: it would load torch here)
VIEW_SIZE = 16
"""The demo's views are 16 x 16 pixels: every run costs about a third of SUN360's 32 x 32, so
the 15 minutes hold more seeds (docs/reproduce.md, "The demo's second study")."""
EPOCHS = 5
"""Policy epochs of every method: the sidekicks' gaps to ltla are as large after 5 epochs as
after 10, relative to the seed spread, so half the epochs buy twice the seeds."""
PRETRAIN_EPOCHS = 30
"""Epochs of one-view pretraining (19 s at these settings)."""
BATCH_SIZE = 32
"""The training batch of every stage."""
SEEDS = 18
"""Seeds per method: what the demo's power plan says ours(rew) beats ltla needs (17 for 90 %;
18 give 92 %), within 15 minutes on 2 cores (docs/reproduce.md, "The demo's power plan")."""
DEMO_METHODS = ("rnd-actions", "ltla", "ours(rew)", "ours(demo)")
"""The methods of the demo besides one-view: random motions, the learned policy, and the
two sidekicks (docs/reproduce.md, "The demo")."""


@click.command()
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("runs/demo"),
    show_default=True,
    help="Folder of the dataset, the runs, the table and the report.",
)
@click.option(
    "--num", type=click.IntRange(min=10), default=NUM, show_default=True,
    help="Synthetic scenes to generate (80% train, 10% val, 10% test).",
)  # fmt: skip
@view_size_option(
    default=VIEW_SIZE, show_default=True,
    help="Side of every view of the scenes in pixels (a multiple of 8, 16 to 1024).",
)  # fmt: skip
@pretrain_epochs_option(
    default=PRETRAIN_EPOCHS, show_default=True, help="Epochs of one-view pretraining."
)
@epochs_option(default=EPOCHS, show_default=True, help="Epochs of policy training of every method.")
@seeds_option(
    default=SEEDS,
    show_default=True,
    help="Training seeds per method (seed k of every method: same data order and starts).",
)
@seed_offset_option(
    help="The first seed index: seeds K..K+N-1, e.g. a second demo on disjoint seeds into "
    "another --out, then `pyskick pool` over both.",
)
@batch_size_option(
    default=BATCH_SIZE, show_default=True, help="Training batch size of every stage."
)
@methods_option(
    help="Comma-separated Table 1 rows (default: " + ", ".join(DEMO_METHODS) + ").",
)
@click.option(
    "--full",
    is_flag=True,
    help="Every Table 1 method whose plugins are installed (about 3x longer).",
)
@pack_option()
@sidekick_option_option(help=SIDEKICK_OPTION_HELP)
@plan_option(
    help="A power plan (`pyskick plan`) to judge the claims with (default: the demo's own, "
    "made from a validation-split pilot of the default settings; set aside for others)."
)
@click.option("--no-plan", is_flag=True, help="Judge every claim by its intervals alone.")
def demo(
    out: Path,
    num: int,
    view_size: int,
    pretrain_epochs: int,
    epochs: int,
    seeds: int,
    seed_offset: int,
    batch_size: int,
    methods: str | None,
    full: bool,
    pack: str,
    sidekick_option: tuple[str, ...],
    plan: Path | None,
    no_plan: bool,
) -> None:
    """Show the paper's effects on synthetic scenes: train one-view, rnd-actions, ltla,
    ours(rew) and ours(demo) with 18 seeds of 5 epochs (cpu-demo preset, 16-pixel views),
    compare them paired, and print the table, the verdicts and where the report is."""
    from pyskick._io import read_json_object
    from pyskick.data.builtin import make_builtin
    from pyskick.experiments import (
        available_methods,
        check_available,
        method_names,
        select_methods,
    )
    from pyskick.experiments.layout import SETTINGS_FILE
    from pyskick.experiments.power_plan import read_plan
    from pyskick.experiments.reproduce import check_reproduce_out, split_sidekick_options
    from pyskick.plugins import get_registries

    started = time.perf_counter()
    if full and methods is not None:
        raise click.BadParameter("give --methods or --full, not both", param_hint="--full")
    if no_plan and plan is not None:
        raise click.BadParameter("give --plan or --no-plan, not both", param_hint="--no-plan")
    data_path = out / demo_data_name(num, view_size)
    record = out / SETTINGS_FILE
    if record.is_file():  # refuse before generating data that the folder's runs did not use
        recorded = read_json_object(record, "demo settings record").get("dataset")
        if recorded != str(data_path.resolve()):
            older = str(recorded).endswith(f"-s{DATA_SEED}.h5")  # no -vN: SUN360's 32 pixels
            hint = (
                " (a demo from before 16-pixel views: --view-size 32 --epochs 10 --seeds 4 "
                "continues it)"
                if older and view_size != SUN360_VIEW_SIZE
                else ""
            )
            raise UserError(
                f"{out} holds a demo on {recorded}, not on {num} scenes of {view_size}-pixel "
                f"views{hint}; use another --out or the same --num and --view-size"
            )
    chosen = parse_methods(methods)
    if full:
        chosen = [m.name for m in available_methods(get_registries())]
        skipped = [name for name in method_names() if name not in chosen]
        if skipped:
            click.echo(f"demo: skipping {', '.join(skipped)} (plugins not installed)", err=True)
    elif chosen is None:
        chosen = list(DEMO_METHODS)
    # An unknown name, or one whose plugin is missing, fails before the data are generated.
    selected = select_methods(chosen)
    check_available(selected, get_registries())
    options = parse_sidekick_options(sidekick_option)
    _, given_record = split_sidekick_options(options, [m.sidekick for m in selected if m.trained])
    if plan is not None:  # a plan for another design is refused before any data are made
        design = {
            "preset": "cpu-demo", "epochs": epochs, "pretrain_epochs": pretrain_epochs,
            "batch_size": batch_size, "sidekick_options": given_record,
        }  # fmt: skip
        planned = read_plan(plan).settings
        different = sorted(k for k, v in design.items() if planned.get(k) != v)
        if different:
            raise UserError(
                f"power plan {plan} was made for other settings ({', '.join(different)}); a "
                "plan judges only tables of its pilot's design"
            )
    check_reproduce_out(out, own=[data_path.name])  # before the data are generated into it
    if not data_path.exists():
        click.echo(f"demo: generating {num} synthetic scenes ({view_size}-pixel views)", err=True)
        out.mkdir(parents=True, exist_ok=True)
        make_builtin("synthetic-scenes", data_path, num, DATA_SEED, view_size)
    run_table(
        data_path, out, methods=chosen, started=started, preset="cpu-demo", epochs=epochs,
        pretrain_epochs=pretrain_epochs, batch_size=batch_size, seeds=seeds,
        seed_offset=seed_offset, device="cpu", sidekick_options=options, pack=pack,
        plan=_judged_with(plan, no_plan=no_plan, out=out, num=num, view_size=view_size),
        plan_optional=plan is None,
    )  # fmt: skip


def _judged_with(
    plan: Path | None, *, no_plan: bool, out: Path, num: int, view_size: int
) -> Path | Literal[False] | None:
    """The power plan the demo's claims are judged with: none with ``--no-plan`` (False), the
    one given, else the folder's (None: a rerun keeps judging as it did), else the demo's own
    where the data are the default design's (the reproduce settings compare the rest; the
    data's size and views are not among them), else none."""
    from pyskick.builtins.demo import DEMO_PLAN
    from pyskick.experiments.power_plan import PLAN_FILE

    if no_plan:
        return False
    if plan is not None:
        return plan
    if (out / PLAN_FILE).is_file():
        return None
    if num != NUM or view_size != VIEW_SIZE:
        click.echo(
            f"demo: its power plan is for {NUM} scenes of {VIEW_SIZE}-pixel views; these claims "
            "are judged by their intervals alone",
            err=True,
        )
        return False
    return DEMO_PLAN


def demo_data_name(num: int, view_size: int) -> str:
    """The file name of the demo's scenes; SUN360-sized views keep the name they always had."""
    size = "" if view_size == SUN360_VIEW_SIZE else f"-v{view_size}"
    return f"synthetic-scenes-n{num}-s{DATA_SEED}{size}.h5"
