"""collect_rollout: shapes, the paper's per-step quantities, pasting, demonstrations."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from pyskick.envs import LookAroundEnv
from pyskick.envs.rollout import collect_rollout
from pyskick.models import CompletionPolicy, PartialObservabilityCritic, preset

CFG = dataclasses.replace(
    preset("cpu-demo"), n_elevations=3, n_azimuths=4, channels=1, view_size=16
)


@pytest.fixture
def policy():
    torch.manual_seed(0)
    return CompletionPolicy(CFG).eval()


def _env(T=3):
    return LookAroundEnv(T, channel_mean=[120.0])


@torch.no_grad()
def test_shapes_and_paper_quantities(policy, smooth_grids):
    grids = smooth_grids(5)
    starts = torch.tensor([0, 3, 5, 7, 11])
    critic = PartialObservabilityCritic(CFG).eval()
    env = _env()
    r = collect_rollout(policy, env, grids, mode="greedy", starts=starts, critic=critic)
    assert r.rec_errors.shape == (3, 5)
    assert r.log_probs.shape == (2, 5)
    assert r.values is not None
    assert r.values.shape == (2, 5)
    assert r.actions.dtype == torch.int64
    assert not r.supervised.any()
    assert torch.equal(r.visited[:, 0], starts)
    # Replay the same episodes by hand: error after the last glimpse, greedy actions.
    env2 = _env()
    obs = env2.reset(grids, starts=starts)
    state = None
    for t in range(3):
        out = policy.step(obs.view, obs.proprio, t, state, azimuth=obs.position % 4)
        state = out.state
        mse = (env2.target - out.decoded).pow(2).mean(dim=(1, 2, 3, 4, 5))
        torch.testing.assert_close(r.rec_errors[t], mse)
        if t < 2:
            probs = out.probs
            torch.testing.assert_close(r.actions[t], probs.argmax(1))
            logp = torch.log(probs.gather(1, r.actions[t][:, None]).squeeze(1) + 1e-7)
            torch.testing.assert_close(r.log_probs[t], logp)
            torch.testing.assert_close(r.entropies[t], -(probs * torch.log(probs + 1e-7)).sum(1))
            obs = env2.step(r.actions[t]).observation
    assert r.intrinsic.abs().sum() == 0


@torch.no_grad()
def test_pasting_lowers_the_error_and_t1_has_no_actions(policy, smooth_grids):
    grids = smooth_grids(4)
    starts = torch.tensor([0, 1, 2, 3])
    plain = collect_rollout(policy, _env(), grids, mode="greedy", starts=starts)
    pasted = collect_rollout(policy, _env(), grids, mode="greedy", starts=starts, paste=True)
    assert bool((pasted.final_errors < plain.final_errors).all())
    one = collect_rollout(policy, _env(1), grids, mode="greedy", starts=starts)
    assert one.rec_errors.shape == (1, 4)
    assert one.log_probs.shape == (0, 4)


@torch.no_grad()
def test_sampling_and_random_actions_follow_the_generator(policy, smooth_grids):
    grids = smooth_grids(6)
    for mode in ("sample", "random"):
        runs = [
            collect_rollout(
                policy, _env(4), grids, mode=mode, generator=torch.Generator().manual_seed(7)
            )
            for _ in range(2)
        ]
        assert torch.equal(runs[0].actions, runs[1].actions)
        assert torch.equal(runs[0].visited, runs[1].visited)


@torch.no_grad()
def test_demonstrations_force_the_masked_actions(policy, smooth_grids):
    grids = smooth_grids(4)
    demo = torch.full((2, 4), 7, dtype=torch.int64)
    mask = torch.tensor([[True, True, False, False], [True, False, True, False]])
    r = collect_rollout(
        policy,
        _env(),
        grids,
        mode="greedy",
        starts=torch.zeros(4, dtype=torch.int64),
        demonstrations=(demo, mask),
    )
    assert torch.equal(r.supervised, mask)
    assert bool((r.actions[mask] == 7).all())
    free = collect_rollout(
        policy, _env(), grids, mode="greedy", starts=torch.zeros(4, dtype=torch.int64)
    )
    assert torch.equal(r.actions[0, 2:], free.actions[0, 2:])
    with pytest.raises(ValueError, match=r"demonstration mask must have shape \[2, 4\]"):
        collect_rollout(policy, _env(), grids, mode="greedy", demonstrations=(demo, mask[:1]))


def test_rollout_is_differentiable(policy, smooth_grids):
    policy.train()
    r = collect_rollout(policy, _env(), smooth_grids(4), mode="sample")
    (r.rec_errors.sum() + r.log_probs.sum()).backward()
    assert all(p.grad is not None for p in policy.decode.parameters())
    assert all(p.grad is not None for p in policy.act.parameters())


def _backward_nodes(root: torch.Tensor) -> set[str]:
    seen, todo, names = set(), [root.grad_fn], set()
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.add(type(node).__name__)
        todo.extend(next_node for next_node, _ in node.next_functions)
    return names


def test_each_quantity_is_stacked_once_not_written_glimpse_by_glimpse(policy, smooth_grids):
    """Written into slices of preallocated tensors, every glimpse's value would cost a copy, and
    in the backward pass a zero-filled gradient and copies (CopySlices): kernels
    a GPU's step is bound by the count of."""
    policy.train()
    critic = PartialObservabilityCritic(CFG).train()
    r = collect_rollout(policy, _env(4), smooth_grids(4), mode="sample", critic=critic)
    assert r.values is not None
    loss = r.rec_errors.sum() + r.log_probs.sum() + r.entropies.sum() + r.values.sum()
    nodes = _backward_nodes(loss)
    assert "StackBackward0" in nodes
    assert "CopySlices" not in nodes
    # Under bf16 autocast the critic computes in bfloat16; its values are kept in float32.
    with torch.autocast("cpu", dtype=torch.bfloat16):
        r = collect_rollout(policy, _env(), smooth_grids(4), mode="sample", critic=critic)
    assert r.values is not None
    assert {t.dtype for t in (r.rec_errors, r.log_probs, r.entropies, r.values)} == {torch.float32}


def test_log_probabilities_and_entropies_are_taken_once_per_episode(policy, smooth_grids):
    """Every glimpse's action probabilities are stacked and their logs taken once: bit for bit
    the per-glimpse values, in one set of kernels for the episode, forward and backward."""
    policy.train()
    seen: list[torch.Tensor] = []

    def choose(probs: torch.Tensor) -> torch.Tensor:
        seen.append(probs)
        return probs.argmax(1)

    r = collect_rollout(policy, _env(4), smooth_grids(4), mode="sample", choose=choose)
    assert len(seen) == 3
    for t, probs in enumerate(seen):
        logp = torch.log(probs.gather(1, r.actions[t][:, None]).squeeze(1) + 1e-7)
        assert torch.equal(r.log_probs[t], logp)
        assert torch.equal(r.entropies[t], -(probs * torch.log(probs + 1e-7)).sum(1))
    logs, todo, done = 0, [(r.log_probs.sum() + r.entropies.sum()).grad_fn], set()
    while todo:
        node = todo.pop()
        if node is None or node in done:
            continue
        done.add(node)
        logs += type(node).__name__ == "LogBackward0"
        todo.extend(next_node for next_node, _ in node.next_functions)
    assert logs == 2  # one for the chosen actions', one for the entropies' (T - 1 = 3 glimpses)
