"""``pyskick export``: a tiny trained run exported, then used by evaluate, visualize,
``train --init`` and ``--one-view`` like the run itself; the model card; refusals."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from pyskick.checkpoint import EXPORT_MARKER, EXPORT_WEIGHTS, load_checkpoint
from pyskick.data.builtin import make_builtin
from pyskick.experiments.export import CARD, model_card, training_command
from pyskick.files import file_digest
from pyskick.run_dir import checkpoint_digest, checkpoint_file, load_policy
from pyskick_cli.main import main

FAST = ["--preset", "cpu-demo", "--epochs", "1", "--batch-size", "8", "--device", "cpu"]


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def call(args: list[str]) -> None:
    """Run a command that must succeed (module fixtures have no capsys)."""
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert not exc.value.code, args


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A one-view run and an ltla run trained from it (evaluated once: RUN/eval/), on a
    tiny synthetic scenes file."""
    root = tmp_path_factory.mktemp("runs")
    scenes = make_builtin("synthetic-scenes", root / "s.h5", 40, 1)
    one, ltla = root / "one", root / "ltla"
    call(["pretrain", "--dataset", str(scenes), *FAST, "--out", str(one)])
    call(["train", "--dataset", str(scenes), *FAST, "--init", str(one), "--out", str(ltla)])
    call(["evaluate", str(ltla), "--metric", "adv"])
    return {"data": scenes, "one": one, "ltla": ltla}


@pytest.fixture(scope="module")
def exported(runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("exports") / "ltla-export"
    call(["export", str(runs["ltla"]), "--out", str(out)])
    return out


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_export_folder_files(exported: Path, runs: dict[str, Path]) -> None:
    assert sorted(p.name for p in exported.iterdir()) == sorted(
        [EXPORT_WEIGHTS, EXPORT_MARKER, "config.json", "dataset.json", CARD]
    )
    config = json.loads((exported / "config.json").read_text())
    state = load_checkpoint(runs["ltla"] / "best.pt")
    assert config["stage"] == "train"
    assert config["model_config"] == state["model_config"]
    assert {k: v for k, v in config.items() if k not in ("stage", "model_config")} == state[
        "config"
    ]
    dataset = json.loads((exported / "dataset.json").read_text())
    assert dataset["sha256"] == file_digest(runs["data"])
    assert dataset["spec"]["channel_mean"] == [119.16, 107.68, 95.12]
    assert dataset["spec"]["n_elevations"] == 4
    # The weights and their digest, the one score caches key the model by.
    assert checkpoint_file(exported) == exported / EXPORT_WEIGHTS
    assert checkpoint_digest(exported) == file_digest(exported / EXPORT_WEIGHTS)
    marker = json.loads((exported / EXPORT_MARKER).read_text())
    assert marker["weights_sha256"] == file_digest(exported / EXPORT_WEIGHTS)
    assert marker["checkpoint_sha256"] == file_digest(runs["ltla"] / "best.pt")


def test_model_card_has_the_facts(exported: Path, runs: dict[str, Path]) -> None:
    card = (exported / CARD).read_text()
    [recorded] = sorted((runs["ltla"] / "eval").glob("*.npz"))
    with np.load(recorded) as evaluation:
        mean, stderr = float(evaluation["mean_x1000"]), float(evaluation["stderr_x1000"])
    assert card.startswith("# pyskick model: ltla\n")
    assert "pyskick 0.1.0" in card
    assert file_digest(runs["data"]) in card
    assert "`s.h5`" in card
    assert "Channel mean (0-255): 119.16, 107.68, 95.12" in card
    assert (
        "pyskick train --dataset s.h5 --preset cpu-demo --epochs 1 --batch-size 8 --init "
        "ONE_VIEW_RUN --out RUN"
    ) in card
    assert "- Seed: 123\n" in card
    assert "- Epochs: 1 trained of 1; these weights are the best of epoch 1" in card
    assert f"| test | adv | 4 | 4 | learned | {mean:.2f} | {stderr:.2f} |" in card
    # Generated from the folder's JSON files alone: the same export, the same card.
    files = [json.loads((exported / n).read_text()) for n in (EXPORT_MARKER, "config.json")]
    dataset = json.loads((exported / "dataset.json").read_text())
    assert model_card(*files, dataset) == card


def test_export_is_deterministic_and_overwrite_replaces(
    exported: Path, runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    again = tmp_path / "again"
    code, out, err = run(["export", str(runs["ltla"]), "--out", str(again)], capsys)
    assert code == 0, err
    assert out.strip() == str(again)
    assert tree(again) == tree(exported)
    # --overwrite replaces an export (here with the one-view model's), leaving no temporaries.
    code, _, err = run(["export", str(runs["one"]), "--out", str(again), "--overwrite"], capsys)
    assert code == 0, err
    assert json.loads((again / "config.json").read_text())["stage"] == "pretrain"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again"]


def test_unevaluated_run_says_so(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["export", str(runs["one"]), "--out", str(tmp_path / "one")], capsys)
    assert code == 0, err
    card = (tmp_path / "one" / CARD).read_text()
    assert card.startswith("# pyskick model: one-view\n")
    assert "Not evaluated" in card
    assert "| test |" not in card
    assert "pyskick pretrain --dataset s.h5 --preset cpu-demo --epochs 1" in card


def test_evaluate_export_gives_the_runs_errors(
    exported: Path, runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = tree(exported)
    results = {}
    for name, target in (("run", runs["ltla"]), ("export", exported)):
        save = tmp_path / f"{name}.npz"
        code, _, err = run(["evaluate", str(target), "--save", str(save)], capsys)
        assert code == 0, err
        with np.load(save) as data:
            results[name] = (data["per_sample"], data["per_start"])
    assert np.array_equal(results["run"][0], results["export"][0])
    assert np.array_equal(results["run"][1], results["export"][1])
    # An export is shared as it is: evaluating it records nothing in it.
    assert tree(exported) == before
    # Nor does --save write into it: not a new file, not over its model card.
    saves = [
        (exported / "e.npz", []),
        (exported / "sub" / "e.npz", []),
        (exported / CARD, ["--overwrite"]),
    ]
    for save, extra in saves:
        code, _, err = run(["evaluate", str(exported), "--save", str(save), *extra], capsys)
        assert code == 2
        assert err.count("\n") == 1
        assert f"{save} is in the export folder {exported}, which is shared as it is" in err
    assert tree(exported) == before


def test_export_as_init_and_one_view(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], auto_repeat: Any
) -> None:
    one_export = tmp_path / "one-export"
    code, _, err = run(["export", str(runs["one"]), "--out", str(one_export)], capsys)
    assert code == 0, err
    # --init EXPORT trains, with a sidekick that scores with the exported one-view model.
    rew = tmp_path / "rew"
    data = str(runs["data"])
    code, _, err = run(
        ["train", "--dataset", data, *FAST, "--init", str(one_export), "--sidekick", "rew",
         "--out", str(rew)],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    state = load_checkpoint(rew / "latest.pt")
    assert state["init"] == str(one_export.resolve())
    # The frozen modules (Sense, Fuse) keep the exported one-view model's weights.
    one_state = load_checkpoint(runs["one"] / "best.pt")["model"]
    frozen = [
        key
        for key in one_state
        if key.split(".")[0] in state["frozen"] and key.endswith((".weight", ".bias"))
    ]
    assert frozen
    assert all(torch.equal(state["model"][key], one_state[key]) for key in frozen)
    # --one-view EXPORT: the same improvement as against the one-view run.
    reports = []
    for baseline in (runs["one"], one_export):
        code, out, err = run(
            ["evaluate", str(runs["ltla"]), "--one-view", str(baseline), "--json"], capsys
        )
        assert code == 0, err
        reports.append(json.loads(out)["improvement_pct"])
    assert reports[0] == auto_repeat.approx(reports[1])


def test_visualize_export(
    exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        ["visualize", str(exported), "--out", str(tmp_path / "figs"), "--examples", "1",
         "--no-heatmaps"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    assert [Path(line).name for line in out.split()] == ["example0_grid0_episode.png"]


def test_loading_an_export_never_unpickles(
    exported: Path, runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("an export was unpickled")

    monkeypatch.setattr(torch, "load", refuse)
    monkeypatch.setattr(pickle, "Unpickler", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    saved = load_policy(exported)
    monkeypatch.undo()
    reference = load_policy(runs["ltla"])
    assert saved.stage == "train"
    assert saved.T == reference.T
    assert saved.config == reference.config
    assert saved.init is None
    assert saved.spec is not None
    assert saved.spec.channel_mean == (119.16, 107.68, 95.12)
    ours, theirs = saved.policy.state_dict(), reference.policy.state_dict()
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[key], theirs[key]) for key in ours)


def _moved_copy(run_folder: Path, where: Path) -> Path:
    """A copy of a run whose dataset.json names a data file that is not there."""
    copy = where / "moved-run"
    shutil.copytree(run_folder, copy)
    record = json.loads((copy / "dataset.json").read_text())
    record["path"] = str(where / "gone.h5")
    (copy / "dataset.json").write_text(json.dumps(record))
    return copy


def test_moved_data_is_found_with_dataset(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    moved = _moved_copy(runs["one"], tmp_path)
    out = tmp_path / "out"
    code, _, err = run(["export", str(moved), "--out", str(out)], capsys)
    assert code == 2
    assert "which is not here; pass --dataset" in err
    assert not out.exists()
    code, _, err = run(
        ["export", str(moved), "--out", str(out), "--dataset", str(runs["data"])], capsys
    )
    assert code == 0, err
    assert json.loads((out / "dataset.json").read_text())["name"] == "gone.h5"


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("no-best", "has no best.pt"),
        ("exists", "already exists; pass --overwrite"),
        ("overwrite-other", "is not an export folder"),
        ("inside-run", "holds the run"),
        ("an-export", "is an export already"),
        ("other-data", "is not the data"),
        ("no-record", "does not record the data"),
    ],
)
def test_refusals_change_nothing(
    case: str,
    message: str,
    runs: dict[str, Path],
    exported: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source, out, extra = runs["one"], tmp_path / "out", []
    if case == "no-best":
        source = tmp_path / "empty-run"
        source.mkdir()
    elif case == "exists":
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    elif case == "overwrite-other":
        out.mkdir()
        (out / "notes.txt").write_text("mine")
        extra = ["--overwrite"]
    elif case == "inside-run":
        source = tmp_path / "run"
        shutil.copytree(runs["one"], source)
        out, extra = tmp_path, ["--overwrite"]
    elif case == "an-export":
        source = exported
    elif case == "other-data":
        other = make_builtin("synthetic-scenes", tmp_path / "other.h5", 12, 2)
        source, extra = _moved_copy(runs["one"], tmp_path), ["--dataset", str(other)]
    elif case == "no-record":
        source = tmp_path / "bare-run"
        shutil.copytree(runs["one"], source)
        (source / "dataset.json").unlink()
    before = tree(tmp_path)
    code, _, err = run(["export", str(source), "--out", str(out), *extra], capsys)
    assert code == 2, err
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert tree(tmp_path) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_training_command_puts_optionless_fields_in_a_config_file() -> None:
    from pyskick.config import train_preset

    config = {
        "stage": "train",
        **train_preset("paper-sun360")
        .replace(T=6, memorize=True, sidekick="rew", sidekick_options={"decay_every": 5})
        .to_dict(),
    }
    command, toml = training_command(config, "sun360.h5")
    assert command == (
        "pyskick train --dataset sun360.h5 --preset paper-sun360 -T 6 --sidekick rew "
        "--sidekick-option decay_every=5 --config config.toml --init ONE_VIEW_RUN --out RUN"
    )
    assert toml == {"memorize": True}


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        # Verified against the digests the export recorded (issue 25 item 3) ...
        ("weights", "is not the weights this export recorded"),
        ("flipped-byte", "is not the weights this export recorded"),
        ("config", "is not the file this export recorded"),
        # ... and, without them (an older export), read and checked against each other.
        ("weights-unrecorded", "is not a readable safetensors file"),
        ("config-unrecorded", "is not an export's config"),
        ("width-unrecorded", "do not fit"),
        ("newer", "has export format 2; this pyskick reads up to 1"),
        ("other-weights", "names its weights 'weights.pt'; an export's weights are"),
        ("no-weights", "has no model.safetensors"),
        ("data-gone", "which is not here; pass --dataset"),
    ],
)
def test_damaged_export_is_refused_in_one_line(
    damage: str,
    message: str,
    exported: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(exported, broken)
    if damage.endswith("-unrecorded"):
        marker = json.loads((broken / EXPORT_MARKER).read_text())
        for key in ("weights_sha256", "config_sha256", "dataset_sha256"):
            del marker[key]
        (broken / EXPORT_MARKER).write_text(json.dumps(marker))
    if damage.startswith("weights"):
        (broken / EXPORT_WEIGHTS).write_bytes(b"not safetensors at all")
    elif damage == "flipped-byte":
        data = bytearray((broken / EXPORT_WEIGHTS).read_bytes())
        data[len(data) // 2] ^= 0xFF
        (broken / EXPORT_WEIGHTS).write_bytes(bytes(data))
    elif damage == "width-unrecorded":
        config = json.loads((broken / "config.json").read_text())
        config["model_config"]["hidden_size"] = 2 * config["model_config"]["hidden_size"]
        (broken / "config.json").write_text(json.dumps(config))
    elif damage == "newer":
        marker = json.loads((broken / EXPORT_MARKER).read_text())
        (broken / EXPORT_MARKER).write_text(json.dumps({**marker, "format": 2}))
    elif damage == "other-weights":
        marker = json.loads((broken / EXPORT_MARKER).read_text())
        (broken / EXPORT_MARKER).write_text(json.dumps({**marker, "weights": "weights.pt"}))
    elif damage == "no-weights":
        (broken / EXPORT_WEIGHTS).unlink()
    elif damage.startswith("config"):
        (broken / "config.json").write_text(json.dumps({"stage": "train"}))
    elif damage == "data-gone":
        record = json.loads((broken / "dataset.json").read_text())
        (broken / "dataset.json").write_text(json.dumps({**record, "path": "/nowhere/s.h5"}))
    before = tree(tmp_path)
    code, _, err = run(["evaluate", str(broken)], capsys)
    assert code == 2, err
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert tree(tmp_path) == before


def test_compare_names_what_to_do_with_an_export(
    exported: Path, runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["compare", str(runs["ltla"]), str(exported), "--metric", "adv"], capsys)
    assert code == 2, err
    assert "is an exported model, which records no evaluations" in err


def _card_blocks(exported: Path) -> list[str]:
    """The ```python blocks of an export's model card, as a reader copies them."""
    return re.findall(r"```python\n(.*?)```", (exported / CARD).read_text(), flags=re.S)


def test_the_model_cards_recipes_load_the_weights(exported: Path) -> None:
    """Issue 26: an export was usable only through pyskick's commands. The card now has an
    install line, a recipe that loads the weights into ``CompletionPolicy``, and one that reads
    the tensors and the architecture with torch alone, run here where neither pyskick nor
    safetensors can be imported."""
    card = (exported / CARD).read_text()
    assert "pyskick is not on PyPI: install pyskick 0.1.0 from a clone of its repository" in card
    into_pyskick, torch_only = _card_blocks(exported)
    expected = load_policy(exported).policy.state_dict()
    scope: dict[str, Any] = {}
    cwd = Path.cwd()
    try:
        os.chdir(exported)
        exec(into_pyskick, scope)  # the card's first recipe, as written
    finally:
        os.chdir(cwd)
    loaded = scope["policy"].state_dict()
    assert loaded.keys() == expected.keys()
    assert all(torch.equal(loaded[k], expected[k]) for k in expected)
    # The second recipe in a process that cannot import pyskick or safetensors.
    blocked = "import sys\nsys.modules['pyskick'] = sys.modules['safetensors'] = None\n"
    report = (
        "\nimport hashlib\nfor name, t in sorted(weights.items()):\n"
        "    print(name, list(t.shape), str(t.dtype), hashlib.sha256(t.numpy().tobytes())"
        ".hexdigest())\nprint('architecture', json.dumps(architecture, sort_keys=True))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", blocked + torch_only + report],
        cwd=exported, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    want = [
        f"{name} {list(t.shape)} {t.dtype} {hashlib.sha256(t.numpy().tobytes()).hexdigest()}"
        for name, t in sorted(expected.items())
    ]
    assert lines[:-1] == want
    config = json.loads((exported / "config.json").read_text())["model_config"]
    assert lines[-1] == "architecture " + json.dumps(config, sort_keys=True)
