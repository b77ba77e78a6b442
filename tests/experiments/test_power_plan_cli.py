"""`pyskick plan` from a real (tiny) pilot on the validation split, then `reproduce --plan`,
`pool` and `demo` judging with it; refusals before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from pyskick.experiments.claims import claim_seed_gaps
from pyskick_cli.main import main

TINY = [
    *("--preset", "cpu-demo", "--epochs", "2", "--pretrain-epochs", "1", "--batch-size", "8"),
    *("--methods", "rnd-actions,ltla,ours(rew)", "--device", "cpu", "--no-report"),
]


def reproduce(scenes: Path, out: Path, *extra: str) -> list[str]:
    return ["reproduce", "--dataset", str(scenes), "--out", str(out), *TINY, *extra]


def main_exit(args: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(args)
    return int(exc.value.code or 0)


@pytest.fixture(scope="module")
def pilot_plan(scenes: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A pilot of 4 seeds (10-13) on the validation split, and its plan (made once)."""
    torch.set_num_threads(1)  # as every test here (module fixtures precede theirs)
    folder = tmp_path_factory.mktemp("pilot")
    pilot, plan = folder / "pilot", folder / "plan.json"
    args = reproduce(scenes, pilot, "--seeds", "4", "--seed-offset", "10", "--eval-split", "val")
    assert main_exit(args) == 0
    assert main_exit(["plan", str(pilot), "--out", str(plan)]) == 0
    return pilot, plan


def test_plan_prints_each_claims_power(pilot_plan, tmp_path: Path, cli_runner):
    pilot, _ = pilot_plan
    again = tmp_path / "again.json"
    code, out, err = cli_runner("plan", str(pilot), "--out", str(again))
    assert code == 0, err
    assert out.startswith("| claim | parts: mean, sd (pilot) | 4 seeds | 8 seeds |")
    assert "| ours(rew) learns faster than ltla | " in out
    assert f"plan: 4 pilot seeds on the val split; written to {again}" in err


def test_plan_replaces_only_a_plan_and_nothing_in_a_pilot_folder(
    pilot_plan, tmp_path: Path, cli_runner
):
    pilot, _ = pilot_plan
    record = (pilot / "reproduce.json").read_bytes()
    data = tmp_path / "scenes-copy.h5"
    data.write_bytes(b"not a plan")
    for out, message in (
        (pilot / "reproduce.json", "is inside the pilot folder"),
        (pilot / "plan.json", "is inside the pilot folder"),
        (data, "exists and is not a power plan"),
        (tmp_path, "is a directory"),  # click refuses it first
    ):
        code, _, err = cli_runner("plan", str(pilot), "--out", str(out))
        assert code == 2, err
        assert message in err
    assert (pilot / "reproduce.json").read_bytes() == record
    assert not (pilot / "plan.json").exists()
    assert data.read_bytes() == b"not a plan"
    again = tmp_path / "again.json"
    for _ in range(2):  # a plan is replaced by the new one
        code, _, err = cli_runner("plan", str(pilot), "--out", str(again))
        assert code == 0, err


def test_the_plan_holds_the_pilots_gaps_as_the_table_judges_them(pilot_plan):
    pilot, plan = pilot_plan
    written = json.loads(plan.read_text())
    assert written["pilot"] == {"folders": [str(pilot)], "seeds": 4, "eval_split": "val"}
    assert "dataset" not in written["settings"]  # where the pilot's data lay is not the design
    table = json.loads((pilot / "table.json").read_text())
    assert written["seed_gaps"] == claim_seed_gaps(table)
    rows = {row["method"]: row for row in table["rows"]}
    # Each part's mean is the gap the claim is judged by, in the claim's direction.
    for name, reference in (("learning works", "rnd-actions"), ("ours(rew) beats ltla", "ltla")):
        method = "ltla" if reference == "rnd-actions" else "ours(rew)"
        for part, metric in zip(written["seed_gaps"][name], ("avg", "adv"), strict=True):
            entry = rows[method]["paired"][reference][metric]
            assert sum(part) / len(part) == pytest.approx(entry["diff_x1000"])
    sooner, area = written["seed_gaps"]["ours(rew) learns faster than ltla"]
    auc = rows["ours(rew)"]["learning"]["auc_vs_reference"]
    assert sum(area) / len(area) == pytest.approx(auc["diff_x1000"])
    claim = next(c for c in table["claims"] if c["name"] == "ours(rew) learns faster than ltla")
    assert f"{sum(sooner) / len(sooner):+.2f} epochs sooner" in claim["evidence"][0]


def test_a_plan_judges_reproduce_and_pool(pilot_plan, scenes: Path, tmp_path: Path, cli_runner):
    _, plan = pilot_plan
    first, second = tmp_path / "first", tmp_path / "second"
    code, out, err = cli_runner(*reproduce(scenes, first, "--seeds", "2"), "--plan", str(plan))
    assert code == 0, err
    assert (first / "plan.json").read_bytes() == plan.read_bytes()
    table = json.loads((first / "table.json").read_text())
    assert table["plan"]["applied"] is True
    assert table["plan"]["same_data"] is True
    needed = json.loads(plan.read_text())["seeds_needed"]
    for claim in table["claims"]:
        assert 0.0 <= claim["planned_power"] <= 1.0
        assert claim["notes"][-1].startswith("power plan (4 pilot seeds on val): ")
        assert claim["plan_seeds_needed"] == needed[claim["name"]]
        under = needed[claim["name"]] is None or needed[claim["name"]] > 2
        assert claim["under_powered"] is under
    assert (
        "The paper's effects (paired 95% intervals; power plan of 4 pilot seeds: below 90% "
        "power, not resolved at this budget):"
    ) in out
    # A rerun without --plan keeps the folder's copy.
    code, _, err = cli_runner(*reproduce(scenes, first, "--seeds", "2"))
    assert code == 0, err
    assert json.loads((first / "table.json").read_text())["claims"] == table["claims"]
    # Pooled folders that hold the same plan are judged with it, at the pooled seeds.
    args = [*reproduce(scenes, second, "--seeds", "2", "--seed-offset", "2"), "--plan", str(plan)]
    code, _, err = cli_runner(*args)
    assert code == 0, err
    pooled = tmp_path / "pooled"
    code, _, err = cli_runner("pool", str(first), str(second), "--out", str(pooled))
    assert code == 0, err
    pooled_claim = json.loads((pooled / "table.json").read_text())["claims"][0]
    assert " at 4 seeds; " in pooled_claim["notes"][-1]
    assert (pooled / "plan.json").read_bytes() == plan.read_bytes()
    # Without a shared plan the pooled table is judged by its intervals alone.
    (second / "plan.json").unlink()
    code, _, err = cli_runner("pool", str(first), str(second), "--out", str(pooled))
    assert code == 0, err
    claims = json.loads((pooled / "table.json").read_text())["claims"]
    assert {c["planned_power"] for c in claims} == {None}
    assert not (pooled / "plan.json").exists()


def test_an_under_powered_claim_is_not_resolved_whatever_its_intervals(
    pilot_plan, scenes: Path, tmp_path: Path, cli_runner
):
    _, plan = pilot_plan
    # The same pilot, but with gaps a tenth of their spread: no claim is powered at 2 seeds.
    weak = json.loads(plan.read_text())
    for name, parts in weak["seed_gaps"].items():
        weak["seed_gaps"][name] = [[0.1 * (-1) ** i + 0.01 for i in range(8)] for _ in parts]
        weak["seeds_needed"][name] = None
    weak_plan = tmp_path / "weak.json"
    weak_plan.write_text(json.dumps(weak))
    out_dir = tmp_path / "judged"
    args = [*reproduce(scenes, out_dir, "--seeds", "2"), "--plan", str(weak_plan)]
    code, out, err = cli_runner(*args)
    assert code == 0, err
    claims = json.loads((out_dir / "table.json").read_text())["claims"]
    for claim in claims:
        assert claim["under_powered"]
        assert claim["verdict"] == (
            "contradicted" if claim["interval_verdict"] == "contradicted" else "not resolved"
        )
        assert f"**{claim['name']}: " in out
        if claim["interval_verdict"] == "contradicted":
            assert claim["notes"][-1].endswith("its intervals say contradicted")
        else:
            assert f"**{claim['name']}: not resolved at this budget (needs more than 256 " in out
            assert claim["notes"][-1].endswith(
                "under-powered at this budget, so not judged: its intervals alone say "
                f"{claim['interval_verdict']}"
            ) or (claim["interval_verdict"] == "not resolved")


def test_plans_are_refused_before_anything_is_written(
    pilot_plan, scenes: Path, tmp_path: Path, cli_runner
):
    _, plan = pilot_plan
    # A plan judges only tables of its pilot's design.
    other = tmp_path / "other"
    args = reproduce(scenes, other, "--seeds", "2", "--plan", str(plan))
    args[args.index("--epochs") + 1] = "1"
    code, _, err = cli_runner(*args)
    assert code == 2
    assert f"power plan {plan} was made for other settings (epochs)" in err
    assert not other.exists()
    # A pilot runs on the validation split.
    judged = tmp_path / "judged"
    code, _, err = cli_runner(*reproduce(scenes, judged, "--seeds", "2"))
    assert code == 0, err
    code, _, err = cli_runner("plan", str(judged), "--out", str(tmp_path / "p2.json"))
    assert code == 2
    assert "was evaluated on the test split; a pilot runs on the validation split" in err
    assert not (tmp_path / "p2.json").exists()
    # A damaged plan is named.
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "pyskick power plan", "version": 1}')
    args = [*reproduce(scenes, tmp_path / "x", "--seeds", "2"), "--plan", str(bad)]
    code, _, err = cli_runner(*args)
    assert code == 2
    assert f"power plan {bad} is damaged" in err
    assert not (tmp_path / "x").exists()
    # pool: a damaged plan, a plan of other settings.
    second = tmp_path / "second"
    code, _, err = cli_runner(*reproduce(scenes, second, "--seeds", "2", "--seed-offset", "2"))
    assert code == 0, err
    pooled = tmp_path / "pooled"
    longer = json.loads(plan.read_text())
    longer["settings"]["epochs"] = 3
    other_plan = tmp_path / "longer.json"
    other_plan.write_text(json.dumps(longer))
    for given, message in ((bad, "is damaged"), (other_plan, "made for other settings (epochs)")):
        args = ["pool", str(judged), str(second), "--out", str(pooled), "--plan", str(given)]
        code, _, err = cli_runner(*args)
        assert code == 2
        assert message in err
        assert not pooled.exists()
    # The demo refuses a plan of other settings, or --plan with --no-plan, before making data.
    demo = tmp_path / "demo"
    for extra, message in (
        (["--plan", str(plan)], f"power plan {plan} was made for other settings (batch_size,"),
        (["--plan", str(plan), "--no-plan"], "give --plan or --no-plan, not both"),
    ):
        code, _, err = cli_runner("demo", "--out", str(demo), "--num", "40", *extra)
        assert code == 2
        assert message in err
        assert not demo.exists()
