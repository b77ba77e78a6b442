"""rnd-rewards: the maps, the sidekick contract, discovery and a run from the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from pyskick_rnd_rewards.sidekick import (
    RandomRewardSidekick,
    draw_centres,
    random_reward_maps,
    spread_maps,
)

from pyskick.checkpoint import load_checkpoint
from pyskick.data import MODELNET_HARD, SUN360
from pyskick.plugins import make_plugin_host
from pyskick.sidekicks import REWARD_OPTIONS, RewardMaps, make_sidekick
from pyskick.training import train_preset
from pyskick_cli.main import main

CPU = torch.device("cpu")


def grids(n: int, N: int = 3, M: int = 4, *, seed: int = 0) -> torch.Tensor:
    """``[n, N, M, 1, 2, 2]`` uint8 random viewgrids (tiny: only their bytes matter)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, N, M, 1, 2, 2), dtype=torch.uint8, generator=generator)


def test_spread_matches_hand_computed_maps() -> None:
    # Centre (0, 0) on 3x4: azimuth 3 wraps to distance 1; elevation 2 is 2 rows away (no wrap).
    one = spread_maps(torch.tensor([[[0, 0]]]), N=3, M=4, radius=1)[0]
    q = 0.25
    expected = torch.tensor([[1, q, 0, q], [q, q, 0, q], [0, 0, 0, 0]])
    torch.testing.assert_close(one, expected)
    # A second centre at (1, 1): overlaps add up, clipped at 1.
    two = spread_maps(torch.tensor([[[0, 0], [1, 1]]]), N=3, M=4, radius=1)[0]
    expected = torch.tensor([[1, 2 * q, q, q], [2 * q, 1, q, q], [q, q, q, 0]])
    torch.testing.assert_close(two, expected)
    # Radius 2 on 4 azimuths: the opposite azimuth is 2 away either way round, counted once.
    wide = spread_maps(torch.tensor([[[1, 0]]]), N=3, M=4, radius=2)[0]
    row = torch.tensor([q, q, q / 4, q])
    torch.testing.assert_close(wide, torch.stack((row, torch.tensor([1, q, q / 4, q]), row)))


@settings(deadline=None)  # first calls are slow on a loaded machine, not wrong
@given(
    N=st.integers(1, 5),
    M=st.integers(1, 9),
    k=st.integers(1, 5),
    radius=st.integers(0, 3),
    seed=st.integers(0, 2**63 - 1),
)
def test_maps_are_k_centres_spread(N: int, M: int, k: int, radius: int, seed: int) -> None:
    data = grids(6, N, M, seed=seed % 1000)
    centres = draw_centres(data, seed=seed, k=k)
    maps = random_reward_maps(data, seed=seed, k=k, radius=radius)
    assert centres.shape == (6, k, 2)
    assert maps.shape == (6, N, M)
    assert maps.dtype == torch.float32
    assert float(maps.min()) >= 0.0
    assert float(maps.max()) <= 1.0
    e, a = torch.meshgrid(torch.arange(N), torch.arange(M), indexing="ij")
    for i in range(6):
        distance = torch.stack(
            [
                torch.maximum((e - ce).abs(), torch.minimum((a - ca).abs(), M - (a - ca).abs()))
                for ce, ca in centres[i].tolist()
            ]
        )  # [k, N, M]
        assert torch.equal(maps[i][tuple(centres[i].T)], torch.ones(k))  # every centre pays 1
        covered = (distance <= radius).sum(0)
        assert torch.equal(maps[i] > 0, covered > 0)  # nothing outside the spread
        alone = covered == 1  # one centre's spread: exactly 1/4^d
        nearest = distance.amin(0)[alone]
        torch.testing.assert_close(maps[i][alone], 0.25 ** nearest.float())


def test_maps_depend_only_on_the_seed_and_each_viewgrid() -> None:
    data = grids(32, 4, 8)
    maps = random_reward_maps(data, seed=7, k=4, radius=1)
    assert torch.equal(random_reward_maps(data, seed=7, k=4, radius=1), maps)
    assert not torch.equal(random_reward_maps(data, seed=8, k=4, radius=1), maps)
    order = torch.randperm(32, generator=torch.Generator().manual_seed(0))
    assert torch.equal(random_reward_maps(data[order], seed=7, k=4, radius=1), maps[order])
    assert torch.equal(random_reward_maps(data[8:13], seed=7, k=4, radius=1), maps[8:13])
    assert len({tuple(c) for c in draw_centres(data, seed=7, k=1)[:, 0].tolist()}) > 8


def test_sidekick_contract() -> None:
    sidekick = RandomRewardSidekick(seed=3, k=5, radius=2, decay_every=2, decay_factor=4.0)
    assert isinstance(sidekick, RewardMaps)
    assert sidekick.score_options(T=4) == {"seed": 3, "k": 5, "radius": 2}
    assert sidekick.reward_radius == 2  # the environment zeroes the spread's radius
    data = grids(10, 4, 8)
    sidekick.prepare(data, T=4, device=CPU)  # Sidekick's default: compute then load the scores
    indices = torch.tensor([9, 0, 9])
    expected = random_reward_maps(data, seed=3, k=5, radius=2)[indices]
    assert torch.equal(sidekick.reward_maps(indices, epoch=0), expected)
    # The rew sidekick's reward scale and decay, resumed from the state dict.
    (default_scale,) = [option.default for option in REWARD_OPTIONS if option.name == "scale"]
    assert sidekick.reward_scale(0) == default_scale > 0
    for epoch in range(4):
        sidekick.on_epoch_end(epoch)
    assert sidekick.reward_scale(4) == pytest.approx(sidekick.initial_scale / 16)
    restored = RandomRewardSidekick(seed=3, k=5, radius=2)
    restored.load_state_dict(sidekick.state_dict())
    assert restored.reward_scale(4) == sidekick.reward_scale(4)
    with pytest.raises(ValueError, match="seed"):
        RandomRewardSidekick(seed=-1)
    with pytest.raises(ValueError, match="k >= 1"):
        RandomRewardSidekick(seed=0, k=0)
    with pytest.raises(ValueError, match=r"\[n, N, M, C, H, W\]"):
        draw_centres(torch.zeros(3, 4, 8, dtype=torch.uint8), seed=0, k=1)


def test_the_template_uses_only_the_public_sidekick_api() -> None:
    # What a plugin copies must not reach into pyskick's sidekick modules.
    import ast

    import pyskick_rnd_rewards

    modules = set()
    for source in Path(pyskick_rnd_rewards.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pyskick."):
                modules.add(node.module)
    assert "pyskick.sidekicks" in modules
    assert not [m for m in modules if m.startswith("pyskick.sidekicks.")], modules


def test_factory_follows_the_rew_presets() -> None:
    entry = make_plugin_host().registries.sidekick.get("rnd-rewards")
    assert entry.plugin == "pyskick-rnd-rewards"
    # The rew sidekick's options, defaults included: same peaks, spread and schedule.
    assert [o.name for o in entry.options] == [
        "scale",
        "decay_every",
        "decay_factor",
        "k",
        "radius",
    ]
    config = train_preset("cpu-demo").replace(seed=11, epochs=8)
    for spec, k, radius in ((SUN360, 4, 1), (MODELNET_HARD, 5, 2)):
        sidekick = make_sidekick("rnd-rewards", one_view=Path("unused"), spec=spec, config=config)
        assert (sidekick.name, sidekick.seed, sidekick.k, sidekick.radius) == (
            "rnd-rewards", 11, k, radius,
        )  # fmt: skip
        assert sidekick.decay_every == 4  # half of 8 epochs
    halved = make_sidekick(
        "rnd-rewards", one_view=None, spec=SUN360, config=config, options={"decay_every": "1"}
    )
    assert halved.decay_every == 1
    assert halved.options["decay_every"] == 1


def test_installed_and_listed_by_pyskick_plugins() -> None:
    listing = subprocess.run(
        [sys.executable, "-m", "pyskick_cli", "plugins", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(listing.stdout)
    (plugin,) = [p for p in report["plugins"] if p["distribution"] == "pyskick-rnd-rewards"]
    assert plugin["registered"] == {"method": ["rnd-rewards"], "sidekick": ["rnd-rewards"]}
    assert "pyskick-rnd-rewards" not in report["failures"]


@pytest.mark.usefixtures("one_thread")
def test_train_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, one, run = tmp_path / "scenes.h5", tmp_path / "one-view", tmp_path / "rnd"
    fast = ["--dataset", str(data), "--preset", "cpu-demo", "--epochs", "1", "--batch-size", "8",
            "--device", "cpu"]  # fmt: skip
    commands = [
        ["data", "make", "synthetic-scenes", "--out", str(data), "--num", "40", "--seed", "3"],
        ["pretrain", *fast, "--out", str(one)],
        ["train", *fast, "--init", str(one), "--sidekick", "rnd-rewards", "--out", str(run)],
    ]
    for args in commands:
        with pytest.raises(SystemExit) as exc:
            main(args)
        assert exc.value.code in (0, None), capsys.readouterr().err
    metrics = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    assert metrics["sidekick/reward_scale"] > 0
    assert metrics["baseline/intrinsic_mean"] > 0  # the agent collected random rewards
    state = load_checkpoint(run / "latest.pt")
    assert state["sidekick_name"] == "rnd-rewards"
    assert state["config"]["reward_radius"] == 1  # the env zeroes the sidekick's radius
