"""The reward sidekick (ours(rew)): one-view scores, NMS maps, the decaying scale."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from pyskick.data.builtin import make_builtin
from pyskick.sidekicks import NMS_PRESETS, nms_preset
from pyskick.sidekicks.reward import RewardSidekick, one_view_scores
from pyskick_cli.main import main

FAST = ["--preset", "cpu-demo", "--epochs", "1", "--batch-size", "8", "--device", "cpu"]


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    return int(exc.value.code or 0), capsys.readouterr().err


def test_scores_are_inverse_errors_normalised_per_viewgrid() -> None:
    errors = torch.tensor([[[0.01, 0.02], [0.04, 0.05]], [[1.0, 1.0], [1.0, 1.0]]])
    scores = one_view_scores(errors)
    s = 1 / (1000 * errors[0].double())  # 0.1, 0.05, 0.025, 0.02
    expected = (s - s.min()) / (s.max() - s.min() + 1e-8)
    torch.testing.assert_close(scores[0], expected.float())
    assert scores[0, 0, 0] == pytest.approx(1.0, abs=1e-6)  # the best view scores 1
    assert torch.equal(scores[1], torch.zeros(2, 2))  # equal views: nothing stands out


def test_scale_decays_on_schedule_and_survives_state_dict(tmp_path: Path) -> None:
    sidekick = RewardSidekick(tmp_path, channel_mean=(0.0,), decay_every=2, decay_factor=4.0)
    assert sidekick.reward_scale(0) == pytest.approx(255e-4)
    for epoch in range(4):
        sidekick.on_epoch_end(epoch)
    assert sidekick.reward_scale(4) == pytest.approx(255e-4 / 16)
    restored = RewardSidekick(tmp_path, channel_mean=(0.0,), decay_every=2, decay_factor=4.0)
    restored.load_state_dict(sidekick.state_dict())
    assert restored.reward_scale(4) == sidekick.reward_scale(4)
    with pytest.raises(ValueError, match="decay_every"):
        RewardSidekick(tmp_path, channel_mean=(0.0,), decay_every=0)


def test_presets_follow_the_paper() -> None:
    assert NMS_PRESETS["sun360"] == (4, 1)
    assert NMS_PRESETS["modelnet-hard"] == (5, 2)
    assert nms_preset(None) == nms_preset("unknown") == NMS_PRESETS["custom"]
    with pytest.raises(TypeError):
        NMS_PRESETS["sun360"] = (1, 1)  # type: ignore[index]  # read-only: plugins share it


def test_train_with_the_reward_sidekick(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = make_builtin("synthetic-scenes", tmp_path / "s.h5", 40, 3)
    one, rew = tmp_path / "one", tmp_path / "rew"
    assert run(["pretrain", "--dataset", str(data), *FAST, "--out", str(one)], capsys)[0] == 0
    # The maps: at most k peaks per viewgrid, scores in [0, 1], the best view a peak.
    sidekick = RewardSidekick(one, channel_mean=(119.16, 107.68, 95.12), k=4, radius=1)
    from pyskick.data import ViewgridFile

    grids = ViewgridFile(data).split("train").load()
    sidekick.prepare(grids, T=4, device=torch.device("cpu"))
    maps = sidekick.reward_maps(torch.arange(len(grids)), 0)
    assert maps.shape == (len(grids), 4, 8)
    assert ((maps > 0).sum((1, 2)) <= 4).all()
    assert float(maps.min()) >= 0.0
    assert torch.allclose(maps.amax((1, 2)), torch.ones(len(grids)), atol=1e-4)
    # From the command line: rewards are collected and the run resumes with its one-view model.
    args = ["train", "--dataset", str(data), *FAST, "--init", str(one), "--out", str(rew)]
    code, err = run([*args, "--sidekick", "rew"], capsys)
    assert code == 0, err
    first = json.loads((rew / "metrics.jsonl").read_text().splitlines()[0])
    assert first["sidekick/reward_scale"] == pytest.approx(255e-4)
    assert first["baseline/intrinsic_mean"] > 0
    resumed = ["train", "--dataset", str(data), *FAST[:2], "--epochs", "2", "--batch-size", "8",
               "--device", "cpu", "--out", str(rew), "--resume", "--sidekick", "rew"]  # fmt: skip
    code, err = run(resumed, capsys)
    assert code == 0, err
    assert len((rew / "metrics.jsonl").read_text().splitlines()) == 2
    code, err = run([*args[:-1], str(tmp_path / "x"), "--sidekick", "nope"], capsys)
    assert code == 2
    # Installed plugins (plugins/*) add names to the list.
    assert "unknown sidekick 'nope'; valid names: " in err
    assert "none, rew" in err
