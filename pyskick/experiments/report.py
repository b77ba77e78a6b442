"""Table 1 from the saved evaluations, paired comparisons, the paper's ordering checks, and
the HTML report.

Numbers are the final-step reconstruction error ×1000 (lower is better). With K seeds a
method's mean is the mean over seeds. The paper's columns keep its standard error:

- ``stderr_x1000``: across test samples, of each sample's error averaged over the seeds
  (``std / sqrt(n_test)``, as the paper's eval.py);
- ``stderr_seeds_x1000``: across seeds, of the per-seed means (``std / sqrt(K)``; None for one
  seed or for one-view, which is trained once).

Methods are compared *paired* (docs/reproduce.md, "Comparing methods",
:mod:`pyskick.evaluation.compare`): every row gets ``paired[reference][metric]`` against ltla,
rnd-actions and one-view (those in the table) —
the reference's error minus the row's (positive: the row is better), its standard error,
95 % interval and p-value across seeds (``kind = "seeds"``, seed k paired with seed k) or,
with one seed, across test samples (``kind = "samples"``) — and ``policy_gain_ratio``, its %
improvement over one-view divided by rnd-actions'. The ordering verdicts rest on these.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import torch

from pyskick._io import write_json, write_text
from pyskick.data.spec import GridSpec
from pyskick.evaluation.compare import (
    PairedStat,
    compare_errors,
    paired_seeds,
    policy_gain_ratio,
)
from pyskick.evaluation.power import seeds_for_power
from pyskick.evaluation.stats import improvement_pct, summarize
from pyskick.experiments.layout import eval_path, run_dir
from pyskick.experiments.methods import ONE_VIEW
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
LEARNING_NOTE = (
    "Learning speed from the validation curves: the mean validation error over the epochs "
    "(area under the curve ÷ epochs; lower = faster convergence), its paired gap to ltla across "
    "seeds, the paired gap of the validation error at the first, middle and last epoch, and per "
    "seed the first epoch at which the method's validation error reaches ltla's final one."
)
REFERENCES = ("ltla", "rnd-actions", ONE_VIEW)
"""Rows every other row is compared with, paired, when they are in the table."""
RANDOM = "rnd-actions"
PAPER_GAIN_RATIOS = "paper: ltla 1.83 / ours(rew) 2.03 (SUN360), 1.44 / 1.66 (ModelNet Hard)"


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


def build_table(
    out_dir: Path,
    methods: Sequence[str],
    *,
    seeds: int | Sequence[int] | None = None,
    settings: Mapping[str, Any],
    roles: Mapping[str, str] | None = None,
    runs: SeedRuns | None = None,
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
    for row in rows:
        method = row["method"]
        row["paired"] = {
            ref: {
                metric: compare_errors(
                    errors[ref][metric], errors[method][metric], metric=metric
                ).to_dict()
                for metric in METRICS
            }
            for ref in REFERENCES
            if ref in errors and ref != method
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
        "stderr": STDERR_NOTE,
        "paired_note": PAIRED_NOTE,
        "settings": dict(settings),
        # "." is out_dir itself, so that a folder's table moves with it.
        "seed_runs": [["." if folder == out_dir else str(folder), k] for folder, k in runs],
        "rows": rows,
    }
    table["ordering"] = [asdict(check) for check in ordering_checks(table)]
    table["claims"] = [asdict(claim) for claim in paper_claims(table)]
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
    from pyskick.evaluation.compare import paired_seeds
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
    for method, runs in curves.items():
        areas = [sum(values[:epochs]) / epochs * 1000.0 for _, values in runs]
        entry: dict[str, Any] = {
            "epochs": epochs,
            "auc_x1000": sum(areas) / len(areas),
            "final_val_x1000": sum(values[epochs - 1] for _, values in runs) / len(runs) * 1e3,
            "seed_auc_x1000": areas,
        }
        if reference in curves:
            reached = []
            for (_, values), (_, ref_values) in zip(runs, curves[reference], strict=True):
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
                            for (_, mine), (_, ref) in zip(runs, curves[reference], strict=True)
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
    header = _table_header()
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table["rows"]:
        cells = [row["method"], str(row["seeds"])]
        for metric in METRICS:
            cells += _cells(row[metric])
        cells.append(_ratio_cell(row.get("policy_gain_ratio")))
        lines.append("| " + " | ".join(cells) + " |")
    n_test = table["settings"]["n_test"]
    split = table["settings"].get("eval_split", "test")
    text = (
        "\n".join(lines) + f"\n\n{n_test} {split} viewgrids. {STDERR_NOTE} Gain ratio: % "
        f"better than one-view ÷ rnd-actions' ({PAPER_GAIN_RATIOS})."
    )
    paired = _paired_lines(table)
    if paired:
        text += "\n\n" + "\n".join(paired) + f"\n\n{PAIRED_NOTE}"
    learning = _learning_lines(table)
    if learning:
        text += "\n\n" + "\n".join(learning) + f"\n\n{LEARNING_NOTE}"
    claims = table.get("claims") or []
    if claims:
        text += "\n\nThe paper's effects (paired 95% intervals):\n"
        for claim in claims:
            text += f"\n- **{claim['name']}: {claim_verdict(claim)}**"
            text += "".join(f"\n  - {line}" for line in claim["evidence"])
            text += "".join(f"\n  - {line}" for line in claim.get("notes", []))
    return text


def claim_verdict(claim: Mapping[str, Any]) -> str:
    """A claim's verdict in ``table.json`` (tables before the three verdicts: from ``holds``;
    their "does not hold" could not tell an open claim from a refuted one)."""
    if "verdict" in claim:
        return str(claim["verdict"])
    return HOLDS if claim["holds"] else NOT_RESOLVED


def _table_header() -> list[str]:
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


def _epoch(epoch: int | None) -> str:
    return "never" if epoch is None else str(epoch)


def _learning_lines(table: Mapping[str, Any]) -> list[str]:
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
            "-" if versus is None else _paired_cell({**versus, "kind": "seeds"}),
            *("-" if e not in gaps else _paired_cell({**gaps[e], "kind": "seeds"}) for e in epochs),
            "-" if reached is None else ", ".join(_epoch(e) for e in reached),
            f"{entry['final_val_x1000']:.2f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _paired_lines(table: Mapping[str, Any]) -> list[str]:
    refs = [ref for ref in REFERENCES[:2] if any(ref in row["paired"] for row in table["rows"])]
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
                cells.append("-" if entry is None else _paired_cell(entry))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _paired_cell(entry: Mapping[str, Any]) -> str:
    lo, hi = entry["ci95_x1000"]
    if lo is None:  # one sample: no interval
        return f"{entry['diff_x1000']:+.2f}"
    return f"{entry['diff_x1000']:+.2f} [{lo:+.2f}, {hi:+.2f}] p={entry['p']:.2g} ({entry['kind']})"


def _html_table(title: str, note: str, lines: list[str]) -> list[str]:
    """A section with an HTML table made from Markdown table ``lines`` (none: no section)."""
    if not lines:
        return []
    header, _, *body = lines
    esc = html.escape
    return [
        f"<h2>{esc(title)}</h2><p>{esc(note)}</p><table>",
        "<tr>" + "".join(f"<th>{esc(c)}</th>" for c in _md_cells(header)) + "</tr>",
        *(
            "<tr>" + "".join(f"<td>{esc(c)}</td>" for c in _md_cells(line)) + "</tr>"
            for line in body
        ),
        "</table>",
    ]


def _md_cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _ratio_cell(ratios: Mapping[str, float | None] | None) -> str:
    if not ratios:
        return "-"
    return " / ".join("-" if ratios[m] is None else f"{ratios[m]:.2f}" for m in METRICS)


def _cells(entry: Mapping[str, Any]) -> list[str]:
    value = f"{entry['mean_x1000']:.2f} ± {entry['stderr_x1000']:.2f}"
    if entry["stderr_seeds_x1000"] is not None:
        value += f" ({entry['stderr_seeds_x1000']:.2f})"
    pct = entry["improvement_pct"]
    return [value, "-" if pct is None else f"{pct:.2f}"]


def write_table(out_dir: Path, table: Mapping[str, Any]) -> tuple[Path, Path]:
    """Write ``table.md`` and ``table.json`` atomically."""

    md = write_text(out_dir / "table.md", format_table(table) + "\n")
    return md, write_json(out_dir / "table.json", table)


@dataclass(frozen=True)
class OrderingCheck:
    """One pairwise claim of the paper's ordering, judged by the paired comparison.

    Attributes:
        metric: a metric's name (``"avg"``, ``"adv"``).
        better: the method the paper finds better (lower error).
        worse: the method the paper finds worse.
        gap_x1000: ``worse - better`` mean error ×1000, paired (positive: the claim holds).
        se_x1000: its standard error (of ``kind``).
        ci95_x1000: its 95 % interval ``[lo, hi]`` (of ``kind``; None with one sample).
        p: two-sided p-value of no difference.
        kind: ``"seeds"`` (across seeds, training noise included) or ``"samples"`` (one seed:
            across test samples only).
        n_seeds: paired runs.
        verdict: :func:`verdict_of` the interval: ``"holds"``, ``"not resolved"`` or
            ``"contradicted"``.
        seeds_needed: for a claim not resolved across seeds, the seeds its observed spread
            would need for 90 % power at its observed gap (:func:`seeds_needed`); else None.
    """

    metric: str
    better: str
    worse: str
    gap_x1000: float
    se_x1000: float | None
    ci95_x1000: list[float | None]
    p: float | None
    kind: str
    n_seeds: int
    verdict: str
    seeds_needed: int | None = None


HOLDS, NOT_RESOLVED, CONTRADICTED = "holds", "not resolved", "contradicted"
"""The three verdicts of a claim "B beats A" judged by the 95 % interval of B's paired gap."""


def verdict_of(lo: float | None, hi: float | None) -> str:
    """``"holds"`` when the 95 % interval of the gap excludes zero in the claimed direction
    (above it), ``"contradicted"`` when it excludes zero the other way, ``"not resolved"`` when
    it contains zero or there is no interval (a point estimate alone decides nothing)."""
    if lo is not None and hi is not None and not (math.isnan(lo) or math.isnan(hi)):
        if lo > 0:
            return HOLDS
        if hi < 0:
            return CONTRADICTED
    return NOT_RESOLVED


def seeds_needed(entry: Mapping[str, Any]) -> int | None:
    """For a paired entry across seeds (``diff_x1000``, ``se_x1000``, ``n_seeds``): the seeds
    a paired t test needs for 90 % power at 5 % if the true gap were the observed one and the
    seeds scattered as observed (:func:`pyskick.evaluation.power.seeds_for_power`); None with
    one seed, no observed gap, or more than 10,000 seeds."""
    se, n = entry.get("se_x1000"), entry.get("n_seeds", 1)
    if entry.get("kind", "seeds") != "seeds" or n < 2 or se is None or math.isnan(se):
        return None
    return seeds_for_power(entry["diff_x1000"], se * math.sqrt(n))


def ordering_checks(table: Mapping[str, Any]) -> list[OrderingCheck]:
    """The paper's claims present in ``table``, judged by the rows' paired comparisons:
    one-view is worse than every other method, ltla and every sidekick method (role
    ``"sidekick"``: ``ours(...)`` and plugins' rows that say so) are better than rnd-actions,
    and every sidekick method is better than ltla."""
    rows = {row["method"]: row for row in table["rows"]}
    pairs = [(name, ONE_VIEW) for name in rows if name != ONE_VIEW]
    ours = sidekick_rows(rows)
    if RANDOM in rows:
        pairs += [(name, RANDOM) for name in ("ltla", *ours) if name in rows]
    if "ltla" in rows:
        pairs += [(name, "ltla") for name in ours]
    checks = []
    for metric in METRICS:
        for better, worse in pairs:
            entry = rows[better]["paired"][worse][metric]
            lo, hi = entry["ci95_x1000"]
            gap = entry["diff_x1000"]
            verdict = verdict_of(lo, hi)
            needed = seeds_needed(entry) if verdict == NOT_RESOLVED else None
            checks.append(
                OrderingCheck(
                    metric, better, worse, gap, entry["se_x1000"], [lo, hi], entry["p"],
                    entry["kind"], entry["n_seeds"], verdict, needed,
                )
            )  # fmt: skip
    return checks


GAIN_RATIO_METRIC = "avg"
"""The metric of the paper's policy gain ratios (printed beside the paper's, never judged)."""


def sidekick_rows(rows: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The rows of role ``"sidekick"``, in table order: ``ours(rew)``, ``ours(demo)`` and any
    plugin row registered so (tables written before rows had roles: the ``ours(...)`` rows)."""
    return [
        name
        for name, row in rows.items()
        if row.get("role", "sidekick" if name.startswith("ours(") else "") == "sidekick"
    ]


@dataclass(frozen=True)
class Claim:
    """One of the paper's effects, checked on the table and stated in words.

    Attributes:
        name: ``"learning works"``, ``"<sidekick> beats ltla"`` or ``"<sidekick> learns
            faster than ltla"`` (``ours(rew)``, ``ours(demo)``).
        verdict: ``"holds"`` (every part holds), ``"contradicted"`` (a part is contradicted)
            or ``"not resolved"`` (otherwise).
        holds: ``verdict == "holds"`` (kept for readers of older tables).
        evidence: one sentence per part, with its verdict and numbers.
        notes: figures shown beside the claim and not judged (the policy gain ratio).
    """

    name: str
    verdict: str
    holds: bool
    evidence: list[str]
    notes: list[str]


def paper_claims(table: Mapping[str, Any]) -> list[Claim]:
    """The paper's three effects, as far as the table's methods allow:

    (a) **learning works**: ltla beats rnd-actions on avg and adv (paired 95 % interval above
    zero); its policy gain ratio on avg is printed beside the paper's, not judged (the paper
    claims the ordering, not a ratio);
    (b) **<sidekick> beats ltla**, for every row of role ``"sidekick"`` (ours(rew), ours(demo),
    a plugin's): it beats ltla on avg and adv (paired 95 % interval above zero);
    (c) **<sidekick> learns faster than ltla**, for each: it reaches ltla's final validation
    error in fewer epochs than ltla itself — the paired difference of the epochs (per seed;
    "never" counts as one epoch past the run) has its 95 % interval above zero across seeds
    (with one seed: fewer epochs) — and their validation curves lie below ltla's (the paired
    gap of the mean validation error over the epochs has its interval above zero too).

    Each part is judged by :func:`verdict_of` its interval; a part not resolved across seeds
    says how many seeds its observed spread would need (:func:`seeds_needed`). With one seed
    the intervals are across test samples only, and the evidence says so.
    """
    rows = {row["method"]: row for row in table["rows"]}
    claims = []
    if {"ltla", RANDOM} <= set(rows):
        parts = [_gap_part(rows["ltla"], RANDOM, metric) for metric in METRICS]
        ratio = rows["ltla"]["policy_gain_ratio"][GAIN_RATIO_METRIC]
        note = (
            f"ltla's policy gain ratio on {GAIN_RATIO_METRIC} is {_ratio_text(ratio)} "
            f"({PAPER_GAIN_RATIOS}; shown, not judged)"
        )
        claims.append(_claim("learning works", parts, [note]))
    sidekicks = sidekick_rows(rows)
    if "ltla" in rows:
        # Each sidekick on its own: one sidekick's open claim must not hide the other's result.
        for name in sidekicks:
            parts = [_gap_part(rows[name], "ltla", metric) for metric in METRICS]
            claims.append(_claim(f"{name} beats ltla", parts))
        for name in sidekicks:
            part = _speed_part(rows[name], rows["ltla"])
            if part is not None:
                claims.append(_claim(f"{name} learns faster than ltla", [part]))
    return claims


def _claim(name: str, parts: list[tuple[str, str]], notes: list[str] | None = None) -> Claim:
    verdicts = [verdict for verdict, _ in parts]
    if CONTRADICTED in verdicts:
        verdict = CONTRADICTED
    elif all(v == HOLDS for v in verdicts):
        verdict = HOLDS
    else:
        verdict = NOT_RESOLVED
    return Claim(name, verdict, verdict == HOLDS, [text for _, text in parts], notes or [])


def _needs(needed: int | None) -> str:
    """What a claim not resolved across seeds would need."""
    if needed is None:
        return ""
    return f"; the observed seed spread needs ≈ {needed} seeds for 90% power"


def _ratio_text(ratio: float | None) -> str:
    return "undefined (rnd-actions did not beat one-view)" if ratio is None else f"{ratio:.2f}"


def _gap_part(row: Mapping[str, Any], reference: str, metric: str) -> tuple[str, str]:
    entry = row["paired"][reference][metric]
    lo, hi = entry["ci95_x1000"]
    verdict = verdict_of(lo, hi)
    where = "across seeds" if entry["kind"] == "seeds" else "across test samples, one seed"
    interval = "" if lo is None else f", 95% CI [{lo:+.2f}, {hi:+.2f}]"
    needed = _needs(seeds_needed(entry)) if verdict == NOT_RESOLVED else ""
    return verdict, (
        f"{row['method']} beats {reference} on {metric}: {verdict}; gap "
        f"{entry['diff_x1000']:+.2f} ×1000{interval} ({where}, {entry['n_seeds']} "
        f"seed{'s' if entry['n_seeds'] > 1 else ''}){needed}"
    )


def _speed_part(row: Mapping[str, Any], ltla: Mapping[str, Any]) -> tuple[str, str] | None:
    mine, theirs = row.get("learning"), ltla.get("learning")
    if not mine or not theirs or "epochs_to_reference" not in mine:
        return None
    never = mine["epochs"] + 1  # not reached within the run: counted as one epoch after it
    own = [never if e is None else e for e in mine["epochs_to_reference"]]
    ref = [never if e is None else e for e in theirs["epochs_to_reference"]]
    sooner = paired_seeds([b - a for a, b in zip(own, ref, strict=True)])
    lo, hi = sooner.ci95_x1000  # plain epochs here: paired_seeds does not rescale
    if len(own) > 1:
        epochs_verdict = verdict_of(lo, hi)
        gap = f"{sooner.diff_x1000:+.2f} epochs sooner, 95% CI [{lo:+.2f}, {hi:+.2f}] across seeds"
    else:
        epochs_verdict = NOT_RESOLVED  # one seed: the training noise is not measured
        gap = f"{sooner.diff_x1000:+.0f} epochs sooner (one seed)"
    shown = ", ".join(_epoch(e) for e in mine["epochs_to_reference"])
    versus = mine.get("auc_vs_reference") or {}
    a_lo, a_hi = versus.get("ci95_x1000", [None, None])
    # Whole epochs can agree exactly across a few seeds (a zero-width interval): the curve's
    # area, a continuous measure, must be lower too; either measure against the claim
    # contradicts it.
    area_verdict = verdict_of(a_lo, a_hi)
    verdicts = {epochs_verdict, area_verdict}
    if CONTRADICTED in verdicts:
        verdict = CONTRADICTED
    elif verdicts == {HOLDS}:
        verdict = HOLDS
    else:
        verdict = NOT_RESOLVED
    needed = ""
    if verdict == NOT_RESOLVED and len(own) > 1:
        # The seeds each open measure needs; none said when one cannot be powered (no gap).
        epochs_entry = {
            "diff_x1000": sooner.diff_x1000, "se_x1000": sooner.se_x1000, "n_seeds": len(own)
        }  # fmt: skip
        open_entries = [epochs_entry] if epochs_verdict == NOT_RESOLVED else []
        if area_verdict == NOT_RESOLVED and versus:
            open_entries.append({**versus, "n_seeds": len(own)})
        counts = [seeds_needed(entry) for entry in open_entries]
        if counts and None not in counts:
            needed = _needs(max(c for c in counts if c is not None))
    area = (
        f"; mean validation error over epochs {versus['diff_x1000']:+.2f} ×1000 below ltla's"
        + ("" if a_lo is None else f" (95% CI [{a_lo:+.2f}, {a_hi:+.2f}])")
        if versus
        else ""
    )
    return verdict, (
        f"{row['method']} learns faster than ltla: {verdict}; it reaches ltla's final "
        f"validation error at epoch {shown} (per seed) against ltla's "
        f"{', '.join(_epoch(e) for e in theirs['epochs_to_reference'])}: {gap}{area}{needed}"
    )


def _table_runs(table: Mapping[str, Any], out_dir: Path) -> list[tuple[Path, int]]:
    """The table's seeds (tables before ``seed_runs``: ``out_dir``'s first K)."""
    if "seed_runs" in table:
        return [
            (out_dir if folder == "." else Path(folder), int(k)) for folder, k in table["seed_runs"]
        ]
    trained = [row["seeds"] for row in table["rows"] if row["method"] != ONE_VIEW]
    return seed_runs(out_dir, trained[0] if trained else 1)


def write_report(
    out_dir: Path,
    table: Mapping[str, Any],
    test: torch.Tensor,
    *,
    channel_mean: Sequence[float],
    nms: tuple[int, int] = (4, 1),
    device: str = "auto",
    examples: int = 2,
    spec: GridSpec | None = None,
    log: Callable[[str], None] | None = None,
) -> Path:
    """Draw the figures and write ``out_dir/index.html`` (one page, relative links to PNGs).

    Figures (:mod:`pyskick.viz`): ``curves.png`` (validation error of every trained method,
    the mean over its seeds with a band of ± one standard error); per method
    ``figures/<method>/`` (episodes, their animations ``*_episode.gif`` and policy heatmaps of
    seed 0 on ``examples`` test viewgrids); ``figures/sidekick-maps/`` (the reward and coverage
    maps the sidekicks derive from the one-view model on the first ``examples`` test
    viewgrids). A folder is redrawn only when its run's ``best.pt`` changed. Without matplotlib
    the page says so and shows the table alone.

    Args:
        out_dir: the reproduce folder.
        table: :func:`build_table`'s output.
        test: ``[n, N, M, C, H, W]`` uint8 test viewgrids.
        channel_mean: the dataset's per-channel mean (0–255).
        nms: the reward sidekick's (peaks, radius) for this dataset.
        device: where the policies run for the figures.
        examples: example viewgrids per method.
        spec: the dataset's geometry, for actors that need it to replay (``demo-actions``).
        log: progress lines.
    """
    from pyskick.distributed import resolve_device

    say = log or (lambda _line: None)
    methods = [row["method"] for row in table["rows"]]
    figures: dict[str, list[Path] | str] = {}
    curves: Path | None = None
    try:
        from pyskick.viz import draw_sidekick_maps, plot_learning_curves, visualize_run

        trained = {
            row["method"]: [
                run_dir(Path(f), row["method"], k) for f, k in _table_runs(table, out_dir)
            ]
            for row in table["rows"]
            if row["method"] != ONE_VIEW
        }
        if trained:
            curves = plot_learning_curves(trained, out_dir / "curves.png")
        device = resolve_device(device).type
        for method in methods:
            say(f"reproduce: figures of {method}")
            first_folder, first_seed = _table_runs(table, out_dir)[0]
            run = (
                run_dir(out_dir, ONE_VIEW, 0)
                if method == ONE_VIEW
                else run_dir(Path(first_folder), method, first_seed)
            )
            figures[method] = _cached_figures(
                out_dir / "figures" / method,
                run,
                lambda folder, run=run: visualize_run(
                    run, test, channel_mean=channel_mean, out_dir=folder, examples=examples,
                    device=device, spec=spec, animations=("gif",),
                ),
            )  # fmt: skip
        say("reproduce: sidekick maps")
        one_view = run_dir(out_dir, ONE_VIEW, 0)
        count = min(examples, test.shape[0])
        figures[SIDEKICK_MAPS] = _cached_figures(
            out_dir / "figures" / "sidekick-maps",
            one_view,
            lambda folder: draw_sidekick_maps(
                one_view, test[:count], channel_mean=channel_mean, out_dir=folder,
                names=[f"test{i}" for i in range(count)], nms=nms, device=device,
            ),
        )  # fmt: skip
        unavailable = None
    except ImportError as exc:
        unavailable = f"figures need matplotlib (pip install 'pyskick[viz]'): {exc}"
    page = _html(table, ordering_checks(table), curves, figures, unavailable, out_dir)
    return write_text(out_dir / "index.html", page)


SIDEKICK_MAPS = "sidekick maps"
"""Title of the report section of the sidekicks' maps."""


def _cached_figures(
    folder: Path, run: Path, draw: Callable[[Path], list[Path]]
) -> list[Path] | str:
    """``draw(folder)``'s files, redrawn only when ``run``'s ``best.pt`` changed; or why there
    are none (a ValueError of the drawing, e.g. an actor the figures cannot replay)."""
    from pyskick.run_dir import checkpoint_digest

    record = folder / "figures.json"
    digest = checkpoint_digest(run)
    if record.is_file():
        saved = json.loads(record.read_text())
        # A failure is retried (it is quick, and may have been fixed since).
        if saved.get("checkpoint_sha256") == digest and not saved.get("reason"):
            return [folder / name for name in saved["files"]]
    try:
        paths = draw(folder)
        payload: dict[str, Any] = {"files": [p.name for p in paths]}
        result: list[Path] | str = paths
    except ValueError as exc:
        payload = {"files": [], "reason": str(exc)}
        result = str(exc)
    write_json(record, {"checkpoint_sha256": digest, **payload})
    return result


def _html(
    table: Mapping[str, Any],
    checks: list[OrderingCheck],
    curves: Path | None,
    figures: Mapping[str, list[Path] | str],
    unavailable: str | None,
    out_dir: Path,
) -> str:
    esc = html.escape
    settings = table["settings"]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>pyskick reproduce: Table 1</title>',
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:3px 8px;"
        "text-align:right}td:first-child{text-align:left}img{max-width:100%}"
        ".fail{color:#a00}.open{color:#850}</style></head><body>",
        "<h1>Table 1 reproduction</h1>",
        "<p>"
        + ", ".join(f"{esc(str(k))}: <code>{esc(str(v))}</code>" for k, v in settings.items())
        + "</p>",
        f"<h2>Reconstruction error ×1000 on the {esc(settings.get('eval_split', 'test'))} split "
        f"(lower is better)</h2><p>{esc(STDERR_NOTE)} Gain "
        f"ratio: % better than one-view ÷ rnd-actions' ({esc(PAPER_GAIN_RATIOS)}).</p>",
        "<table><tr>" + "".join(f"<th>{esc(cell)}</th>" for cell in _table_header()) + "</tr>",
    ]
    for row in table["rows"]:
        cells = [row["method"], str(row["seeds"])]
        for metric in METRICS:
            cells += _cells(row[metric])
        cells.append(_ratio_cell(row.get("policy_gain_ratio")))
        parts.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
    parts.append("</table>")
    parts += _html_table("Paired gaps", PAIRED_NOTE, _paired_lines(table))
    if table.get("claims"):
        parts.append(
            "<h2>The paper's effects</h2><p>Judged by paired 95% intervals (across seeds with "
            "several seeds).</p><ul>"
        )
        for claim in table["claims"]:
            state = claim_verdict(claim)
            cls = {HOLDS: "", CONTRADICTED: ' class="fail"'}.get(state, ' class="open"')
            lines = [*claim["evidence"], *claim.get("notes", [])]
            items = "".join(f"<li>{esc(text)}</li>" for text in lines)
            parts.append(f"<li{cls}><b>{esc(claim['name'])}: {state}</b><ul>{items}</ul></li>")
        parts.append("</ul>")
    parts += _html_table("Learning speed", LEARNING_NOTE, _learning_lines(table))
    parts.append(
        "<h2>Does the paper's ordering hold?</h2><p>The paper finds one-view worst, the "
        "learned policies better than random motions and the sidekick methods better than "
        "ltla. Each claim is judged by its paired gap: it <b>holds</b> when the 95% interval "
        "is above zero, is <b>contradicted</b> when it is below, and is <b>not resolved</b> "
        "when it contains zero (with the seeds the observed spread would need for 90% power). "
        "With several seeds the interval is across seeds (training noise included); with one "
        "seed it is across test samples only.</p><ul>"
    )
    for check in checks:
        cls = ' class="fail"' if check.verdict == CONTRADICTED else ""
        lo, hi = check.ci95_x1000
        interval = "" if lo is None else f", 95% CI [{lo:.2f}, {hi:.2f}], p = {check.p:.2g}"
        parts.append(
            f"<li{cls}>{check.metric}: {esc(check.better)} better than {esc(check.worse)}: "
            f"<b>{check.verdict}</b> (gap {check.gap_x1000:+.2f}{interval}; across "
            f"{check.kind}, {check.n_seeds} seed{'s' if check.n_seeds > 1 else ''}"
            f"{_needs(check.seeds_needed)})</li>"
        )
    parts.append("</ul>")
    if unavailable is not None:
        parts.append(f"<p>{esc(unavailable)}</p>")
    if curves is not None:
        parts.append(
            "<h2>Learning curves</h2><p>Validation error of each trained method: the mean over "
            "its seeds, with a band of ± one standard error across seeds.</p>"
            f'<img src="{quote(curves.relative_to(out_dir).as_posix())}" alt="learning curves">'
        )
    if figures:
        parts.append(
            "<h2>Examples</h2><p>Seed 0 of each method on test viewgrids: reconstructions "
            "after each glimpse and, for learned actors, the policy heatmaps (Eq. 10). "
            "The sidekick maps are what the sidekicks compute with full observability from "
            "the one-view model: one-view scores and NMS reward maps (rew), coverage (demo).</p>"
        )
    for method, files in figures.items():
        parts.append(f"<h3>{esc(method)}</h3>")
        if isinstance(files, str):
            parts.append(f"<p>No figures: {esc(files)}</p>")
            continue
        for path in files:
            link = quote(path.relative_to(out_dir).as_posix())
            parts.append(f'<p><img src="{link}" alt="{esc(path.name)}"></p>')
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
