"""Eq. 10 optimiser and heatmaps: the norm constraint, the ascent, zero heat where the decoder
cannot change, the roll to the absolute frame."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pyskick.models import CompletionPolicy, preset
from pyskick.viz import belief_heatmaps, optimal_perturbation, policy_change

CFG = dataclasses.replace(
    preset("cpu-demo"), n_elevations=3, n_azimuths=4, channels=1, view_size=16
)
B = 6


@pytest.fixture(scope="module")
def policy() -> CompletionPolicy:
    torch.manual_seed(0)
    return CompletionPolicy(CFG).eval()


def _inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(B, CFG.hidden_size, generator=g)
    proprio = torch.stack(
        [
            torch.randint(-1, 2, (B,), generator=g),
            torch.randint(-2, 3, (B,), generator=g),
            torch.randint(0, 3, (B,), generator=g),
        ],
        dim=1,
    ).float()
    azimuth = torch.randint(0, 4, (B,), generator=g)
    return hidden, proprio, azimuth


@settings(max_examples=10, deadline=None)
@given(ratio=st.floats(0.05, 2.0), seed=st.integers(0, 2**16), t=st.integers(0, 3))
def test_constraint_and_ascent(policy, ratio, seed, t):
    hidden, proprio, azimuth = _inputs(seed)
    found = optimal_perturbation(
        policy, hidden, proprio, t, azimuth=azimuth, ratio=ratio, iterations=30,
        generator=torch.Generator().manual_seed(seed),
    )  # fmt: skip
    radius = ratio * hidden.norm(dim=1)
    assert bool((found.delta.norm(dim=1) <= radius * (1 + 1e-5)).all())
    # The reported objective is the objective of the returned delta.
    torch.testing.assert_close(
        found.objective, policy_change(policy, hidden, found.delta, proprio, t, azimuth=azimuth)
    )
    assert bool((found.objective > found.initial_objective).all())


def test_beats_random_feasible_points(policy):
    hidden, proprio, azimuth = _inputs(7)
    found = optimal_perturbation(policy, hidden, proprio, 1, azimuth=azimuth)
    g = torch.Generator().manual_seed(1)
    radius = 0.75 * hidden.norm(dim=1, keepdim=True)
    best_random = torch.zeros(B)
    for _ in range(50):
        direction = torch.randn(B, CFG.hidden_size, generator=g)
        delta = direction / direction.norm(dim=1, keepdim=True) * radius
        value = policy_change(policy, hidden, delta, proprio, 1, azimuth=azimuth).detach()
        best_random = torch.maximum(best_random, value)
    assert bool((found.objective >= best_random).all())
    assert bool((found.objective > 100 * found.initial_objective).all())


def test_zero_iterations_and_zero_state_keep_the_start(policy):
    hidden, proprio, azimuth = _inputs(3)
    hidden[0] = 0.0  # radius 0: the only feasible change is none
    found = optimal_perturbation(policy, hidden, proprio, 0, azimuth=azimuth, iterations=0)
    torch.testing.assert_close(found.objective, found.initial_objective)
    assert float(found.delta[0].abs().max()) == 0.0
    assert policy.training is False


def test_policy_mode_is_restored(policy):
    hidden, proprio, azimuth = _inputs(4)
    policy.train()
    try:
        optimal_perturbation(policy, hidden, proprio, 0, azimuth=azimuth, iterations=2)
        belief_heatmaps(policy, hidden, torch.zeros_like(hidden), torch.zeros(B, dtype=torch.long))
        assert policy.training
    finally:
        policy.eval()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"ratio": 0.0}, "ratio"),
        ({"iterations": -1}, "iterations"),
        ({"step": 0.0}, "step"),
        ({"init_scale": 1.5}, "init_scale"),
    ],
)
def test_bad_arguments(policy, kwargs, match):
    hidden, proprio, azimuth = _inputs(5)
    with pytest.raises(ValueError, match=match):
        optimal_perturbation(policy, hidden, proprio, 0, azimuth=azimuth, **kwargs)


def test_heat_is_zero_where_the_decoder_cannot_change():
    """A decoder whose output for relative view (1, 0) ignores its input: no heat there."""
    torch.manual_seed(1)
    policy = CompletionPolicy(CFG).eval()
    last = policy.decode[8]  # the final ConvTranspose2d: channel (n * M + m) * C + c
    frozen = (1 * CFG.n_azimuths + 0) * CFG.channels
    with torch.no_grad():
        last.weight[:, frozen] = 0.0
    hidden, _, _ = _inputs(6)
    delta = 0.5 * torch.randn(B, CFG.hidden_size, generator=torch.Generator().manual_seed(2))
    starts = torch.tensor([0, 1, 2, 3, 5, 11])  # start azimuths 0, 1, 2, 3, 1, 3
    heat = belief_heatmaps(policy, hidden, delta, starts)
    assert heat.shape == (B, 3, 4, 16, 16)
    for b, start in enumerate(starts.tolist()):
        absolute = start % 4  # relative slot 0 is the start's azimuth
        assert float(heat[b, 1, absolute].abs().max()) == 0.0
        others = [(n, m) for n in range(3) for m in range(4) if (n, m) != (1, absolute)]
        assert all(float(heat[b, n, m].max()) > 0 for n, m in others)
    # No perturbation, no heat anywhere.
    assert float(belief_heatmaps(policy, hidden, torch.zeros_like(hidden), starts).max()) == 0.0


def test_heat_is_the_squared_decoder_change(policy):
    hidden, _, _ = _inputs(8)
    delta = torch.randn(B, CFG.hidden_size, generator=torch.Generator().manual_seed(3))
    starts = torch.zeros(B, dtype=torch.long)  # start azimuth 0: no roll
    with torch.no_grad():
        expected = (policy.decode(hidden + delta) - policy.decode(hidden)).pow(2).sum(3)
    torch.testing.assert_close(belief_heatmaps(policy, hidden, delta, starts), expected)
