"""DemoActionsActor (demo-actions): full greedy trajectories, and the built-in registrations."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pyskick.actors.base import Actor
from pyskick.config import TrainConfig
from pyskick.data.spec import GridSpec
from pyskick.envs.rollout import collect_rollout, make_env
from pyskick.ops import greedy_coverage
from pyskick.plugins import DEFAULT_PLUGINS, make_plugin_host
from pyskick.run_dir import load_policy
from pyskick.sidekicks import make_sidekick
from pyskick.sidekicks.coverage import one_view_coverage
from pyskick.sidekicks.demo import DemoSidekick
from pyskick.sidekicks.demo_actions import DemoActionsActor
from pyskick.sidekicks.scores import score_key

N, M = 3, 4
CPU = torch.device("cpu")
MEAN = (110.0,)


def test_forced_actions_are_the_whole_greedy_trajectory(one_view_ckpt: Path, smooth_grids) -> None:
    grids = smooth_grids(5, seed=21)
    actor = DemoActionsActor(one_view_ckpt, channel_mean=MEAN)
    assert isinstance(actor, Actor)
    assert (actor.name, actor.learned, actor.full_observability) == ("demo-actions", False, True)
    assert actor.mode(training=True) == actor.mode(training=False) == "greedy"
    T = 4
    actor.prepare(grids, T=T, device=CPU)
    # The coverage went through the sidekick's score path.
    coverage = one_view_coverage(one_view_ckpt, grids, channel_mean=MEAN)
    torch.testing.assert_close(actor.sidekick.coverage, coverage, atol=1e-6, rtol=0)
    indices = torch.tensor([4, 0, 2, 2, 1, 3])
    starts = torch.tensor([0, 11, 5, 6, 3, 8])
    forced = actor.forced_actions(indices, starts)
    assert forced.shape == (T - 1, 6)
    assert forced.dtype == torch.int64
    expected, views = greedy_coverage(coverage[indices], starts[:, None], T - 1, n_elevations=N,
                                      n_azimuths=M)  # fmt: skip
    assert torch.equal(forced, expected[:, 0].T)
    # No schedule: every step is forced however many epochs pass.
    for epoch in range(200):
        actor.sidekick.on_epoch_end(epoch)
    assert torch.equal(actor.forced_actions(indices, starts), forced)
    # Episodes driven by the forced actions visit the greedy views (BN eval, as at test time).
    policy = load_policy(one_view_ckpt).policy
    env = make_env(policy.config, T, MEAN)
    with torch.no_grad():
        rollout = collect_rollout(
            policy,
            env,
            grids[indices],
            mode=actor.mode(training=False),
            starts=starts,
            demonstrations=(forced, torch.ones_like(forced, dtype=torch.bool)),
            paste=True,
        )
    assert torch.equal(rollout.visited, views[:, 0])
    assert torch.equal(rollout.actions, forced)


def test_one_glimpse_forces_nothing(one_view_ckpt: Path, smooth_grids) -> None:
    actor = DemoActionsActor(one_view_ckpt, channel_mean=MEAN)
    actor.prepare(smooth_grids(2, seed=5), T=1, device=CPU)
    forced = actor.forced_actions(torch.tensor([0, 1, 1]), torch.tensor([0, 1, 2]))
    assert forced.shape == (0, 3)


def test_builtins_register_demo_and_demo_actions(one_view_ckpt: Path) -> None:
    host = make_plugin_host(autoload=False)
    assert "pyskick.builtins.demo" in DEFAULT_PLUGINS
    spec = GridSpec(N, M, 1, 16, (30.0, 0.0, -30.0), (0.0, 90.0, 180.0, 270.0), 45.0, MEAN,
                    "custom")  # fmt: skip
    config = TrainConfig(epochs=200)
    sidekick_entry = host.registries.sidekick.get("demo")
    assert sidekick_entry.plugin == "pyskick.builtins.demo"
    assert [option.name for option in sidekick_entry.options] == ["hybrid_schedule"]
    sidekick = make_sidekick(
        "demo", one_view=one_view_ckpt, spec=spec, config=config, options={"hybrid_schedule": 7}
    )
    assert isinstance(sidekick, DemoSidekick)
    assert (sidekick.name, sidekick.hybrid_schedule, sidekick.channel_mean) == ("demo", 7, MEAN)
    actor_entry = host.registries.actor.get("demo-actions")
    assert actor_entry.plugin == "pyskick.builtins.demo"
    assert "needs full observability at test time" in actor_entry.summary
    actor = actor_entry.factory(one_view=one_view_ckpt, spec=spec, config=config)
    assert isinstance(actor, DemoActionsActor)
    assert actor.sidekick.channel_mean == MEAN
    # The actor's coverage is the demo sidekick's: one cache entry serves both (scores are
    # keyed by the class that computes them, not by the name it was registered under).
    grids = torch.zeros(2, N, M, 1, 16, 16, dtype=torch.uint8)
    assert score_key(actor.sidekick, grids, 3) == score_key(sidekick, grids, 3)


def test_evaluating_a_shard_forces_by_positions_in_the_prepared_set(
    one_view_ckpt: Path, smooth_grids
) -> None:
    # Distributed validation: each rank evaluates every W-th grid of a set the actor was
    # prepared on as a whole.
    from pyskick.evaluation import evaluate_policy

    grids = smooth_grids(5, seed=33)
    actor = DemoActionsActor(one_view_ckpt, channel_mean=MEAN)
    actor.prepare(grids, T=3, device=CPU)
    policy = load_policy(one_view_ckpt).policy
    options = {"channel_mean": MEAN, "T": 3, "metric": "adv", "actor": actor}
    whole = evaluate_policy(policy, grids, **options)
    positions = torch.tensor([1, 3])
    shard = evaluate_policy(policy, grids[positions], sample_indices=positions, **options)
    torch.testing.assert_close(shard.per_start, whole.per_start[positions], atol=0, rtol=0)
    unaligned = evaluate_policy(policy, grids[positions], **options)  # forces grids 0 and 1
    assert not torch.equal(unaligned.per_start, shard.per_start)
    with pytest.raises(ValueError, match="sample_indices must be int64 of shape \\[2\\]"):
        evaluate_policy(policy, grids[positions], sample_indices=torch.tensor([1]), **options)
