"""Power plans: a pilot's per-seed gaps, the planned power of each claim at the judged seeds,
and under-powered claims judged "not resolved at this budget" (never hiding a contradiction)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pyskick.errors import UserError
from pyskick.evaluation.power import joint_power, seeds_for_joint_power
from pyskick.experiments.claims import Claim, claim_seed_gaps, verdict_text
from pyskick.experiments.power_plan import (
    PowerPlan,
    apply_plan,
    plan_lines,
    plan_mismatch,
    read_plan,
    write_plan,
)

SETTINGS = {"preset": "cpu-demo", "epochs": 5, "eval_split": "test", "n_test": 80}


def _row(method: str, role: str, paired: dict[str, list[float]], learning: dict | None) -> dict:
    return {
        "method": method,
        "role": role,
        "paired": {
            ref: {metric: {"seed_diffs_x1000": gaps} for metric in ("avg", "adv")}
            for ref, gaps in paired.items()
        },
        "learning": learning,
    }


def _table(rew_gaps: list[float], settings: dict | None = None) -> dict:
    """rnd-actions, ltla and ours(rew): ours(rew)'s paired gaps to ltla are ``rew_gaps`` on
    both metrics; it reaches ltla's final error one epoch sooner on every seed but the last."""
    n = len(rew_gaps)
    ltla_learning = {"epochs": 5, "epochs_to_reference": [5] * n, "seed_auc_x1000": [10.0] * n}
    rew_learning = {
        "epochs": 5,
        "epochs_to_reference": [4] * (n - 1) + [None],
        "seed_auc_x1000": [10.0 - g for g in rew_gaps],
    }
    return {
        "settings": {**SETTINGS, **(settings or {})},
        "rows": [
            _row("one-view", "baseline", {}, None),
            _row("rnd-actions", "reference", {}, {"epochs": 5, "seed_auc_x1000": [12.0] * n}),
            _row("ltla", "reference", {"rnd-actions": [1.5] * n}, ltla_learning),
            _row(
                "ours(rew)", "sidekick", {"rnd-actions": [1.7] * n, "ltla": rew_gaps}, rew_learning
            ),
        ],
    }


def _claim(name: str, verdict: str) -> Claim:
    return Claim(name, verdict, verdict == "holds", [f"{name}: {verdict}"], [])


def _plan(claims: dict[str, list[list[float]]], **settings) -> PowerPlan:
    needed = {name: seeds_for_joint_power(parts) for name, parts in claims.items()}
    pilot = {
        "folders": ["pilot"],
        "seeds": len(next(iter(claims.values()))[0]),
        "eval_split": "val",
    }
    return PowerPlan(claims, needed, {**SETTINGS, "eval_split": "val", **settings}, pilot)


def test_the_claims_per_seed_gaps_are_read_from_the_table():
    gaps = claim_seed_gaps(_table([0.1, 0.3, 0.2]))
    assert list(gaps) == [
        "learning works", "ours(rew) beats ltla", "ours(rew) learns faster than ltla"
    ]  # fmt: skip
    assert gaps["learning works"] == [[1.5] * 3, [1.5] * 3]
    assert gaps["ours(rew) beats ltla"] == [[0.1, 0.3, 0.2], [0.1, 0.3, 0.2]]
    # Epochs sooner ("never" = one past the run: 6) and the area below ltla's.
    sooner, area = gaps["ours(rew) learns faster than ltla"]
    assert sooner == [1.0, 1.0, -1.0]
    assert area == pytest.approx([0.1, 0.3, 0.2])
    # One seed plans nothing.
    assert claim_seed_gaps(_table([0.2])) == {}


def test_an_under_powered_claim_is_not_resolved_at_this_budget():
    pilot_gaps = [0.4, -0.3, 0.5, -0.2, 0.3, 0.1, -0.1, 0.2]  # mean 0.11, sd 0.3: d 0.38
    strong = [1.5, 1.4, 1.6, 1.5, 1.55, 1.45, 1.5, 1.6]
    plan = _plan(
        {"learning works": [strong, strong], "ours(rew) beats ltla": [pilot_gaps, pilot_gaps]}
    )
    table = _table([0.3, 0.35, 0.4, 0.3])  # 4 seeds whose intervals hold
    claims = [
        _claim("learning works", "holds"),
        _claim("ours(rew) beats ltla", "holds"),
        _claim("ours(rew) learns faster than ltla", "not resolved"),
    ]
    learning, beats, faster = apply_plan(claims, table, plan)
    # Planned power at the table's 4 seeds, from the plan's pilot.
    assert learning.planned_power == pytest.approx(joint_power([strong, strong], 4))
    assert learning.verdict == "holds"
    assert not learning.under_powered
    assert beats.planned_power == pytest.approx(joint_power([pilot_gaps, pilot_gaps], 4))
    assert beats.planned_power < 0.2
    assert beats.under_powered
    assert beats.verdict == "not resolved"
    assert not beats.holds
    assert beats.interval_verdict == "holds"
    assert beats.evidence == claims[1].evidence  # the intervals are still shown
    assert beats.notes[-1].startswith("power plan (8 pilot seeds on val): ")
    assert (
        "under-powered at this budget, so not judged: its intervals alone say holds"
        in (beats.notes[-1])
    )
    needed = plan.seeds_needed["ours(rew) beats ltla"]
    assert needed is not None
    assert needed > 40
    assert verdict_text(beats.__dict__) == f"not resolved at this budget (needs ≈ {needed} seeds)"
    assert verdict_text(learning.__dict__) == "holds"
    # A claim the plan does not know is judged by its intervals, and says so.
    assert faster.verdict == "not resolved"
    assert faster.planned_power is None
    assert faster.notes == ["not in the power plan: judged by its intervals alone"]


def test_a_contradiction_is_never_hidden_by_the_plan():
    weak = [0.4, -0.3, 0.5, -0.2, 0.3, 0.1, -0.1, 0.2]
    plan = _plan({"ours(rew) beats ltla": [weak, weak]})
    (claim,) = apply_plan(
        [_claim("ours(rew) beats ltla", "contradicted")], _table([-0.3, -0.4, -0.35]), plan
    )
    assert claim.under_powered
    assert claim.verdict == "contradicted"
    assert verdict_text(claim.__dict__) == "contradicted"
    assert claim.notes[-1].endswith(
        "; under-powered at this budget, and its intervals say contradicted"
    )


def test_one_seed_has_no_power():
    strong = [1.5, 1.4, 1.6, 1.5]
    plan = _plan({"ours(rew) beats ltla": [strong, strong]})
    # One seed: the table has no per-seed gaps, its intervals are across test samples only.
    (claim,) = apply_plan([_claim("ours(rew) beats ltla", "holds")], _table([0.3]), plan)
    assert claim.planned_power == 0.0
    assert claim.under_powered
    assert claim.verdict == "not resolved"
    assert "0% at 1 seed; 90% needs ≈ 2 seeds" in claim.notes[-1]


def test_a_table_of_another_design_is_judged_by_its_intervals_alone():
    strong = [1.5, 1.4, 1.6, 1.5]
    plan = _plan({"ours(rew) beats ltla": [strong, strong]}, epochs=10)
    (claim,) = apply_plan([_claim("ours(rew) beats ltla", "holds")], _table([0.3] * 3), plan)
    assert claim.verdict == "holds"
    assert claim.planned_power is None
    assert claim.notes == [
        "power plan not applied: this table differs from its pilot in epochs; judged by its "
        "intervals alone"
    ]
    # The data's file, the split and its size are not the design.
    other = {"dataset_sha256": "f" * 64, "eval_split": "test", "n_test": 40, "dataset": "x.h5"}
    assert plan_mismatch(plan, {**plan.settings, **other}) == []
    assert plan_mismatch(plan, {**plan.settings, "batch_size": 8}) == ["batch_size"]
    # The options sidekicks resolve exist only once runs do: compared when judging, for the
    # sidekicks both trained (a table of fewer methods is of the same design).
    plan = replace(
        plan,
        settings={
            **plan.settings,
            "resolved_sidekick_options": {"rew": {"k": 4}, "demo": {"hybrid_schedule": 1}},
        },
    )
    other_k = {**plan.settings, "resolved_sidekick_options": {"rew": {"k": 3}}}
    assert plan_mismatch(plan, other_k) == []
    assert plan_mismatch(plan, other_k, include_resolved=True) == ["resolved_sidekick_options"]
    fewer = {**plan.settings, "resolved_sidekick_options": {"rew": {"k": 4}}}
    assert plan_mismatch(plan, fewer, include_resolved=True) == []


def test_a_plan_file_round_trips_and_bad_ones_are_refused(tmp_path: Path):
    gaps = [0.4, -0.3, 0.5, -0.2, 0.3, 0.1, -0.1, 0.2]
    plan = _plan({"ours(rew) beats ltla": [gaps, [2 * g for g in gaps]]})
    written = write_plan(plan, tmp_path / "plan.json")
    read = read_plan(tmp_path / "plan.json")
    assert read == written
    assert read.digest is not None
    assert len(read.digest) == 64
    assert read.power("ours(rew) beats ltla", 16) == plan.power("ours(rew) beats ltla", 16)
    data = json.loads((tmp_path / "plan.json").read_text())
    assert data["parts"]["ours(rew) beats ltla"][0]["mean"] == pytest.approx(sum(gaps) / 8)
    lines = plan_lines(read, seeds=(4, 16))
    assert lines[0] == "| claim | parts: mean, sd (pilot) | 4 seeds | 16 seeds | 90% needs |"
    assert lines[2].startswith("| ours(rew) beats ltla | +0.11, 0.29; +0.23, 0.58 | ")
    for damage, message in (
        ({"format": "other"}, "is not a power plan"),
        ({"seed_gaps": {"ours(rew) beats ltla": [[1.0]]}}, "has no usable pilot gaps"),
        ({"seed_gaps": {"ours(rew) beats ltla": [[1.0, "x"]]}}, "is damaged"),
        ({"seeds_needed": {}}, "is damaged"),
        ({"target_power": 1.5}, "is damaged"),
    ):
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({**data, **damage}))
        with pytest.raises(UserError, match=message):
            read_plan(bad)
    with pytest.raises(UserError, match="does not exist"):
        read_plan(tmp_path / "missing.json")
