"""`pyskick compare`: run folders evaluated by `pyskick evaluate`, evaluation files and
reproduce folders, paired sample by sample and seed by seed; refusals exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from pyskick.data.builtin import make_builtin
from pyskick.evaluation.compare import compare_errors
from pyskick.evaluation.evaluate import EvalResult
from pyskick.evaluation.stats import summarize
from pyskick.experiments.layout import SETTINGS_FILE, eval_path
from pyskick_cli.main import main


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


@pytest.fixture(autouse=True)
def _one_thread(one_thread: None) -> None:
    """Every test here on one thread (``one_thread``, pyskick.testing)."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A one-view run and an ltla run (one epoch each) on 24 scenes, and the data file."""
    root = tmp_path_factory.mktemp("compare")
    dataset = make_builtin("synthetic-scenes", root / "s.h5", 24, 3)
    fast = ["--dataset", str(dataset), "--preset", "cpu-demo", "--batch-size", "8", "--epochs",
            "1", "--device", "cpu"]  # fmt: skip
    one, ltla = root / "one", root / "ltla"
    for args in (["pretrain", *fast, "--out", str(one)],
                 ["train", *fast, "--init", str(one), "--out", str(ltla)]):  # fmt: skip
        with pytest.raises(SystemExit) as exc:
            main(args)
        assert exc.value.code in (0, None)
    return one, ltla, dataset


def test_run_folders_are_compared_paired(
    runs: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    one, ltla, _ = runs
    for folder in (one, ltla):
        code, _, err = run(["evaluate", str(folder), "--metric", "avg", "--device", "cpu"], capsys)
        assert code == 0, err
    (record,) = (ltla / "eval").glob("test-avg-*.npz")
    (base,) = (one / "eval").glob("test-avg-*.npz")
    code, out, err = run(["compare", str(one), str(ltla), "--json"], capsys)
    assert code == 0, err
    payload = json.loads(out)
    assert set(payload["metrics"]) == {"avg"}  # adv was not evaluated: --metric all skips it
    entry = payload["metrics"]["avg"]
    a = torch.from_numpy(np.load(base)["per_sample"])
    b = torch.from_numpy(np.load(record)["per_sample"])
    expected = compare_errors(a, b, metric="avg")
    assert entry["kind"] == "samples"
    assert entry["n_seeds"] == 1
    assert entry["n_samples"] == a.numel() == 2  # 24 scenes: 2 test viewgrids
    assert entry["diff_x1000"] == pytest.approx(expected.diff_x1000)
    assert entry["p"] == pytest.approx(expected.p)
    assert "training noise is not measured" in entry["verdict"]
    # The text form says which is A and B and both kinds of standard error.
    code, out, _ = run(["compare", str(one), str(ltla), "--metric", "avg"], capsys)
    assert code == 0
    assert f"A = {one}" in out
    assert "paired SE across samples" in out
    assert "unpaired" in out


def test_refusals_exit_2_with_one_line(
    runs: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    one, ltla, _ = runs
    for folder in (one, ltla):
        assert run(["evaluate", str(folder), "--device", "cpu"], capsys)[0] == 0
    code, _, err = run(["compare", str(one), str(ltla), "--metric", "adv"], capsys)
    assert code == 2
    assert f"has no adv evaluation: run `pyskick evaluate {one} --metric adv`" in err
    assert err.count("\n") == 1
    # Evaluated on another split: not the same samples.
    code, _, err = run(
        ["evaluate", str(ltla), "--split", "val", "--device", "cpu", "--save",
         str(tmp_path / "val.npz")], capsys,
    )  # fmt: skip
    assert code == 0, err
    test_file = next((one / "eval").glob("test-avg-*.npz"))
    code, _, err = run(["compare", str(test_file), str(tmp_path / "val.npz")], capsys)
    assert code == 2
    assert "were evaluated on different test samples" in err
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not an npz")
    code, _, err = run(["compare", str(junk), str(tmp_path / "val.npz")], capsys)
    assert code == 2
    assert "is not a readable evaluation file" in err
    code, _, err = run(["compare", str(tmp_path / "missing"), str(ltla)], capsys)
    assert code == 2
    assert "no such evaluation file, run folder or REPRODUCE_DIR:METHOD" in err


def _save(out: Path, method: str, seed: int, metric: str, errors: torch.Tensor) -> None:
    errors = errors.double()
    EvalResult(
        metric=metric,
        actor="learned",
        T=4,
        starts=torch.arange(2),
        per_start=errors[:, None].repeat(1, 2),
        per_sample=errors,
        summary=summarize(errors),
        samples_sha256="ab" * 32,
    ).save(eval_path(out, method, seed, metric).with_suffix(".npz"))


def test_reproduce_methods_pair_seed_by_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "table"
    folder.mkdir()
    (folder / SETTINGS_FILE).write_text("{}")
    g = torch.Generator().manual_seed(0)
    base = 0.02 + 0.01 * torch.rand(30, generator=g, dtype=torch.float64)
    ltla = [base - 0.001 * k for k in range(3)]
    ours = [row - 0.0005 - 1e-4 * torch.rand(30, generator=g, dtype=torch.float64) for row in ltla]
    for k in range(3):
        for metric in ("avg", "adv"):
            _save(folder, "ltla", k, metric, ltla[k])
            _save(folder, "ours(rew)", k, metric, ours[k])
    _save(folder, "two-seeds", 0, "avg", ltla[0])
    _save(folder, "two-seeds", 1, "avg", ltla[1])
    code, out, err = run(["compare", f"{folder}:ltla", f"{folder}:ours(rew)", "--json"], capsys)
    assert code == 0, err
    entry = json.loads(out)["metrics"]["adv"]
    expected = compare_errors(torch.stack(ltla), torch.stack(ours), metric="adv")
    assert entry["kind"] == "seeds"
    assert entry["n_seeds"] == 3
    assert entry["seed_diffs_x1000"] == pytest.approx(list(expected.seed_diffs_x1000))
    assert entry["ci95_x1000"] == pytest.approx(list(expected.ci95_x1000))
    assert entry["verdict"].startswith(
        f"{folder}:ours(rew) beats {folder}:ltla: holds; {folder}:ours(rew) is better than "
        f"{folder}:ltla"
    )
    assert entry["claim_verdict"] == "holds"
    # A folder of --seed-offset 8 (seeds 8, 9, 10: in seed order, not the names' order).
    offset = tmp_path / "offset"
    offset.mkdir()
    (offset / SETTINGS_FILE).write_text("{}")
    for k in range(3):
        _save(offset, "ltla", 8 + k, "adv", ltla[k])
        _save(offset, "ours(rew)", 8 + k, "adv", ours[k])
    code, out, err = run(
        ["compare", f"{offset}:ltla", f"{offset}:ours(rew)", "--metric", "adv", "--json"], capsys
    )
    assert code == 0, err
    shifted = json.loads(out)["metrics"]["adv"]
    assert shifted["n_seeds"] == 3
    assert shifted["seed_diffs_x1000"] == pytest.approx(list(expected.seed_diffs_x1000))
    # Other seeds do not pair, however many there are.
    code, _, err = run(["compare", f"{folder}:ltla", f"{offset}:ltla", "--metric", "adv"], capsys)
    assert code == 2
    assert err.count("\n") == 1
    assert f"{folder}:ltla and {offset}:ltla hold other seeds (0-2 and 8-10)" in err
    code, _, err = run(["compare", f"{folder}:ltla", f"{folder}:two-seeds", "--metric", "avg"],
                       capsys)  # fmt: skip
    assert code == 2
    assert "seeds do not pair: 3 and 2 runs" in err
    code, _, err = run(["compare", f"{folder}:ltla", f"{folder}:nope"], capsys)
    assert code == 2
    assert "has no avg evaluation of nope (methods: ltla, ours(rew), two-seeds)" in err
    code, _, err = run(["compare", str(folder), f"{folder}:ltla"], capsys)
    assert code == 2
    assert "is a reproduce folder: name a method" in err


def test_stale_and_other_actor_evaluations_are_not_compared(
    runs: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import shutil

    one, ltla, _ = runs
    copy = tmp_path / "ltla"
    shutil.copytree(ltla, copy)
    shutil.rmtree(copy / "eval", ignore_errors=True)
    # Another actor evaluates another method: nothing is recorded in the run folder.
    code, _, err = run(["evaluate", str(copy), "--actor", "random", "--device", "cpu"], capsys)
    assert code == 0, err
    assert not (copy / "eval").exists()
    assert run(["evaluate", str(copy), "--device", "cpu"], capsys)[0] == 0
    assert run(["evaluate", str(one), "--device", "cpu"], capsys)[0] == 0
    assert run(["compare", str(one), str(copy), "--metric", "avg"], capsys)[0] == 0
    # The run's best.pt changes (trained further): its recorded evaluation is stale.
    shutil.copy(copy / "latest.pt", copy / "best.pt")
    (copy / "best.pt").write_bytes((copy / "best.pt").read_bytes() + b"\0")
    code, _, err = run(["compare", str(one), str(copy), "--metric", "avg"], capsys)
    assert code == 2
    assert "evaluated an earlier best.pt" in err
