"""Episodes run on the grids' device and give the same results there as on the CPU."""

from __future__ import annotations

import pytest
import torch

from pyskick.envs import LookAroundEnv

DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        # A visible GPU with a build lacking CUDA kernels fails here (the ops' fallback
        # warning is an error): that build is broken, not untestable.
        marks=[
            pytest.mark.cuda,
            pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
        ],
    ),
]


def run_episode(device: str, known_azimuth: bool) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    B, N, M = 6, 4, 8
    grids = torch.randint(0, 256, (B, N, M, 3, 4, 4), dtype=torch.uint8, generator=g)
    maps = torch.rand(B, N, M, generator=g)
    actions = torch.randint(15, (4, B), generator=g)
    env = LookAroundEnv(T=5, known_azimuth=known_azimuth, channel_mean=[120.0, 110.0, 90.0])
    obs = env.reset(
        grids.to(device), generator=torch.Generator().manual_seed(1), reward_maps=maps.to(device)
    )
    out = {"view0": obs.view, "proprio0": obs.proprio, "target": env.target}
    rewards = []
    for step_actions in actions:
        obs, reward, _ = env.step(step_actions.to(device))
        rewards.append(reward)
    decoded = torch.zeros(B, N, M, 3, 4, 4, device=device)
    out |= {
        "view": obs.view,
        "proprio": obs.proprio,
        "position": obs.position,
        "rewards": torch.stack(rewards),
        "visited": env.visited,
        "visited_views": env.visited_views,
        "reward_map": env.reward_map,
        "pasted": env.paste_observed(decoded),
        "absolute": env.to_absolute(env.target),
        "grid": env.grid,
    }
    return out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("known_azimuth", [False, True])
def test_episode_stays_on_its_device_and_matches_the_cpu(device: str, known_azimuth: bool) -> None:
    result = run_episode(device, known_azimuth)
    expected = run_episode("cpu", known_azimuth)
    for key, value in result.items():
        assert value.device.type == device, key
        assert torch.equal(value.cpu(), expected[key]), key
    assert torch.equal(result["absolute"], result["grid"])
