"""More seeds later: `reproduce --seed-offset` and `pyskick pool` over folders of the same
settings, with real (tiny) reproduce runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from pyskick.evaluation.compare import compare_errors
from pyskick.experiments.table import load_run_errors
from pyskick_cli.main import main

TINY = [
    *("--preset", "cpu-demo", "--epochs", "2", "--pretrain-epochs", "1", "--batch-size", "8"),
    *("--methods", "rnd-actions,ltla", "--device", "cpu", "--no-report", "--seeds", "2"),
]


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


@pytest.fixture
def two_folders(scenes: Path, tmp_path: Path, capsys) -> tuple[Path, Path]:
    """Seeds 0-1 in one folder, seeds 2-3 in another (the same settings)."""
    first, second = tmp_path / "first", tmp_path / "second"
    for out, offset in ((first, "0"), (second, "2")):
        args = ["reproduce", "--dataset", str(scenes), "--out", str(out), *TINY]
        code, _, err = run([*args, "--seed-offset", offset], capsys)
        assert code == 0, err
    return first, second


def test_seed_offset_trains_the_seeds_after_it(two_folders: tuple[Path, Path]) -> None:
    first, second = two_folders
    assert sorted(p.name for p in (second / "ltla").iterdir()) == ["seed-2", "seed-3"]
    table = json.loads((second / "table.json").read_text())
    assert table["seed_runs"] == [[".", 2], [".", 3]]
    config = json.loads((second / "ltla" / "seed-3" / "config.json").read_text())
    assert config["seed"] == json.loads((first / "reproduce.json").read_text())["seed"] + 3
    # A folder moved elsewhere keeps its table's seeds (relative to the folder).
    moved = first.parent / "moved"
    shutil.copytree(second, moved)
    assert json.loads((moved / "table.json").read_text())["seed_runs"][0] == [".", 2]


def test_pool_judges_the_claims_over_every_seed(
    two_folders: tuple[Path, Path], tmp_path: Path, capsys
) -> None:
    first, second = two_folders
    out = tmp_path / "pooled"
    code, stdout, err = run(["pool", str(first), str(second), "--out", str(out)], capsys)
    assert code == 0, err
    assert "pool: 4 seeds of 2 folders" in err
    assert stdout.startswith("| method | seeds | avg ×1000 |")
    table = json.loads((out / "table.json").read_text())
    assert table["settings"]["pooled"] == [str(first), str(second)]
    assert [row["seeds"] for row in table["rows"]] == [1, 4, 4]
    assert table["seed_runs"] == [
        [str(first.resolve()), 0], [str(first.resolve()), 1],
        [str(second.resolve()), 2], [str(second.resolve()), 3],
    ]  # fmt: skip
    runs = [(first, 0), (first, 1), (second, 2), (second, 3)]
    expected = compare_errors(
        load_run_errors(runs, "rnd-actions", "adv"), load_run_errors(runs, "ltla", "adv"),
        metric="adv",
    )  # fmt: skip
    entry = table["rows"][2]["paired"]["rnd-actions"]["adv"]
    assert entry["n_seeds"] == 4
    assert entry["seed_diffs_x1000"] == pytest.approx(list(expected.seed_diffs_x1000))
    # Each folder's own seed differences, side by side.
    own = [json.loads((f / "table.json").read_text())["rows"][2] for f in (first, second)]
    per_folder = [d for row in own for d in row["paired"]["rnd-actions"]["adv"]["seed_diffs_x1000"]]
    assert entry["seed_diffs_x1000"] == pytest.approx(per_folder)
    assert table["rows"][2]["learning"]["epochs"] == 2
    assert len(table["rows"][2]["learning"]["seed_auc_x1000"]) == 4
    assert {claim["name"] for claim in table["claims"]} == {"learning works"}
    assert torch.isfinite(torch.tensor(entry["seed_diffs_x1000"])).all()


def test_pool_refuses_before_writing(
    two_folders: tuple[Path, Path], scenes: Path, tmp_path: Path, capsys
) -> None:
    first, second = two_folders
    out = tmp_path / "pooled"
    # The same seeds twice would fake a replication.
    copy = tmp_path / "copy"
    shutil.copytree(first, copy)
    code, _, err = run(["pool", str(first), str(copy), "--out", str(out)], capsys)
    assert code == 2
    assert f"pool: {first} and {copy} both hold seed 0" in err
    # Other settings (here: epochs) do not pool.
    other = tmp_path / "other"
    args = ["reproduce", "--dataset", str(scenes), "--out", str(other), *TINY]
    args[args.index("--epochs") + 1] = "1"
    code, _, err = run([*args, "--seed-offset", "4"], capsys)
    assert code == 0, err
    code, _, err = run(["pool", str(first), str(other), "--out", str(out)], capsys)
    assert code == 2
    assert f"pool: {other} was run with other settings than {first} (epochs" in err
    for bad, message in (
        ([str(first)], "at least two reproduce folders"),
        ([str(first), str(second), "--out", str(first)], "is one of the pooled folders"),
        ([str(first), str(tmp_path)], "is not a finished reproduce folder"),
    ):
        args = ["pool", *bad] if "--out" in bad else ["pool", *bad, "--out", str(out)]
        code, _, err = run(args, capsys)
        assert code == 2, err
        assert message in err
    code, _, err = run(["pool", str(first), str(second), "--out", str(other)], capsys)
    assert code == 2
    assert "is a reproduce folder" in err
    assert not out.exists()
    # A folder pool did not make (here one holding the user's own plan.json) is not touched.
    study = tmp_path / "study"
    study.mkdir()
    (study / "plan.json").write_text('{"mine": true}')
    code, _, err = run(["pool", str(first), str(second), "--out", str(study)], capsys)
    assert code == 2
    assert "is not empty and holds no pooled table" in err
    assert sorted(p.name for p in study.iterdir()) == ["plan.json"]
    assert (study / "plan.json").read_text() == '{"mine": true}'
    (study / "plan.json").unlink()
    (study / "table.md").write_text("my notes")  # a user's table.md is no pool's either
    code, _, err = run(["pool", str(first), str(second), "--out", str(study)], capsys)
    assert code == 2
    assert (study / "table.md").read_text() == "my notes"


def test_pool_rewrites_its_own_folder(two_folders: tuple[Path, Path], tmp_path: Path, capsys):
    first, second = two_folders
    out = tmp_path / "pooled"
    out.mkdir()
    (out / ".table.json.tmp-host-1-ab.json").write_text("{")  # a pool stopped in its first write
    for _ in range(2):
        code, _, err = run(["pool", str(first), str(second), "--out", str(out)], capsys)
        assert code == 0, err
    assert json.loads((out / "table.json").read_text())["settings"]["pooled"]
