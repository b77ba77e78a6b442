"""DemoSidekick: greedy demonstrations in the environment's action indices, T_sup annealing."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pyskick.envs import LookAroundEnv
from pyskick.ops import greedy_coverage
from pyskick.sidekicks.base import checkpoint_digest
from pyskick.sidekicks.demo import DemoSidekick

N, M = 3, 4
V = N * M
CPU = torch.device("cpu")
MEAN = (110.0,)


def loaded(ckpt: Path, coverage: torch.Tensor, T: int, **kwargs: object) -> DemoSidekick:
    sidekick = DemoSidekick(ckpt, channel_mean=MEAN, **kwargs)  # type: ignore[arg-type]
    sidekick.load_scores({"coverage": coverage}, T=T, device=CPU)
    return sidekick


def test_hand_computed_trajectory(one_view_ckpt: Path) -> None:
    # Each view covers only itself (0.5), except view 6 = (1, 2), which covers every view.
    coverage = (0.5 * torch.eye(V)).expand(2, V, V).clone()
    coverage[:, 6] = 1.0
    sidekick = loaded(one_view_ckpt, coverage, T=3)
    actions, mask = sidekick.demonstrations(torch.tensor([1, 0]), torch.tensor([0, 6]), 0)
    # actions[t, b]. From view 0 = (0, 0), view 6 = (1, 2) is reached by (+1, -2) and (+1, +2)
    # (4 azimuths wrap): equal gains, the lowest action wins, (1 + 1) * 5 + (-2 + 2) = 10.
    # Then every target is covered, every gain is 0 and action 0 = (-1, -2) wins: from (1, 2)
    # to (0, 0). From view 6 nothing adds anything: action 0 to (0, 0), then again action 0,
    # the elevation clipped, to (0, 2) = view 2.
    assert actions.tolist() == [[10, 0], [0, 0]]
    assert mask.tolist() == [[True, True], [True, True]]
    env = LookAroundEnv(3)
    env.reset(torch.zeros(2, N, M, 1, 2, 2, dtype=torch.uint8), starts=torch.tensor([0, 6]))
    for t in range(2):
        env.step(actions[t])
    assert env.visited_views.tolist() == [[0, 6, 0], [6, 0, 2]]


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    T=st.integers(1, 6),
    wrap_azimuth=st.booleans(),
    wrap_elevation=st.booleans(),
    dyadic=st.booleans(),
)
def test_greedy_trajectories_replay_in_the_environment(
    one_view_ckpt: Path, seed: int, T: int, wrap_azimuth: bool, wrap_elevation: bool, dyadic: bool
) -> None:
    generator = torch.Generator().manual_seed(seed)
    n, B = 5, 7
    coverage = torch.rand(n, V, V, generator=generator)
    if dyadic:  # coarse values: many exact ties and saturated targets
        coverage = (coverage * 4).floor() / 4
    indices = torch.randint(n, (B,), generator=generator)
    starts = torch.randint(V, (B,), generator=generator)
    sidekick = loaded(
        one_view_ckpt, coverage, T, wrap_azimuth=wrap_azimuth, wrap_elevation=wrap_elevation
    )
    actions = sidekick.trajectories(indices, starts)
    assert actions.shape == (T - 1, B)
    assert actions.dtype == torch.int64
    _, views = greedy_coverage(
        coverage[indices],
        starts[:, None],
        T - 1,
        n_elevations=N,
        n_azimuths=M,
        wrap_azimuth=wrap_azimuth,
        wrap_elevation=wrap_elevation,
    )
    env = LookAroundEnv(T, wrap_azimuth=wrap_azimuth, wrap_elevation=wrap_elevation)
    env.reset(torch.zeros(B, N, M, 1, 1, 1, dtype=torch.uint8), starts=starts)
    for t in range(T - 1):
        env.step(actions[t])
    assert torch.equal(env.visited_views, views[:, 0])
    demos = sidekick.demonstrations(indices, starts, 0)
    if T == 1:
        assert demos is None  # nothing to demonstrate
    else:
        assert demos is not None
        assert torch.equal(demos[0], actions)
        assert bool(demos[1].all())


def test_t_sup_anneals_on_schedule_and_masks_a_prefix(one_view_ckpt: Path) -> None:
    coverage = torch.rand(4, V, V, generator=torch.Generator().manual_seed(0))
    sidekick = loaded(one_view_ckpt, coverage, T=4, hybrid_schedule=2)
    indices, starts = torch.tensor([0, 1, 2, 3, 0]), torch.tensor([0, 5, 11, 3, 7])
    full = sidekick.trajectories(indices, starts)
    seen = []
    for epoch in range(8):
        demos = sidekick.demonstrations(indices, starts, epoch)
        if demos is None:
            seen.append(0)
        else:
            actions, mask = demos
            assert torch.equal(actions, full)  # the whole trajectory, masked from T_sup on
            T_sup = int(mask[:, 0].sum())
            assert mask.tolist() == [[t < T_sup] * 5 for t in range(3)]
            seen.append(T_sup)
        assert sidekick.T_sup == seen[-1]
        sidekick.on_epoch_end(epoch)
    # (epoch + 1) % 2 == 0 lowers T_sup: epochs 0-1 with 3, 2-3 with 2, 4-5 with 1, then 0.
    assert seen == [3, 3, 2, 2, 1, 1, 0, 0]


def test_state_dict_restores_t_sup_in_either_order(one_view_ckpt: Path) -> None:
    coverage = torch.rand(2, V, V, generator=torch.Generator().manual_seed(1))
    trained = loaded(one_view_ckpt, coverage, T=4, hybrid_schedule=1)
    trained.on_epoch_end(0)
    assert trained.state_dict() == {"T_sup": 2}
    # The trainer loads scores, then the checkpoint; a cache may restore first.
    after = loaded(one_view_ckpt, coverage, T=4, hybrid_schedule=1)
    after.load_state_dict(trained.state_dict())
    before = DemoSidekick(one_view_ckpt, channel_mean=MEAN, hybrid_schedule=1)
    before.load_state_dict(trained.state_dict())
    before.load_scores({"coverage": coverage}, T=4, device=CPU)
    assert after.T_sup == before.T_sup == 2
    # A checkpoint written before prepare() restores nothing.
    fresh = DemoSidekick(one_view_ckpt, channel_mean=MEAN)
    fresh.load_state_dict(DemoSidekick(one_view_ckpt, channel_mean=MEAN).state_dict())
    fresh.load_scores({"coverage": coverage}, T=3, device=CPU)
    assert fresh.T_sup == 2
    with pytest.raises(ValueError, match="T_sup=3 exceeds T - 1 = 2"):
        loaded(one_view_ckpt, coverage, T=3).load_state_dict({"T_sup": 3})
    late = DemoSidekick(one_view_ckpt, channel_mean=MEAN)
    late.load_state_dict({"T_sup": 3})
    with pytest.raises(ValueError, match="T_sup=3 exceeds T - 1 = 1"):
        late.load_scores({"coverage": coverage}, T=2, device=CPU)
    with pytest.raises(ValueError, match="T_sup must be an int >= 0"):
        late.load_state_dict({"T_sup": -1})


def test_score_options_and_bad_scores(one_view_ckpt: Path) -> None:
    sidekick = DemoSidekick(one_view_ckpt, channel_mean=MEAN)
    options = sidekick.score_options(4)
    assert options == sidekick.score_options(2)  # first-glimpse reconstructions: no T
    assert options == {
        "one_view_sha256": checkpoint_digest(one_view_ckpt),
        "channel_mean": [110.0],
    }
    with pytest.raises(ValueError, match=r"coverage must have shape \[n, 12, 12\]"):
        sidekick.load_scores({"coverage": torch.zeros(2, 8, 8)}, T=4, device=CPU)
    # Checked once when loaded: every batch's trajectories then trust it (no device wait).
    for bad in (1.5, -0.5, float("nan")):
        with pytest.raises(ValueError, match=r"coverage must lie in \[0, 1\]"):
            sidekick.load_scores({"coverage": torch.full((2, 12, 12), bad)}, T=4, device=CPU)
    with pytest.raises(RuntimeError, match="prepare"):
        sidekick.demonstrations(torch.tensor([0]), torch.tensor([0]), 0)
    with pytest.raises(ValueError, match="hybrid_schedule"):
        DemoSidekick(one_view_ckpt, channel_mean=MEAN, hybrid_schedule=0)
    assert sidekick.reward_maps(torch.tensor([0]), 0) is None  # demonstrations only
    assert sidekick.reward_scale(0) == 0.0
