"""Partial- and full-observability critics (docs/paper-reference.md §3.7)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import Tensor

from pyskick.models import (
    CompletionPolicy,
    FullObservabilityCritic,
    PartialObservabilityCritic,
    preset,
)
from pyskick.models.critics import ValueHead

CFG = dataclasses.replace(
    preset("cpu-demo"),
    n_elevations=2,
    n_azimuths=3,
    view_size=16,
    conv_channels=(4, 4, 8),
    sense_size=16,
    fuse_size=16,
    hidden_size=12,
    act_size=8,
    decode_start_channels=4,
    deconv_channels=(8, 8),
    grid_view_size=4,
    grid_size=8,
)
B = 4


def trained(critic: ValueHead) -> ValueHead:
    """``critic`` with a random output layer, as after some training (a fresh critic's output
    layer is zero: every value is the same)."""
    torch.nn.init.normal_(critic.output_layer.weight)
    return critic


def sample(seed: int = 0) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(B, CFG.hidden_size, generator=gen)
    proprio = torch.randint(-2, 3, (B, CFG.proprio_size), generator=gen).float()
    grid = torch.randn(B, 2, 3, 3, 16, 16, generator=gen)
    azimuth = torch.randint(0, 3, (B,), generator=gen)
    return hidden, proprio, grid, azimuth


def test_partial_critic_reads_the_act_input() -> None:
    torch.manual_seed(0)
    critic = trained(PartialObservabilityCritic(CFG)).eval()
    assert critic.critic[0].in_features == CFG.act_input_size
    assert [n for n, _ in critic.named_children()] == ["critic"]
    hidden, proprio, _, _ = sample()
    with torch.no_grad():
        value = critic(hidden, proprio, 1)
        later = critic(hidden, proprio, 2)
        moved = proprio.clone()
        moved[:, 2] += 1  # the absolute elevation is an act input by default
        elsewhere = critic(hidden, moved, 1)
    assert value.shape == (B,)
    assert not torch.allclose(value, later)
    assert not torch.allclose(value, elsewhere)


def test_full_critic_shares_but_does_not_own_the_image_encoder() -> None:
    policy = CompletionPolicy(CFG)
    critic = FullObservabilityCritic(CFG, policy.sense_im)
    assert critic.image_encoder is policy.sense_im
    assert {n.split(".")[0] for n in critic.state_dict()} == {"critic_fuse", "critic"}
    encoder_params = {id(p) for p in policy.sense_im.parameters()}
    assert not encoder_params & {id(p) for p in critic.parameters()}
    assert critic.critic[0].in_features == CFG.hidden_size + 5 + CFG.grid_size
    assert critic.critic_fuse[3].in_features == 6 * 4  # V views * grid_view_size


def test_full_critic_gradients_reach_the_shared_encoder_unless_frozen() -> None:
    torch.manual_seed(0)
    policy = CompletionPolicy(CFG)
    critic = FullObservabilityCritic(CFG, policy.sense_im)
    hidden, proprio, grid, azimuth = sample()
    critic(hidden, proprio, 0, grid, azimuth=azimuth).pow(2).mean().backward()
    assert all(p.grad is not None for p in policy.sense_im.parameters())
    assert all(p.grad is not None for p in critic.parameters())

    policy.zero_grad(set_to_none=True)
    policy.freeze_sense_and_fuse()
    critic(hidden, proprio, 0, grid, azimuth=azimuth).pow(2).mean().backward()
    assert all(p.grad is None for p in policy.sense_im.parameters())


def test_full_critic_value_depends_on_own_grid_only() -> None:
    torch.manual_seed(0)
    policy = CompletionPolicy(CFG)
    critic = trained(FullObservabilityCritic(CFG, policy.sense_im)).eval()
    hidden, proprio, grid, azimuth = sample()
    changed = grid.clone()
    changed[1, 1, 2] += 1.0  # one view of sample 1 only
    with torch.no_grad():
        value = critic(hidden, proprio, 3, grid, azimuth=azimuth)
        after = critic(hidden, proprio, 3, changed, azimuth=azimuth)
        encoded = critic.encode_grid(grid)
        alone = critic.encode_grid(grid[2:3])
    assert value.shape == (B,)
    torch.testing.assert_close(after[[0, 2, 3]], value[[0, 2, 3]])
    assert after[1] != value[1]
    torch.testing.assert_close(encoded[2:3], alone)


def test_full_critic_azimuth_comes_from_argument_or_known_proprio() -> None:
    torch.manual_seed(0)
    policy = CompletionPolicy(CFG)
    critic = trained(FullObservabilityCritic(CFG, policy.sense_im)).eval()
    hidden, proprio, grid, _ = sample()
    with pytest.raises(ValueError, match="FullObservabilityCritic needs the absolute azimuth"):
        critic(hidden, proprio, 0, grid)
    with torch.no_grad():
        a = critic(hidden, proprio, 0, grid, azimuth=torch.zeros(B, dtype=torch.long))
        b = critic(hidden, proprio, 0, grid, azimuth=torch.full((B,), 2))
    assert not torch.allclose(a, b)

    known = dataclasses.replace(CFG, known_azimuth=True)
    torch.manual_seed(0)
    known_critic = FullObservabilityCritic(known, CompletionPolicy(known).sense_im).eval()
    proprio4 = torch.cat([proprio, torch.full((B, 1), 2.0)], dim=1)
    with torch.no_grad():
        torch.testing.assert_close(
            known_critic(hidden, proprio4, 0, grid),
            known_critic(hidden, proprio4, 0, grid, azimuth=torch.full((B,), 2)),
        )


def test_full_critic_rejects_bad_grids() -> None:
    critic = FullObservabilityCritic(CFG, CompletionPolicy(CFG).sense_im)
    hidden, proprio, grid, azimuth = sample()
    with pytest.raises(ValueError, match=r"grid must have shape \[\*, 2, 3, 3, 16, 16\]"):
        critic(hidden, proprio, 0, grid[:, :1], azimuth=azimuth)
    with pytest.raises(ValueError, match="grid must hold 4 viewgrids"):
        critic(hidden, proprio, 0, grid[:2], azimuth=azimuth)
    with pytest.raises(TypeError, match="grid must be a floating-point tensor"):
        critic(hidden, proprio, 0, grid.to(torch.uint8), azimuth=azimuth)


@pytest.mark.parametrize("kind", ["partial", "full"])
def test_a_fresh_critic_is_silent_until_started(kind: str) -> None:
    torch.manual_seed(0)
    policy = CompletionPolicy(CFG)
    critic = (
        PartialObservabilityCritic(CFG)
        if kind == "partial"
        else FullObservabilityCritic(CFG, policy.sense_im)
    )
    hidden, proprio, grid, azimuth = sample()
    args = (hidden, proprio, 1) if kind == "partial" else (hidden, proprio, 1, grid)
    value = critic(*args, azimuth=azimuth)
    assert torch.equal(value, torch.zeros(B))
    # No gradient reaches the layers below (or the policy's LSTM state) while silent.
    hidden.requires_grad_(True)
    critic(*((hidden, *args[1:])), azimuth=azimuth).pow(2).sum().backward()
    assert hidden.grad is None or torch.count_nonzero(hidden.grad) == 0
    critic.start_at(-0.02)
    assert torch.equal(critic(*args, azimuth=azimuth), torch.full((B,), -0.02))
    critic.critic[-1] = torch.nn.Identity()
    with pytest.raises(TypeError, match="must end with a Linear"):
        critic.start_at(0.0)
