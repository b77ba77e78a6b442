"""ours(demo) end to end: hybrid training with annealed T_sup, exact resume, the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pyskick.checkpoint import load_checkpoint
from pyskick.config import train_preset
from pyskick.data.builtin import make_builtin
from pyskick.sidekicks.demo import DemoSidekick
from pyskick.training import TrainData, pretrain, train
from pyskick_cli.main import main

MEAN = (110.0,)


def metrics(run: Path) -> list[dict[str, float]]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_supervision_anneals_and_resumes_exactly(
    tmp_path: Path, smooth_grids, auto_repeat: Any
) -> None:
    data = TrainData(smooth_grids(16, seed=1), smooth_grids(6, seed=2), MEAN)
    config = train_preset("cpu-demo").replace(
        batch_size=8, pretrain_epochs=1, epochs=3, T=3, eval_batch_size=64
    )
    one = tmp_path / "one"
    pretrain(config, one, data)
    # Pretraining has no sidekick: the registered "none", by name (not a hand-kept one).
    assert load_checkpoint(one / "latest.pt")["sidekick_name"] == "none"

    def sidekick() -> DemoSidekick:
        return DemoSidekick(one, channel_mean=MEAN, hybrid_schedule=1)

    whole = tmp_path / "whole"
    train(config, whole, data, init=one, sidekick=sidekick())
    records = metrics(whole)
    # T_sup = 2, 1, 0: the NLL of demonstrated steps while T_sup > 0, none after.
    assert [r["train/supervised_loss"] > 0 for r in records] == [True, True, False]
    assert records[2]["train/supervised_loss"] == 0.0
    # With T_sup = T - 1 every action is demonstrated: no policy-gradient term at all.
    assert records[0]["train/policy_loss"] == 0.0
    assert records[1]["train/policy_loss"] != 0.0
    state = load_checkpoint(whole / "latest.pt")
    # Built by hand, not by make_sidekick: named by its class, which no registry resolves
    # (resuming needs the object again, as below).
    hand_built = "pyskick.sidekicks.demo.DemoSidekick"
    assert (state["sidekick_name"], state["sidekick"]) == (hand_built, {"T_sup": 0})
    assert state["config"]["sidekick"] == hand_built

    split = tmp_path / "split"
    train(config.replace(epochs=1), split, data, init=one, sidekick=sidekick())
    part = load_checkpoint(split / "latest.pt")
    assert (part["epoch"], part["sidekick"]) == (0, {"T_sup": 1})
    # The fresh sidekick starts at T - 1 = 2; the checkpoint's T_sup = 1 must win.
    train(config, split, data, resume=True, sidekick=sidekick())
    resumed = metrics(split)
    for a, b in zip(records, resumed, strict=True):
        assert a["train/supervised_loss"] == auto_repeat.approx(b["train/supervised_loss"])
        assert a["train/rec_error"] == auto_repeat.approx(b["train/rec_error"])
    final = load_checkpoint(split / "latest.pt")["model"]
    for name, tensor in state["model"].items():
        auto_repeat.assert_same(tensor, final[name], name)


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    return int(exc.value.code or 0), capsys.readouterr().err


def test_train_command_with_the_demo_sidekick(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = make_builtin("synthetic-scenes", tmp_path / "s.h5", 24, 5)
    fast = ["--dataset", str(dataset), "--preset", "cpu-demo", "--batch-size", "8", "--device",
            "cpu"]  # fmt: skip
    one, demo = tmp_path / "one", tmp_path / "demo"
    code, err = run_cli(["pretrain", *fast, "--epochs", "1", "--out", str(one)], capsys)
    assert code == 0, err
    args = ["train", *fast, "--epochs", "2", "--init", str(one), "--out", str(demo), "-T", "2"]
    code, err = run_cli(
        [*args, "--sidekick", "demo", "--sidekick-option", "hybrid_schedule=1"], capsys
    )
    assert code == 0, err
    records = metrics(demo)
    assert records[0]["train/supervised_loss"] > 0  # T_sup = 1: the single action is demonstrated
    assert records[1]["train/supervised_loss"] == 0.0  # annealed after one epoch
    state = load_checkpoint(demo / "latest.pt")
    assert state["config"]["sidekick"] == "demo"
    assert state["config"]["sidekick_options"] == {"hybrid_schedule": 1}
    assert json.loads((demo / "config.json").read_text())["sidekick_options"] == {
        "hybrid_schedule": 1
    }
    assert state["sidekick"] == {"T_sup": 0}
    bad = tmp_path / "x"
    code, err = run_cli(
        [*args[:-4], "--out", str(bad), "--sidekick", "demo", "--sidekick-option",
         "hybrid_schedule=0"], capsys,
    )  # fmt: skip
    assert code == 2
    assert "--sidekick-option" in err
    assert "option hybrid_schedule must be an int >= 1, got '0'" in err
    assert not bad.exists()


def test_a_forcing_actor_and_a_demonstrating_sidekick_are_refused_up_front(
    tmp_path: Path, smooth_grids
) -> None:
    from pyskick.sidekicks.demo_actions import DemoActionsActor

    data = TrainData(smooth_grids(8, seed=1), smooth_grids(2, seed=2), MEAN)
    config = train_preset("cpu-demo").replace(batch_size=4, pretrain_epochs=1, epochs=1, T=3)
    one = tmp_path / "one"
    pretrain(config, one, data)
    run = tmp_path / "run"
    refused = r"forces the motions and sidekick '.*DemoSidekick' demonstrates"
    with pytest.raises(ValueError, match=refused):
        train(
            config,
            run,
            data,
            init=one,
            sidekick=DemoSidekick(one, channel_mean=MEAN),
            actor=DemoActionsActor(one, channel_mean=MEAN),
        )
    assert not run.exists()  # nothing scored, nothing written
