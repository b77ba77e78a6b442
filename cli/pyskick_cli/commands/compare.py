"""``pyskick compare A B``: paired comparison of two evaluated methods.

The statistics are described in docs/reproduce.md, "Comparing methods".
"""

from __future__ import annotations

import json

import click

from pyskick.errors import UserError
from pyskick.metrics import METRICS
from pyskick_cli.shared_options import json_option

METRIC_CHOICES = (*METRICS, "all")


@click.command()
@click.argument("reference")
@click.argument("candidate")
@click.option(
    "--metric",
    type=click.Choice(METRIC_CHOICES),
    default="all",
    show_default=True,
    help="Which evaluation to compare (all: each metric both runs were evaluated on; the "
    "others are named on stderr with the reason).",
)
@json_option()
def compare(reference: str, candidate: str, metric: str, as_json: bool) -> None:
    """Compare CANDIDATE (B) with REFERENCE (A) on the same test samples, paired.

    \b
    A and B are each an evaluation file (.npz or .json of `pyskick evaluate --save` or of
    `pyskick reproduce`), a run folder evaluated by `pyskick evaluate` (RUN/eval/), or
    REPRODUCE_DIR:METHOD (every seed of a method; seed k of A pairs with seed k of B).

    The gap is A's error minus B's, ×1000: positive means B is better. With two or more
    seeds the standard error, 95% interval and p-value are across seeds (training noise);
    with one seed they are across test samples only, and the output says so. The p-value is
    the t test's, the interval's dual; a sign-flip p across samples is shown beside it.
    """
    from pyskick.evaluation.compare import compare_errors
    from pyskick.experiments.error_sets import MetricUnavailable, load_errors, paired_sets

    metrics = tuple(METRICS) if metric == "all" else (metric,)
    results = {}
    left_out: dict[str, str] = {}
    first_error: ValueError | None = None
    for name in metrics:
        try:
            a, b = paired_sets(load_errors(reference, name), load_errors(candidate, name))
        except MetricUnavailable as exc:
            # --metric all compares the metrics both sides were evaluated on, and says which
            # it left out and why.
            first_error = first_error or exc
            left_out[name] = str(exc)
            continue
        try:
            results[name] = compare_errors(a.errors, b.errors, metric=name)
        except ValueError as exc:
            raise UserError(f"{reference} vs {candidate}: {exc}") from None
    if not results or (metric != "all" and first_error is not None):
        assert first_error is not None
        raise first_error
    for name, reason in left_out.items():
        click.echo(f"compare: {name} left out: {reason}", err=True)
    if as_json:
        payload = {
            "reference": reference,
            "candidate": candidate,
            "sign": "diff = reference error - candidate error; positive: candidate better",
            "metrics": {
                name: {
                    **result.to_dict(),
                    "verdict": result.verdict(reference, candidate),
                }
                for name, result in results.items()
            },
            "left_out": left_out,
        }
        click.echo(json.dumps(payload))
        return
    click.echo(f"A = {reference}\nB = {candidate}\n(A − B, ×1000: positive means B is better)")
    for name, result in results.items():
        lo, hi = result.ci95_x1000
        seeds = f"{result.n_seeds} seed{'s' if result.n_seeds > 1 else ''}"
        click.echo(
            f"{name}: gap {result.diff_x1000:+.3f}, SE {result.se_x1000:.3f} across "
            f"{result.kind}, 95% CI [{lo:.3f}, {hi:.3f}], p = {result.p:.3g} "
            f"({seeds}, {result.n_samples} samples; paired SE across samples "
            f"{result.samples_se_x1000:.3f}, unpaired {result.unpaired_se_x1000:.3f}; "
            f"sign-flip p across samples {result.samples_sign_flip_p:.3g})"
        )
        click.echo(f"  {result.verdict('A', 'B')}")
