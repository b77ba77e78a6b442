"""`--critic` and `--actor` take any registered name; unknown ones are usage errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pyskick.data.builtin import make_builtin
from pyskick_cli.main import main


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_builtin("synthetic-scenes", tmp_path_factory.mktemp("data") / "s.h5", 12, 1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--critic", "oracle"], "unknown critic 'oracle'; valid names: asymm-critic, average, "),
        (
            ["--actor", "oracle"],
            "unknown actor 'oracle'; valid names: demo-actions, learned, random",
        ),
        (["--config", "CONFIG"], "unknown critic 'asymm'; valid names: asymm-critic, average, "),
    ],
)
def test_unknown_names_exit_2_with_the_valid_ones(
    scenes: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    message: str,
) -> None:
    monkeypatch.setenv("PYSKICK_CACHE_DIR", str(tmp_path / "cache"))
    config = tmp_path / "run.toml"
    config.write_text('critic = "asymm"\n')
    args = [str(config) if arg == "CONFIG" else arg for arg in args]
    out = tmp_path / "run"
    code, _, err = run(["train", "--dataset", str(scenes), *args, "--out", str(out)], capsys)
    assert code == 2
    assert message in err
    assert not out.exists()
    assert not (tmp_path / "cache").exists()  # no one-view model was pretrained first


def test_evaluate_refuses_an_unknown_actor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["evaluate", str(tmp_path), "--actor", "oracle"], capsys)
    assert code == 2
    assert "unknown actor 'oracle'; valid names: demo-actions, learned, random" in err


def test_help_lists_the_names_without_importing_torch() -> None:
    script = (
        "import sys\n"
        "from pyskick_cli.main import main\n"
        "try:\n"
        "    main(['train', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('torch' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip().endswith("False")
    assert "asymm-critic" in result.stdout
    assert "random" in result.stdout


def test_demo_actions_trains_and_evaluates_following_the_coverage_greedy(
    scenes: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import json

    import torch

    from pyskick.data import ViewgridFile
    from pyskick.evaluation import evaluate
    from pyskick.sidekicks.demo_actions import DemoActionsActor

    monkeypatch.setenv("PYSKICK_CACHE_DIR", str(tmp_path / "cache"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        common = ["--dataset", str(scenes), "--preset", "cpu-demo", "--batch-size", "4"]
        one_view = tmp_path / "one-view"
        code, _, err = run(["pretrain", *common, "--epochs", "1", "--out", str(one_view)], capsys)
        assert code == 0, err
        out = tmp_path / "demo-actions"
        args = ["train", *common, "--epochs", "1", "--init", str(one_view), "--actor"]
        code, _, err = run([*args, "demo-actions", "--out", str(out)], capsys)
        assert code == 0, err
        record = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
        assert record["train/policy_loss"] == 0.0  # nothing learns to act
        assert record["train/supervised_loss"] == 0.0
        code, stdout, err = run(["evaluate", str(out), "--metric", "avg", "--json"], capsys)
        assert code == 0, err
        report = json.loads(stdout)
        assert report["actor"] == "demo-actions"
        # The CLI's number is the run evaluated with the greedy coverage trajectories.
        source = ViewgridFile(scenes)
        test = source.split("test").load()
        mean = tuple(source.spec.channel_mean)
        actor = DemoActionsActor(one_view, channel_mean=mean)
        direct = evaluate(out, test, "avg", channel_mean=mean, actor=actor)
        assert report["mean_x1000"] == pytest.approx(direct.summary.mean_x1000)
        learned = evaluate(out, test, "avg", channel_mean=mean, actor="learned")
        assert learned.summary.mean_x1000 != pytest.approx(direct.summary.mean_x1000)
        # Its episodes replay the forced motions; no heatmaps (the policy did not choose them).
        figures = tmp_path / "figures"
        code, _, err = run(["visualize", str(out), "--out", str(figures)], capsys)
        assert code == 0, err
        names = sorted(p.name for p in figures.iterdir())
        assert any(name.endswith("_episode.png") for name in names), names
        assert not any("heatmaps" in name for name in names), names
    finally:
        torch.set_num_threads(threads)
