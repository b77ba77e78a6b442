"""The paper's claims, judged on a Table 1 (:mod:`pyskick.experiments.table`): the pairwise
ordering checks and the three effects, stated in words with their verdicts.

Rows are selected by role (:data:`pyskick.methods.ROLES`, recorded in each row): every row of
role ``"sidekick"`` (``ours(rew)``, ``ours(demo)``, a plugin's) is checked against ltla and
rnd-actions and gets the claims "<row> beats ltla" and "<row> learns faster than ltla". The
claims name ltla and rnd-actions themselves because they are the paper's claims about those two
rows ("learning works": ltla beats rnd-actions); a claim whose rows are missing from the table,
or are not references there, is left out. Each part is judged by the 95 % interval of a paired
gap (:func:`verdict_of`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyskick.evaluation.compare import paired_seeds
from pyskick.evaluation.power import MAX_PLANNED_SEEDS, seeds_for_power
from pyskick.experiments.layout import eval_split_of
from pyskick.methods import ONE_VIEW
from pyskick.metrics import METRICS

RANDOM = "rnd-actions"
"""The row of random motions: "learning works" when ltla beats it."""
LTLA = "ltla"
"""The look-around policy without a sidekick: what a sidekick row must beat."""


PAPER_GAIN_RATIOS = "paper: ltla 1.83 / ours(rew) 2.03 (SUN360), 1.44 / 1.66 (ModelNet Hard)"


def claim_verdict(claim: Mapping[str, Any]) -> str:
    """A claim's verdict in ``table.json`` (tables before the three verdicts: from ``holds``;
    their "does not hold" could not tell an open claim from a refuted one)."""
    if "verdict" in claim:
        return str(claim["verdict"])
    return HOLDS if claim["holds"] else NOT_RESOLVED


def verdict_text(claim: Mapping[str, Any]) -> str:
    """A claim's verdict in words: an under-powered claim (power plan) is *not resolved at this
    budget*, with the seeds its plan needs."""
    verdict = claim_verdict(claim)
    if verdict != NOT_RESOLVED or not claim.get("under_powered"):
        return verdict
    needed = claim.get("plan_seeds_needed")
    need = f"≈ {needed}" if needed is not None else f"more than {MAX_PLANNED_SEEDS}"
    return f"{verdict} at this budget (needs {need} seeds)"


def epoch_text(epoch: int | None) -> str:
    """An epoch of a learning summary (1-based), or ``never``."""
    return "never" if epoch is None else str(epoch)


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
    pairs = [(name, ONE_VIEW) for name in rows if name != ONE_VIEW and ONE_VIEW in rows]
    ours = sidekick_rows(rows)
    if _is_reference(rows, RANDOM):
        pairs += [(name, RANDOM) for name in ("ltla", *ours) if name in rows]
    if _is_reference(rows, LTLA):
        pairs += [(name, LTLA) for name in ours]
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


LEGACY_ROLES = {"ltla": "reference", "rnd-actions": "reference"}
"""The built-in rows' roles in tables written before rows had the ``reference`` role (which
recorded them as ``"baseline"``, or recorded no role at all)."""


def row_role(row: Mapping[str, Any]) -> str:
    """A table row's role (:data:`pyskick.methods.ROLES`). Tables of earlier versions: ltla and
    rnd-actions are references (:data:`LEGACY_ROLES`), an ``ours(...)`` row without a role a
    sidekick method."""
    name, role = row["method"], row.get("role")
    if role in (None, "baseline") and name in LEGACY_ROLES:
        return LEGACY_ROLES[name]
    if role is None:
        return "sidekick" if name.startswith("ours(") else "baseline"
    return str(role)


def sidekick_rows(rows: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The rows of role ``"sidekick"``, in table order: ``ours(rew)``, ``ours(demo)`` and any
    plugin row registered so."""
    return [name for name, row in rows.items() if row_role(row) == "sidekick"]


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
        notes: figures shown beside the claim and not judged (the policy gain ratio, the
            power plan's figures).
        planned_power: with a power plan (:mod:`pyskick.experiments.power_plan`), the power
            it gives the claim at the table's seeds; else None.
        plan_seeds_needed: the seeds the plan says the claim needs for its target power
            (90 %; None: no plan, or more than the plan searched).
        under_powered: the table has fewer seeds than that: its verdict is *not resolved* at
            this budget unless its intervals contradict it.
        interval_verdict: with a plan, what the claim's intervals alone say.
    """

    name: str
    verdict: str
    holds: bool
    evidence: list[str]
    notes: list[str]
    planned_power: float | None = None
    plan_seeds_needed: int | None = None
    under_powered: bool = False
    interval_verdict: str | None = None


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
    split = eval_split_of(table.get("settings", {}))
    claims = []
    if LTLA in rows and _is_reference(rows, RANDOM):
        parts = [_gap_part(rows["ltla"], RANDOM, metric, split) for metric in METRICS]
        ratio = rows["ltla"]["policy_gain_ratio"][GAIN_RATIO_METRIC]
        note = (
            f"ltla's policy gain ratio on {GAIN_RATIO_METRIC} is {_ratio_text(ratio)} "
            f"({PAPER_GAIN_RATIOS}; shown, not judged)"
        )
        claims.append(_claim("learning works", parts, [note]))
    sidekicks = sidekick_rows(rows)
    if _is_reference(rows, LTLA):
        # Each sidekick on its own: one sidekick's open claim must not hide the other's result.
        for name in sidekicks:
            parts = [_gap_part(rows[name], "ltla", metric, split) for metric in METRICS]
            claims.append(_claim(f"{name} beats ltla", parts))
        for name in sidekicks:
            part = _speed_part(rows[name], rows["ltla"])
            if part is not None:
                claims.append(_claim(f"{name} learns faster than ltla", [part]))
    return claims


def _is_reference(rows: Mapping[str, Mapping[str, Any]], name: str) -> bool:
    """Whether ``name`` is in the table as a reference (the other rows are paired with it)."""
    return name in rows and row_role(rows[name]) == "reference"


def _claim(name: str, parts: list[tuple[str, str]], notes: list[str] | None = None) -> Claim:
    verdicts = [verdict for verdict, _ in parts]
    if CONTRADICTED in verdicts:
        verdict = CONTRADICTED
    elif all(v == HOLDS for v in verdicts):
        verdict = HOLDS
    else:
        verdict = NOT_RESOLVED
    return Claim(name, verdict, verdict == HOLDS, [text for _, text in parts], notes or [])


def needs_text(needed: int | None) -> str:
    """What a claim not resolved across seeds would need."""
    if needed is None:
        return ""
    return f"; the observed seed spread needs ≈ {needed} seeds for 90% power"


def _ratio_text(ratio: float | None) -> str:
    return "undefined (rnd-actions did not beat one-view)" if ratio is None else f"{ratio:.2f}"


def _gap_part(row: Mapping[str, Any], reference: str, metric: str, split: str) -> tuple[str, str]:
    entry = row["paired"][reference][metric]
    lo, hi = entry["ci95_x1000"]
    verdict = verdict_of(lo, hi)
    where = "across seeds" if entry["kind"] == "seeds" else f"across {split} samples, one seed"
    interval = "" if lo is None else f", 95% CI [{lo:+.2f}, {hi:+.2f}]"
    needed = needs_text(seeds_needed(entry)) if verdict == NOT_RESOLVED else ""
    return verdict, (
        f"{row['method']} beats {reference} on {metric}: {verdict}; gap "
        f"{entry['diff_x1000']:+.2f} ×1000{interval} ({where}, {entry['n_seeds']} "
        f"seed{'s' if entry['n_seeds'] > 1 else ''}){needed}"
    )


def epochs_sooner(mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> list[float]:
    """Per seed, how many epochs before ltla (``theirs``) a method (``mine``) reaches ltla's
    final validation error (the rows' ``learning`` summaries); "never" counts as one epoch
    past the run."""
    never = mine["epochs"] + 1
    own = [never if e is None else e for e in mine["epochs_to_reference"]]
    ref = [never if e is None else e for e in theirs["epochs_to_reference"]]
    return [float(b - a) for a, b in zip(own, ref, strict=True)]


def claim_seed_gaps(table: Mapping[str, Any]) -> dict[str, list[list[float]]]:
    """Per claim of :func:`paper_claims`, per part, the per-seed gaps in the claimed direction
    (×1000, or epochs for "sooner"): what a power plan is made of
    (:mod:`pyskick.experiments.power_plan`). Claims whose parts lack per-seed values (one seed,
    tables before per-seed gaps) are left out."""
    rows = {row["method"]: row for row in table["rows"]}
    out: dict[str, list[list[float]]] = {}

    def seed_diffs(row: Mapping[str, Any], reference: str) -> list[list[float]] | None:
        parts = [row["paired"][reference][metric].get("seed_diffs_x1000") for metric in METRICS]
        return None if any(not p or len(p) < 2 for p in parts) else parts

    if LTLA in rows and _is_reference(rows, RANDOM):
        parts = seed_diffs(rows[LTLA], RANDOM)
        if parts:
            out["learning works"] = parts
    if _is_reference(rows, LTLA):
        ltla = rows[LTLA]
        for name in sidekick_rows(rows):
            parts = seed_diffs(rows[name], LTLA)
            if parts:
                out[f"{name} beats ltla"] = parts
        for name in sidekick_rows(rows):
            mine, theirs = rows[name].get("learning"), ltla.get("learning")
            if not mine or not theirs or "seed_auc_x1000" not in mine:
                continue
            sooner = epochs_sooner(mine, theirs)
            area = [
                a - b for a, b in zip(theirs["seed_auc_x1000"], mine["seed_auc_x1000"], strict=True)
            ]
            if len(sooner) > 1:
                out[f"{name} learns faster than ltla"] = [sooner, area]
    return out


def _speed_part(row: Mapping[str, Any], ltla: Mapping[str, Any]) -> tuple[str, str] | None:
    mine, theirs = row.get("learning"), ltla.get("learning")
    if not mine or not theirs or "epochs_to_reference" not in mine:
        return None
    own = mine["epochs_to_reference"]
    sooner = paired_seeds(epochs_sooner(mine, theirs))
    lo, hi = sooner.ci95_x1000  # plain epochs here: paired_seeds does not rescale
    if len(own) > 1:
        epochs_verdict = verdict_of(lo, hi)
        gap = f"{sooner.diff_x1000:+.2f} epochs sooner, 95% CI [{lo:+.2f}, {hi:+.2f}] across seeds"
    else:
        epochs_verdict = NOT_RESOLVED  # one seed: the training noise is not measured
        gap = f"{sooner.diff_x1000:+.0f} epochs sooner (one seed)"
    shown = ", ".join(epoch_text(e) for e in mine["epochs_to_reference"])
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
            needed = needs_text(max(c for c in counts if c is not None))
    area = (
        f"; mean validation error over epochs {versus['diff_x1000']:+.2f} ×1000 below ltla's"
        + ("" if a_lo is None else f" (95% CI [{a_lo:+.2f}, {a_hi:+.2f}])")
        if versus
        else ""
    )
    return verdict, (
        f"{row['method']} learns faster than ltla: {verdict}; it reaches ltla's final "
        f"validation error at epoch {shown} (per seed) against ltla's "
        f"{', '.join(epoch_text(e) for e in theirs['epochs_to_reference'])}: {gap}{area}{needed}"
    )
