"""Table 1 from the saved evaluations: the paper's columns, the paired comparisons with the
reference rows, the learning speed, and the Markdown of it all (``table.md``, ``table.json``).

Numbers are the final-step reconstruction error ×1000 (lower is better). With K seeds a
method's mean is the mean over seeds. The paper's columns keep its standard error:

- ``stderr_x1000``: across test samples, of each sample's error averaged over the seeds
  (``std / sqrt(n_test)``, as the paper's eval.py);
- ``stderr_seeds_x1000``: across seeds, of the per-seed means (``std / sqrt(K)``; None for one
  seed or for one-view, which is trained once).

Methods are compared *paired* (docs/reproduce.md, "Comparing methods",
:mod:`pyskick.evaluation.compare`): every row gets ``paired[reference][metric]`` against each
reference row (role ``"reference"``: ltla, rnd-actions, a plugin's; and one-view) —
the reference's error minus the row's (positive: the row is better), its standard error,
95 % interval and p-value across seeds (``kind = "seeds"``, seed k paired with seed k) or,
with one seed, across test samples (``kind = "samples"``) — and ``policy_gain_ratio``, its %
improvement over one-view divided by rnd-actions'. The verdicts
(:mod:`pyskick.experiments.claims`) rest on these.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pyskick._io import write_json, write_text
from pyskick.evaluation.compare import (
    PairedStat,
    compare_errors,
    paired_seeds,
    policy_gain_ratio,
)
from pyskick.evaluation.stats import improvement_pct, summarize
from pyskick.experiments.claims import (
    PAPER_GAIN_RATIOS,
    RANDOM,
    epoch_text,
    ordering_checks,
    paper_claims,
    row_role,
    verdict_text,
)
from pyskick.experiments.layout import eval_path, eval_split_of, run_dir
from pyskick.experiments.power_plan import PowerPlan, apply_plan, plan_record
from pyskick.methods import ONE_VIEW
from pyskick.metrics import METRICS

STDERR_NOTE = (
    "± is the standard error across test samples (std / sqrt(n_test) of each sample's error, "
    "averaged over seeds); with several seeds the standard error across seeds follows in "
    "brackets."
)


PAIRED_NOTE = (
    "Paired gaps: the reference's error minus the method's (×1000, positive = the method is "
    "better), with the 95% interval and p-value across seeds (seed k of each method paired; "
    "'seeds') or, with one seed, across test samples ('samples': training noise unmeasured)."
)


def on_split(note: str, split: str) -> str:
    """``note`` for a table evaluated on ``split`` (``"test"`` or ``"val"``): its samples."""
    return note.replace("test samples", f"{split} samples")


LEARNING_NOTE = (
    "Learning speed from the validation curves: the mean validation error over the epochs "
    "(area under the curve ÷ epochs; lower = faster convergence), its paired gap to ltla across "
    "seeds, the paired gap of the validation error at the first, middle and last epoch, and per "
    "seed the first epoch at which the method's validation error reaches ltla's final one."
)


REFERENCES = ("ltla", "rnd-actions", ONE_VIEW)


"""Rows every other row is compared with, paired, when they are in the table."""


SeedRuns = Sequence[tuple[Path, int]]


"""The seeds of a table: each one's reproduce folder and seed index, the same for every trained
method (seed j of a method pairs with seed j of another). One folder's: ``(out, k)`` for its
seed indices; a pooled table's: the seeds of several folders (:mod:`pyskick.experiments.pool`)."""


def seed_runs(out_dir: Path, seeds: int | Sequence[int]) -> list[tuple[Path, int]]:
    """``out_dir``'s seeds: ``range(seeds)`` for a count, else the given seed indices."""
    indices = range(seeds) if isinstance(seeds, int) else seeds
    return [(out_dir, k) for k in indices]


def load_run_errors(runs: SeedRuns, method: str, metric: str) -> torch.Tensor:
    """``[len(runs), n]`` float64 per-sample errors of ``method`` at each seed of ``runs``."""
    paths = [eval_path(folder, method, k, metric).with_suffix(".npz") for folder, k in runs]
    return torch.stack([torch.from_numpy(np.load(p)["per_sample"]).double() for p in paths])


def reference_names(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The rows every other row is compared with, paired: those of role ``"reference"`` (ltla,
    rnd-actions, a plugin's), the last in table order first (the closest competitor: ltla
    before rnd-actions), then one-view."""
    names = [row["method"] for row in rows if row_role(row) == "reference"][::-1]
    return names + [row["method"] for row in rows if row["method"] == ONE_VIEW]


def build_table(
    out_dir: Path,
    methods: Sequence[str],
    *,
    seeds: int | Sequence[int] | None = None,
    settings: Mapping[str, Any],
    roles: Mapping[str, str] | None = None,
    runs: SeedRuns | None = None,
    plan: PowerPlan | None = None,
) -> dict[str, Any]:
    """Aggregate ``out_dir/eval`` into the table (the content of ``table.json``).

    Args:
        out_dir: the reproduce folder (its one-view run is the table's).
        methods: method names in table order (``one-view`` first).
        seeds: the trained methods' seeds in ``out_dir``: a count (indices 0..K-1) or the
            seed indices (``reproduce --seed-offset``).
        settings: the run's recorded settings (copied into the table).
        roles: each method's role (:data:`pyskick.methods.ROLES`, recorded in its row);
            None: the registered methods' (``"baseline"`` for a name none registers).
        runs: instead of ``seeds``, the seeds as (folder, index) pairs, from several folders
            (a pooled table). The table records them (``seed_runs``).
        plan: a power plan the claims are judged with
            (:func:`~pyskick.experiments.power_plan.apply_plan`); recorded as ``plan``.

    Raises:
        FileNotFoundError: a missing evaluation.
    """
    if roles is None:
        from pyskick.plugins import get_registries

        registered = get_registries().method
        roles = {m: registered.get(m).role if m in registered else "baseline" for m in methods}
    if runs is None:
        if seeds is None:
            raise TypeError("build_table needs seeds or runs")
        runs = seed_runs(out_dir, seeds)
    runs = [(Path(folder), int(k)) for folder, k in runs]
    rows = []
    errors: dict[str, dict[str, torch.Tensor]] = {}
    for method in methods:
        k_seeds = 1 if method == ONE_VIEW else len(runs)
        row: dict[str, Any] = {
            "method": method,
            "role": roles.get(method, "baseline"),
            "seeds": k_seeds,
            "n_test": settings["n_test"],
        }
        errors[method] = {}
        for metric in METRICS:
            method_runs = [(out_dir, 0)] if method == ONE_VIEW else runs
            per_sample = load_run_errors(method_runs, method, metric)
            errors[method][metric] = per_sample
            seed_means = per_sample.mean(1) * 1000.0
            seeds_se = (
                float(seed_means.std(unbiased=True)) / math.sqrt(k_seeds) if k_seeds > 1 else None
            )
            row[metric] = {
                "mean_x1000": float(seed_means.mean()),
                "stderr_x1000": summarize(per_sample.mean(0)).stderr_x1000,
                "stderr_seeds_x1000": seeds_se,
                "improvement_pct": None,
            }
        rows.append(row)
    base = next(row for row in rows if row["method"] == ONE_VIEW)
    for row in rows:
        if row is base:
            continue
        for metric in METRICS:
            row[metric]["improvement_pct"] = improvement_pct(
                row[metric]["mean_x1000"], base[metric]["mean_x1000"]
            )
    by_name = {row["method"]: row for row in rows}
    references = reference_names(rows)
    for row in rows:
        method = row["method"]
        row["paired"] = {
            ref: {
                metric: compare_errors(
                    errors[ref][metric], errors[method][metric], metric=metric
                ).to_dict()
                for metric in METRICS
            }
            for ref in references
            if ref != method
        }
        random_row = by_name.get(RANDOM)
        row["policy_gain_ratio"] = {
            metric: None
            if method == ONE_VIEW or random_row is None
            else policy_gain_ratio(
                row[metric]["improvement_pct"], random_row[metric]["improvement_pct"]
            )
            for metric in METRICS
        }
    learning = learning_summary(out_dir, [m for m in methods if m != ONE_VIEW], runs=runs)
    for row in rows:
        row["learning"] = learning.get(row["method"])
    table: dict[str, Any] = {
        "unit": "final-step reconstruction MSE x1000 (lower is better)",
        "stderr": on_split(STDERR_NOTE, eval_split_of(settings)),
        "paired_note": on_split(PAIRED_NOTE, eval_split_of(settings)),
        "settings": dict(settings),
        # "." is out_dir itself, so that a folder's table moves with it.
        "seed_runs": [["." if folder == out_dir else str(folder), k] for folder, k in runs],
        "rows": rows,
    }
    table["ordering"] = [asdict(check) for check in ordering_checks(table)]
    claims = paper_claims(table)
    if plan is not None:
        claims = apply_plan(claims, table, plan)
        table["plan"] = plan_record(plan, table["settings"])
    table["claims"] = [asdict(claim) for claim in claims]
    return table


def learning_summary(
    out_dir: Path,
    methods: Sequence[str],
    seeds: int | Sequence[int] | None = None,
    *,
    reference: str = "ltla",
    runs: SeedRuns | None = None,
) -> dict[str, dict[str, Any]]:
    """How fast each trained method learns, from its validation curves (``metrics.jsonl``;
    methods whose runs are gone are left out).

    Per method: ``auc_x1000``, the area under the validation curve divided by the number of
    epochs (the mean validation error over the epochs all its seeds ran, ×1000, averaged over
    seeds: lower means faster convergence, the paper's Fig. 4); ``final_val_x1000``; and, with
    ``reference`` (ltla) in the table, ``epochs_to_reference`` — per seed, the first epoch
    (1-based) at which the method's validation error is at most the reference's *final*
    validation error of the same seed (None if never; the reference's own row says when it
    first got there) — and ``auc_vs_reference``, the paired
    difference of the areas across seeds (reference − method ×1000, positive: the method
    learns faster), and ``gap_at_epoch``, the same paired gap of the validation error at the
    first, middle and last epoch, as :func:`~pyskick.evaluation.compare.paired_seeds`.
    The seeds are ``out_dir``'s ``seeds`` (a count or indices), or ``runs`` (folder, index).
    """
    if runs is None:
        runs = seed_runs(out_dir, 0 if seeds is None else seeds)
    from pyskick.viz.curves import read_curve

    curves = {}
    for method in methods:
        try:
            curves[method] = [
                read_curve(run_dir(folder, method, k), "val/rec_error") for folder, k in runs
            ]
        except FileNotFoundError:  # the runs are gone (only the evaluations were kept)
            continue
    if not curves:
        return {}
    epochs = min(len(values) for runs in curves.values() for _, values in runs)
    summary: dict[str, dict[str, Any]] = {}
    for method, seed_curves in curves.items():
        areas = [sum(values[:epochs]) / epochs * 1000.0 for _, values in seed_curves]
        finals = [values[epochs - 1] for _, values in seed_curves]
        entry: dict[str, Any] = {
            "epochs": epochs,
            "auc_x1000": sum(areas) / len(areas),
            "final_val_x1000": sum(finals) / len(finals) * 1e3,
            "seed_auc_x1000": areas,
        }
        if reference in curves:
            reached = []
            for (_, values), (_, ref_values) in zip(seed_curves, curves[reference], strict=True):
                target = ref_values[epochs - 1]
                hit = next((e + 1 for e in range(epochs) if values[e] <= target), None)
                reached.append(hit)
            entry["epochs_to_reference"] = reached
        if reference in curves and method != reference:
            entry["gap_at_epoch"] = {
                str(epoch): _stat_dict(
                    paired_seeds(
                        [
                            (ref[epoch - 1] - mine[epoch - 1]) * 1000.0
                            for (_, mine), (_, ref) in zip(
                                seed_curves, curves[reference], strict=True
                            )
                        ]
                    ),
                    reference,
                )
                for epoch in sorted({1, (epochs + 1) // 2, epochs})
            }
            ref_areas = [sum(v[:epochs]) / epochs * 1000.0 for _, v in curves[reference]]
            stat = paired_seeds([r - a for r, a in zip(ref_areas, areas, strict=True)])
            entry["auc_vs_reference"] = _stat_dict(stat, reference)
        summary[method] = entry
    return summary


def format_table(table: Mapping[str, Any]) -> str:
    """Markdown: the paper's columns (mean ×1000 ± standard error, % improvement over
    one-view, policy gain ratio), then the paired gaps against ltla and rnd-actions."""
    header = table_header()
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table["rows"]:
        cells = [row["method"], str(row["seeds"])]
        for metric in METRICS:
            cells += metric_cells(row[metric])
        cells.append(ratio_cell(row.get("policy_gain_ratio")))
        lines.append("| " + " | ".join(cells) + " |")
    n_test = table["settings"]["n_test"]
    split = eval_split_of(table["settings"])
    text = (
        "\n".join(lines) + f"\n\n{n_test} {split} viewgrids. {on_split(STDERR_NOTE, split)} "
        "Gain ratio: % "
        f"better than one-view ÷ rnd-actions' ({PAPER_GAIN_RATIOS})."
    )
    paired = paired_lines(table)
    if paired:
        text += "\n\n" + "\n".join(paired) + f"\n\n{on_split(PAIRED_NOTE, split)}"
    learning = learning_lines(table)
    if learning:
        text += "\n\n" + "\n".join(learning) + f"\n\n{LEARNING_NOTE}"
    claims = table.get("claims") or []
    if claims:
        plan = table.get("plan") or {}
        planned = (
            f"; power plan of {plan['pilot']['seeds']} pilot seeds: below "
            f"{plan['target_power']:.0%} power, not resolved at this budget"
            if plan.get("applied")
            else ""
        )
        text += f"\n\nThe paper's effects (paired 95% intervals{planned}):\n"
        for claim in claims:
            text += f"\n- **{claim['name']}: {verdict_text(claim)}**"
            text += "".join(f"\n  - {line}" for line in claim["evidence"])
            text += "".join(f"\n  - {line}" for line in claim.get("notes", []))
    return text


def table_header() -> list[str]:
    """The columns of the main table: per metric its mean and % improvement, then the gain
    ratios of every metric."""
    cells = ["method", "seeds"]
    for metric in METRICS:
        cells += [f"{metric} ×1000", f"{metric} % better"]
    return [*cells, f"gain ratio {' / '.join(METRICS)}"]


def _stat_dict(stat: PairedStat, reference: str) -> dict[str, Any]:
    """A paired statistic across seeds as JSON (NaN -> None)."""
    return {
        "reference": reference,
        "diff_x1000": stat.diff_x1000,
        "se_x1000": None if math.isnan(stat.se_x1000) else stat.se_x1000,
        "ci95_x1000": [None if math.isnan(x) else x for x in stat.ci95_x1000],
        "p": None if math.isnan(stat.p) else stat.p,
        "n_seeds": stat.n,
    }


def learning_lines(table: Mapping[str, Any]) -> list[str]:
    rows = [row for row in table["rows"] if row.get("learning")]
    if not rows:
        return []
    epochs = next(
        (
            list(row["learning"]["gap_at_epoch"])
            for row in rows
            if "gap_at_epoch" in row["learning"]
        ),
        [],
    )
    lines = [
        "| method | mean val error over epochs ×1000 | vs ltla (paired, seeds) "
        + "".join(f"| val gap to ltla, epoch {e} " for e in epochs)
        + "| epochs to ltla's final val error | final val error ×1000 |",
        "|---|---|---|" + "---|" * len(epochs) + "---|---|",
    ]
    for row in rows:
        entry = row["learning"]
        versus = entry.get("auc_vs_reference")
        reached = entry.get("epochs_to_reference")
        gaps = entry.get("gap_at_epoch", {})
        cells = [
            row["method"],
            f"{entry['auc_x1000']:.2f}",
            "-" if versus is None else paired_cell({**versus, "kind": "seeds"}),
            *("-" if e not in gaps else paired_cell({**gaps[e], "kind": "seeds"}) for e in epochs),
            "-" if reached is None else ", ".join(epoch_text(e) for e in reached),
            f"{entry['final_val_x1000']:.2f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def paired_lines(table: Mapping[str, Any]) -> list[str]:
    refs = [ref for ref in reference_names(table["rows"]) if ref != ONE_VIEW]
    if not refs:
        return []
    header = "| method | " + " | ".join(f"vs {ref} {m}" for ref in refs for m in METRICS) + " |"
    lines = [header, "|---|" + "---|" * (len(refs) * len(METRICS))]
    for row in table["rows"]:
        if row["method"] == ONE_VIEW:
            continue
        cells = [row["method"]]
        for ref in refs:
            for metric in METRICS:
                entry = row["paired"].get(ref, {}).get(metric)
                cells.append("-" if entry is None else paired_cell(entry))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def paired_cell(entry: Mapping[str, Any]) -> str:
    lo, hi = entry["ci95_x1000"]
    if lo is None:  # one sample: no interval
        return f"{entry['diff_x1000']:+.2f}"
    return f"{entry['diff_x1000']:+.2f} [{lo:+.2f}, {hi:+.2f}] p={entry['p']:.2g} ({entry['kind']})"


def ratio_cell(ratios: Mapping[str, float | None] | None) -> str:
    if not ratios:
        return "-"
    return " / ".join("-" if ratios[m] is None else f"{ratios[m]:.2f}" for m in METRICS)


def metric_cells(entry: Mapping[str, Any]) -> list[str]:
    value = f"{entry['mean_x1000']:.2f} ± {entry['stderr_x1000']:.2f}"
    if entry["stderr_seeds_x1000"] is not None:
        value += f" ({entry['stderr_seeds_x1000']:.2f})"
    pct = entry["improvement_pct"]
    return [value, "-" if pct is None else f"{pct:.2f}"]


def write_table(out_dir: Path, table: Mapping[str, Any]) -> tuple[Path, Path]:
    """Write ``table.json``, then ``table.md``, each atomically (the record first: a folder
    with a ``table.md`` always has the ``table.json`` it shows)."""
    js = write_json(out_dir / "table.json", table)
    return write_text(out_dir / "table.md", format_table(table) + "\n"), js
