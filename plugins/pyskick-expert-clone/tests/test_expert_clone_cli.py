"""The installed distribution: discovered through its entry point, usable from `pyskick train`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyskick.plugins import get_host
from pyskick_cli.main import main


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def test_plugins_lists_the_distribution_and_its_sidekick(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(["plugins", "--json"], capsys)
    assert code == 0, err
    report = json.loads(out)
    ours = [p for p in report["plugins"] if p["distribution"] == "pyskick-expert-clone"]
    assert len(ours) == 1, report
    assert ours[0]["registered"] == {"method": ["expert-clone"], "sidekick": ["expert-clone"]}
    assert ours[0]["hooks"] == ["pyskick_register_methods", "pyskick_register_sidekicks"]
    assert "expert-clone" not in report["failures"]
    entry = get_host().registries["sidekick"].get("expert-clone")
    assert entry.plugin == ours[0]["name"]


def test_train_with_expert_clone_supervises_the_first_epoch(
    tiny_scenes: Path, one_view: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "expert-clone"
    code, _, err = run(
        ["train", "--dataset", str(tiny_scenes), "--preset", "cpu-demo", "--epochs", "1",
         "--batch-size", "8", "--device", "cpu", "--init", str(one_view),
         "--sidekick", "expert-clone", "--out", str(out_dir)],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    records = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 1
    assert records[0]["train/supervised_loss"] > 0
