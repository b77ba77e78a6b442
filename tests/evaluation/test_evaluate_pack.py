"""evaluate_pack: the R runs of a packed policy evaluated at once give each run's
evaluate_policy alone (the same episodes, starts and motions; float32 rounding apart)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import Tensor

from pyskick.actors import Actor
from pyskick.actors.base import LearnedActor, RandomActor
from pyskick.evaluation import evaluate_pack, evaluate_policy
from pyskick.models import CompletionPolicy, preset
from pyskick.models.packed import pack

CFG = dataclasses.replace(
    preset("cpu-demo"), n_elevations=3, n_azimuths=4, channels=1, view_size=16
)
MEAN = [120.0]


def _grids(n: int, seed: int = 0) -> Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, 3, 4, 1, 16, 16), generator=g, dtype=torch.uint8)


class ForcedActor(Actor):
    """Forces motion ``(index + start + t) % A`` at step t (depends on the sample and start:
    a pack that mixed up episodes would move differently)."""

    name = "forced-test"

    def prepare(self, grids: Tensor, *, T: int, device: torch.device | str) -> None:
        self.T = T

    def mode(self, *, training: bool) -> str:
        return "greedy"

    def forced_actions(self, indices: Tensor, starts: Tensor) -> Tensor:
        steps = torch.arange(self.T - 1, device=indices.device)[:, None]
        return (indices[None] + starts[None] + steps) % CFG.n_actions


class SamplingActor(LearnedActor):
    name = "sampling-test"

    def mode(self, *, training: bool) -> str:
        return "sample"


def _policies(R: int) -> list[CompletionPolicy]:
    out = []
    for r in range(R):
        torch.manual_seed(100 + r)
        out.append(CompletionPolicy(CFG))
    return out


def _actors(kinds, grids: Tensor, T: int) -> list[Actor]:
    made = {"learned": LearnedActor, "random": RandomActor, "forced": ForcedActor}
    actors = [made[kind]() for kind in kinds]
    for actor in actors:
        actor.prepare(grids, T=T, device="cpu")
    return actors


@pytest.mark.parametrize("metric", ["avg", "adv"])
# Passes of one sample (1, 13), of a few at an offset (40: 2, 2, 1 with four runs' 4 starts)
# and of all five (512).
@pytest.mark.parametrize("batch_size", [1, 13, 40, 512])
@pytest.mark.parametrize(
    "kinds", [("learned", "random", "forced", "random"), ("learned",), ("forced", "learned")]
)
def test_a_pack_evaluates_as_its_runs_alone(metric, batch_size, kinds):
    grids, T = _grids(5), 3
    policies = _policies(len(kinds))
    packed = pack(policies)
    actors = _actors(kinds, grids, T)
    seeds = [7 + r for r in range(len(kinds))]
    kw = {"channel_mean": MEAN, "T": T, "metric": metric}
    results = evaluate_pack(packed, grids, actors=actors, seeds=seeds, batch_size=batch_size, **kw)
    assert len(results) == len(kinds)
    assert packed.training  # mode restored
    for policy, actor, seed, result in zip(policies, actors, seeds, results, strict=True):
        alone = evaluate_policy(policy, grids, actor=actor, seed=seed, batch_size=64, **kw)
        assert (result.actor, result.metric) == (alone.actor, alone.metric)
        assert torch.equal(result.starts, alone.starts)
        assert result.samples_sha256 == alone.samples_sha256
        torch.testing.assert_close(result.per_start, alone.per_start, rtol=1e-5, atol=1e-8)
        torch.testing.assert_close(result.per_sample, alone.per_sample, rtol=1e-5, atol=1e-8)


def test_each_run_moves_as_its_own_actor_and_seed():
    """Copies of one network in a pack differ exactly where their motions do."""
    grids, T = _grids(4, seed=3), 3
    (policy,) = _policies(1)
    packed = pack([policy] * 4)
    actors = _actors(("random", "random", "random", "learned"), grids, T)
    a, b, c, d = evaluate_pack(
        packed, grids, actors=actors, seeds=[1, 1, 2, 1], channel_mean=MEAN, T=T, batch_size=24
    )
    torch.testing.assert_close(a.per_start, b.per_start, rtol=0, atol=0)  # same seed
    assert not torch.allclose(a.per_start, c.per_start)  # another seed
    assert not torch.allclose(a.per_start, d.per_start)  # another actor


def test_one_view_and_sample_indices():
    grids = _grids(6, seed=5)
    policies = _policies(2)
    packed = pack(policies)
    actors = _actors(("forced", "learned"), grids, 3)  # prepared on all six
    positions = torch.tensor([5, 1, 3])
    part = grids[positions]
    kw = {"channel_mean": MEAN, "T": 3}
    results = evaluate_pack(
        packed, part, actors=actors, seeds=[0, 0], sample_indices=positions, **kw
    )
    for policy, actor, result in zip(policies, actors, results, strict=True):
        alone = evaluate_policy(policy, part, actor=actor, sample_indices=positions, **kw)
        torch.testing.assert_close(result.per_start, alone.per_start, rtol=1e-5, atol=1e-8)
    ones = evaluate_pack(
        packed, grids, actors=_actors(("learned", "random"), grids, 1), seeds=[0, 0],
        channel_mean=MEAN, T=1, digest=False,
    )  # fmt: skip
    assert ones[0].samples_sha256 is None
    for policy, result in zip(policies, ones, strict=True):
        alone = evaluate_policy(policy, grids, channel_mean=MEAN, T=1)
        torch.testing.assert_close(result.per_start, alone.per_start, rtol=1e-5, atol=1e-8)


class BadForcedActor(ForcedActor):
    """Forces int32 motions: refused as a run alone's would be."""

    name = "bad-forced-test"

    def forced_actions(self, indices: Tensor, starts: Tensor) -> Tensor:
        return super().forced_actions(indices, starts).int()


def test_refusals():
    grids = _grids(2)
    policies = _policies(2)
    packed = pack(policies)
    learned = _actors(("learned",), grids, 3)[0]
    kw = {"channel_mean": MEAN, "T": 3}
    with pytest.raises(ValueError, match="a pack of 2 runs needs 2 actors and seeds, got 1 and 2"):
        evaluate_pack(packed, grids, actors=[learned], seeds=[0, 1], **kw)
    with pytest.raises(TypeError, match="actors must be prepared Actors, got str"):
        evaluate_pack(packed, grids, actors=[learned, "random"], seeds=[0, 1], **kw)  # type: ignore[list-item]
    sampling = SamplingActor()
    with pytest.raises(ValueError, match="'sampling-test' samples its motions at test time"):
        evaluate_pack(packed, grids, actors=[learned, sampling], seeds=[0, 1], **kw)
    with pytest.raises(ValueError, match="T must be a positive int, got 0"):
        evaluate_pack(packed, grids, actors=[learned, learned], seeds=[0, 1], **{**kw, "T": 0})
    with pytest.raises(TypeError, match="uint8"):
        evaluate_pack(packed, grids.float(), actors=[learned, learned], seeds=[0, 1], **kw)
    with pytest.raises(TypeError, match=r"takes a packed policy .* got CompletionPolicy"):
        evaluate_pack(policies[0], grids, actors=[learned], seeds=[0], **kw)  # type: ignore[arg-type]
    bad = BadForcedActor()
    bad.prepare(grids, T=3, device="cpu")
    with pytest.raises(TypeError, match=r"demonstration actions must be a torch\.int64 tensor"):
        evaluate_pack(packed, grids, actors=[learned, bad], seeds=[0, 1], **kw)
    with pytest.raises(TypeError, match=r"demonstration actions must be a torch\.int64 tensor"):
        evaluate_policy(policies[1], grids, actor=bad, **kw)  # the same refusal alone
