"""``pyskick reproduce``: the paper's Table 1 on one dataset, end to end and resumable."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import click

from pyskick_cli.shared_options import (
    batch_size_option,
    config_option,
    dataset_option,
    device_option,
    epochs_option,
    logger_option,
    methods_option,
    pack_option,
    parse_sidekick_options,
    plan_option,
    preset_option,
    pretrain_epochs_option,
    resolve_dataset_path,
    resolve_loggers,
    seed_offset_option,
    seeds_option,
    sidekick_option_option,
)

SIDEKICK_OPTION_HELP = (
    "Set a sidekick option (repeatable): KEY=VALUE for every selected method's sidekick that "
    "has KEY, NAME.KEY=VALUE for sidekick NAME only (e.g. rew.decay_every=5); `pyskick "
    "plugins --all` lists them."
)


def parse_methods(value: str | None) -> list[str] | None:
    """``--methods a,b,c`` as a list (None: every method)."""
    if value is None:
        return None
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        raise click.BadParameter("no method named", param_hint="--methods")
    return names


reproduce_folders_argument = click.argument(
    "folders",
    nargs=-1,
    required=True,
    type=click.Path(file_okay=False, exists=True, path_type=Path),
)
"""FOLDERS...: finished reproduce folders (``pool``, ``plan``)."""


def run_table(
    dataset: Path,
    out: Path,
    *,
    methods: Sequence[str] | None,
    started: float,
    **options: object,
) -> None:
    """Run :func:`pyskick.experiments.reproduce`, print the table and where the report is."""
    from pyskick.experiments import reproduce
    from pyskick.experiments.table import format_table
    from pyskick_cli.progress import echo as say

    result = reproduce(dataset, out, methods=methods, log=say, **options)  # type: ignore[arg-type]
    click.echo(format_table(result.table))
    where = result.index if result.index is not None else out / "table.md"
    say(f"reproduce: done in {time.perf_counter() - started:.0f} s; report in {where}")


@click.command()
@dataset_option(required=True, show_default=False)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Folder of the runs, evaluations, table and report (rerun to resume).",
)
@preset_option()
@config_option(
    help="A TOML file of TrainConfig fields applied over the preset for every method (lr, "
    "start_zeroing, ...); not sidekick, actor or critic.",
)
@epochs_option(help="Policy-training epochs.")
@pretrain_epochs_option()
@batch_size_option()
@methods_option()
@seeds_option()
@seed_offset_option()
@click.option(
    "--num-test", type=click.IntRange(min=1), default=None,
    help="Evaluate on the first N test viewgrids (default: all).",
)  # fmt: skip
@click.option(
    "--eval-split",
    type=click.Choice(["test", "val"]),
    default="test",
    show_default=True,
    help="Split the table is computed on: test (the paper's), or val to compare settings "
    "without looking at the test split.",
)
@device_option()
@pack_option()
@logger_option()
@sidekick_option_option(help=SIDEKICK_OPTION_HELP)
@plan_option()
@click.option("--no-report", is_flag=True, help="Write the table only (no figures, no page).")
def reproduce(
    dataset: str,
    out: Path,
    preset: str | None,
    config_path: Path | None,
    epochs: int | None,
    pretrain_epochs: int | None,
    batch_size: int | None,
    methods: str | None,
    seeds: int,
    seed_offset: int,
    num_test: int | None,
    eval_split: str,
    device: str | None,
    pack: str,
    logger: tuple[str, ...],
    sidekick_option: tuple[str, ...],
    plan: Path | None,
    no_report: bool,
) -> None:
    """Run every method of the paper's Table 1 on one dataset: train, evaluate (avg, adv),
    write table.md/json and the report index.html.

    Rerunning with the same settings skips what is finished and continues interrupted runs;
    more --epochs extend the runs; other changed settings are refused.
    """
    started = time.perf_counter()
    run_table(
        resolve_dataset_path(dataset), out, methods=parse_methods(methods), started=started,
        preset=preset, config=config_path, epochs=epochs, pretrain_epochs=pretrain_epochs,
        batch_size=batch_size, seeds=seeds, seed_offset=seed_offset, num_test=num_test,
        eval_split=eval_split,
        device=device, report=not no_report, pack=pack,
        sidekick_options=parse_sidekick_options(sidekick_option), loggers=resolve_loggers(logger),
        plan=plan,
    )  # fmt: skip


@click.command()
@reproduce_folders_argument
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Folder of the pooled table.md/table.json (created; an earlier pool's folder is "
    "rewritten, any other non-empty folder refused).",
)
@plan_option(
    help="A power plan (`pyskick plan`) to judge the claims with (default: the plan every "
    "folder holds, if they hold the same one)."
)
def pool(folders: tuple[Path, ...], out: Path, plan: Path | None) -> None:
    """Judge the paper's claims over the seeds of several reproduce FOLDERS of the same
    settings (e.g. `reproduce --seed-offset 4` into another folder, or another machine's run):
    one table, seed k of each method paired with seed k of the others. Folders with other
    settings, or holding the same seed, are refused.
    """
    from pyskick.experiments.pool import pool as pool_folders
    from pyskick.experiments.table import format_table
    from pyskick_cli.progress import echo as say

    table = pool_folders(folders, out, plan=plan)
    click.echo(format_table(table))
    say(f"pool: {len(table['seed_runs'])} seeds of {len(folders)} folders; table in {out}")


@click.command()
@reproduce_folders_argument
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The plan file to write (JSON; an existing plan is replaced, any other file refused, "
    "and so is a path inside a pilot folder).",
)
def plan(folders: tuple[Path, ...], out: Path) -> None:
    """Make a power plan from pilot FOLDERS: reproduce folders of one design run on the
    validation split (`reproduce --eval-split val`, on seeds the judged runs will not use).
    It says which claims the design has 90% power for at how many seeds; `reproduce --plan`
    and `pool --plan` then judge a claim with fewer seeds than it needs "not resolved at this
    budget" unless its intervals contradict it (docs/reproduce.md, "Power plans").
    """
    from pyskick._io import check_writable_folder
    from pyskick.experiments.pool import plan_from_folders
    from pyskick.experiments.power_plan import check_plan_out, plan_lines, write_plan

    check_writable_folder(out.parent)
    check_plan_out(out, folders)
    made = write_plan(plan_from_folders(folders), out)
    click.echo("\n".join(plan_lines(made)))
    pilot = made.pilot
    click.echo(
        f"plan: {pilot['seeds']} pilot seeds on the {pilot['eval_split']} split; written to {out}",
        err=True,
    )
