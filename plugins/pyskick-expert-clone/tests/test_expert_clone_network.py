"""The expert's network: shapes, full observability, and the agent step it builds on."""

from __future__ import annotations

import pytest
import torch
from pyskick_expert_clone.expert import FullObservabilityActor
from pyskick_expert_clone.training import agent_memory

from pyskick.envs import LookAroundEnv
from pyskick.models import CompletionPolicy, preset


@pytest.fixture
def policy() -> CompletionPolicy:
    torch.manual_seed(0)
    policy = CompletionPolicy(preset("cpu-demo"))
    policy.freeze_sense_and_fuse()
    return policy.eval()


@pytest.fixture
def expert(policy: CompletionPolicy) -> FullObservabilityActor:
    torch.manual_seed(1)
    return FullObservabilityActor(policy.config, policy.sense_im).eval()


def test_forward_shapes_and_parameters(
    policy: CompletionPolicy, expert: FullObservabilityActor
) -> None:
    cfg = policy.config
    B = 5
    grid = torch.randn(B, cfg.n_elevations, cfg.n_azimuths, cfg.channels, 32, 32)
    features = expert.encode_views(grid)
    assert features.shape == (B, cfg.n_views, cfg.sense_size)
    code = expert.encode_grid(grid)
    assert code.shape == (B, cfg.grid_size)
    torch.testing.assert_close(expert.fuse_views(features), code)
    logits = expert(
        torch.randn(B, cfg.hidden_size), torch.zeros(B, 3), 1, code, azimuth=torch.arange(B)
    )
    assert logits.shape == (B, cfg.n_actions)
    # The act stack takes the full-observability critic's input: 128 + 5 + 128 for cpu-demo.
    assert expert.act[0].in_features == cfg.hidden_size + 5 + cfg.grid_size
    # The agent's encoder is shared, not owned: absent from the expert's state and optimiser.
    assert all(k.startswith(("act_fuse.", "act.")) for k in expert.state_dict())
    assert not any(p is q for p in expert.parameters() for q in policy.sense_im.parameters())


def test_changing_an_unseen_view_changes_the_logits(
    policy: CompletionPolicy, expert: FullObservabilityActor
) -> None:
    cfg = policy.config
    env = LookAroundEnv(4, channel_mean=(120.0, 110.0, 100.0))
    generator = torch.Generator().manual_seed(0)
    grids = torch.randint(0, 256, (2, 4, 8, 3, 32, 32), dtype=torch.uint8, generator=generator)
    starts = torch.tensor([0, 9])
    obs = env.reset(grids, starts=starts)
    state = agent_memory(policy, obs.view, obs.proprio, None)
    azimuth = obs.position % cfg.n_azimuths

    def logits(grid_batch: torch.Tensor) -> torch.Tensor:
        env.reset(grid_batch, starts=starts)
        return expert(state[0], obs.proprio, 0, expert.encode_grid(env.grid), azimuth=azimuth)

    before = logits(grids)
    changed = grids.clone()
    changed[:, 3, 7] = 255 - changed[:, 3, 7]  # view 31: seen by neither episode
    after = logits(changed)
    assert (after - before).abs().amax(1).min() > 1e-4
    # The agent itself saw nothing new: its state is the same on both grids.
    obs_changed = env.reset(changed, starts=starts)
    torch.testing.assert_close(agent_memory(policy, obs_changed.view, obs.proprio, None), state)


def test_agent_memory_is_the_policy_step_state(policy: CompletionPolicy) -> None:
    env = LookAroundEnv(3, channel_mean=(120.0, 110.0, 100.0))
    grids = torch.randint(0, 256, (4, 4, 8, 3, 32, 32), dtype=torch.uint8)
    obs = env.reset(grids, starts=torch.tensor([0, 5, 17, 31]))
    mine = theirs = None
    for t in range(3):
        mine = agent_memory(policy, obs.view, obs.proprio, mine)
        with torch.no_grad():
            theirs = policy.step(obs.view, obs.proprio, t, theirs, azimuth=obs.position % 8).state
        torch.testing.assert_close(mine, theirs)
        if t < 2:
            obs, _, _ = env.step(torch.tensor([14, 0, 7, 3]))


def test_bad_inputs_are_named(policy: CompletionPolicy, expert: FullObservabilityActor) -> None:
    cfg = policy.config
    hidden = torch.zeros(2, cfg.hidden_size)
    with pytest.raises(ValueError, match="grid_code"):
        expert(
            hidden, torch.zeros(2, 3), 0, torch.zeros(2, cfg.grid_size + 1), azimuth=torch.zeros(2)
        )
    with pytest.raises(ValueError, match="azimuth"):
        expert(hidden, torch.zeros(2, 3), 0, torch.zeros(2, cfg.grid_size))
    with pytest.raises(ValueError, match="grid"):
        expert.encode_grid(torch.zeros(2, 4, 7, 3, 32, 32))
