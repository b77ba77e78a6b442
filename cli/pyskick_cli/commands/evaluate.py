"""``pyskick evaluate``: the paper's avg and adv reconstruction errors of a run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import click

from pyskick.metrics import DEFAULT_METRIC, METRICS, metrics_help
from pyskick_cli.outputs import check_not_inputs, check_outputs, overwrite_option
from pyskick_cli.shared_options import (
    DATASET_HELP,
    RUN_DATASET_HELP,
    actor_name_option,
    dataset_option,
    device_option,
    eval_batch_size_option,
    json_option,
    one_view_option,
    resolve_dataset_path,
    run_dataset,
    split_option,
)

if TYPE_CHECKING:
    from pyskick.evaluation import EvalResult


@click.command()
@click.argument("run", type=click.Path(exists=True, path_type=Path))
@dataset_option(default=None, show_default=False, help=DATASET_HELP + RUN_DATASET_HELP)
@click.option(
    "--metric",
    type=click.Choice(list(METRICS)),
    default=DEFAULT_METRIC,
    show_default=True,
    help=metrics_help(),
)
@split_option()
@actor_name_option(
    help="Override the run's actor with a registered one: learned (greedy), random "
    "(rnd-actions), demo-actions (full observability), ...; see `pyskick plugins --all`.",
)
@one_view_option(help="A one-view run (folder or checkpoint) to report the % improvement against.")
@eval_batch_size_option(default="auto", show_default=True)
@device_option()
@click.option(
    "--save",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the per-sample errors to this .npz file.",
)
@overwrite_option
@json_option()
def evaluate(
    run: Path,
    dataset: str | None,
    metric: str,
    split: str,
    actor: str | None,
    one_view: Path | None,
    eval_batch_size: int | Literal["auto"],
    device: str | None,
    save: Path | None,
    as_json: bool,
    overwrite: bool,
) -> None:
    """Evaluate RUN (a run folder, using its best.pt, an export folder or a checkpoint) on a
    dataset split.

    Errors are final-step MSEs (after T glimpses, observed views pasted, greedy actions),
    reported ×1000 with std and standard error like the paper's Table 1. A run folder keeps
    the per-sample errors in RUN/eval/<split>-<metric>-<samples digest>.npz for
    `pyskick compare` (not with --actor, which evaluates another method; not for an export
    folder, which is left as it is: use --save).
    """
    from pyskick._io import check_writable_folder
    from pyskick.checkpoint import POLICY_KEYS, check_one_view, is_export, load_run
    from pyskick.data import ViewgridFile
    from pyskick.errors import GridShapeError, UserError
    from pyskick.evaluation import evaluate as run_evaluate
    from pyskick.experiments.error_sets import run_eval_file
    from pyskick.run_dir import load_model_config, one_view_of

    # Where the results go must be writable before anything is computed.
    try:
        if save is not None:
            check_outputs([save], overwrite=overwrite)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--save") from None
    # A registered name resolves to a file (a built-in made on first use): after that check.
    dataset_path = run_dataset(run) if dataset is None else resolve_dataset_path(dataset)
    if save is not None:
        # RUN given as a checkpoint: the records beside it are read too; and the one-view run
        # it started from, where it is now (the demo-actions actor acts with it).
        beside = run.parent if run.is_file() else None
        inputs = [run, beside, one_view, one_view_of(run), dataset_path]
        try:
            check_not_inputs([save], inputs)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--save") from None
        export = next((p for p in save.resolve().parents if is_export(p)), None)
        if export is not None:
            raise click.BadParameter(
                f"{save} is in the export folder {export}, which is shared as it is; choose "
                "another folder",
                param_hint="--save",
            )
    # A run folder records its evaluations; an export folder is shared as it is.
    records = run.is_dir() and not is_export(run) and actor is None
    if records:
        try:
            check_writable_folder(run / "eval")
        except ValueError as exc:
            raise click.BadParameter(
                f"{exc}; evaluate {run / 'best.pt'} to leave the run folder as it is",
                param_hint="RUN",
            ) from None
    source = ViewgridFile(dataset_path)
    if split not in source.splits:
        raise click.BadParameter(
            f"split {split!r} is not in {source.path} (splits: {', '.join(source.splits)})",
            param_hint="--split",
        )
    grids = source.split(split).load()
    mean = tuple(source.spec.channel_mean)

    def misfit(path: Path, role: str, exc: GridShapeError) -> UserError:
        """The file, split and model that do not fit."""
        return UserError(f"{source.path} (split {split!r}) does not fit {role} {path}: {exc}")

    def evaluate_on_grids(
        path: Path, role: str, actor: str | None = None, baseline: EvalResult | None = None
    ) -> EvalResult:
        try:
            return run_evaluate(
                path,
                grids,
                metric,
                channel_mean=mean,
                actor=actor,
                baseline=baseline,
                batch_size=eval_batch_size,
                device=device or "auto",
                spec=source.spec,
            )
        except GridShapeError as exc:
            raise misfit(path, role, exc) from None

    if one_view:
        # A one-view model, and RUN's shape, before the baseline's episodes: a refusal waits
        # for no evaluation.
        check_one_view(*load_run(one_view, keys=POLICY_KEYS), "--one-view")
        try:
            load_model_config(run).check_grids(grids, empty_ok=False)
        except GridShapeError as exc:
            raise misfit(run, "RUN", exc) from None
    baseline = evaluate_on_grids(one_view, "--one-view") if one_view else None
    result = evaluate_on_grids(run, "RUN", actor=actor, baseline=baseline)
    if save is not None:
        result.save(save)
    if records:
        # Recorded in the run folder, keyed by the samples, for `pyskick compare` (not with
        # another actor: that is another method's evaluation).
        assert result.samples_sha256 is not None
        result.save(
            run_eval_file(run, split, metric, result.samples_sha256),
            # The digest of the bytes evaluated: a best.pt replaced meanwhile (a run still
            # training) is not credited with these errors.
            extra={"checkpoint_sha256": str(result.checkpoint_sha256)},
        )
    report = {"run": str(run), "split": split, "n_samples": result.summary.n_samples}
    report.update(result.to_dict())
    if as_json:
        click.echo(json.dumps(report))
        return
    line = (
        f"{metric} error x1000 on {split} ({report['n_samples']} samples, T={result.T}, "
        f"{result.actor} actor): {result.summary.mean_x1000:.2f} "
        f"(std {result.summary.std_x1000:.2f}, stderr {result.summary.stderr_x1000:.2f})"
    )
    if result.improvement_pct is not None:
        line += f", {result.improvement_pct:.2f}% better than one-view"
    click.echo(line)
