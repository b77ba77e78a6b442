"""avg/adv evaluation: starts, determinism, aggregation, actors, loading runs, export."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from pyskick.checkpoint import save_checkpoint
from pyskick.config import train_preset
from pyskick.evaluation.evaluate import evaluate, evaluate_policy, evaluation_starts
from pyskick.models import CompletionPolicy, preset

CFG = dataclasses.replace(
    preset("cpu-demo"), n_elevations=3, n_azimuths=4, channels=1, view_size=16
)


def _grids(n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, 3, 4, 1, 16, 16), generator=g, dtype=torch.uint8)


@pytest.fixture
def policy():
    torch.manual_seed(0)
    return CompletionPolicy(CFG)


def test_starts_of_the_paper():
    assert evaluation_starts(4, 8, "avg").tolist() == [0, 2, 4, 6, 16, 18, 20, 22]
    assert evaluation_starts(5, 9, "avg").numel() == 15
    assert evaluation_starts(4, 8, "adv").tolist() == list(range(32))
    with pytest.raises(ValueError, match="metric must be one of avg, adv"):
        evaluation_starts(4, 8, "max")


def test_avg_and_adv_aggregate_the_same_episodes(policy):
    grids = _grids(5)
    avg = evaluate_policy(policy, grids, channel_mean=[120.0], T=3, metric="avg", batch_size=7)
    adv = evaluate_policy(policy, grids, channel_mean=[120.0], T=3, metric="adv", batch_size=64)
    assert avg.per_start.shape == (5, 4)
    assert adv.per_start.shape == (5, 12)
    torch.testing.assert_close(avg.per_sample, avg.per_start.mean(1))
    torch.testing.assert_close(adv.per_sample, adv.per_start.amax(1))
    # The avg starts are a subset of the adv starts: the same episodes, batched differently.
    torch.testing.assert_close(avg.per_start, adv.per_start[:, avg.starts])
    assert avg.summary.n_samples == 5
    assert avg.summary.mean_x1000 == pytest.approx(float(avg.per_sample.mean()) * 1000)
    assert policy.training  # mode restored


def test_deterministic_and_actor_dependent(policy):
    grids = _grids(4)
    kw = {"channel_mean": [120.0], "T": 3}
    a = evaluate_policy(policy, grids, **kw)
    b = evaluate_policy(policy, grids, **kw)
    assert torch.equal(a.per_start, b.per_start)
    r1 = evaluate_policy(policy, grids, actor="random", seed=3, **kw)
    r2 = evaluate_policy(policy, grids, actor="random", seed=3, **kw)
    r3 = evaluate_policy(policy, grids, actor="random", seed=4, **kw)
    assert torch.equal(r1.per_start, r2.per_start)
    assert not torch.equal(r1.per_start, r3.per_start)
    one = evaluate_policy(policy, grids, channel_mean=[120.0], T=1)
    # Pasting more observed views never hurts; random moves see new views.
    assert bool((a.per_sample <= one.per_sample + 1e-6).all())
    assert r1.summary.mean_x1000 < one.summary.mean_x1000


def test_bad_inputs(policy):
    with pytest.raises(TypeError, match="uint8"):
        evaluate_policy(policy, _grids(2).float(), channel_mean=[120.0], T=2)
    with pytest.raises(ValueError, match=r"shape \[n>0, 3, 4, 1, 16, 16\]"):
        evaluate_policy(policy, _grids(2)[:, :2], channel_mean=[120.0], T=2)
    with pytest.raises(ValueError, match=r"unknown actor 'oracle'; valid names: .*learned"):
        evaluate_policy(policy, _grids(2), channel_mean=[120.0], T=2, actor="oracle")
    with pytest.raises(TypeError, match="actor must be an Actor or a registered name"):
        evaluate_policy(policy, _grids(2), channel_mean=[120.0], T=2, actor=3)  # type: ignore[arg-type]


def test_evaluate_a_saved_run(tmp_path, policy):
    cfg = train_preset("cpu-demo").replace(T=3)
    state = {"model": policy.state_dict(), "model_config": CFG.to_dict(), "config": cfg.to_dict()}
    save_checkpoint(tmp_path / "one" / "best.pt", {**state, "stage": "pretrain"})
    save_checkpoint(tmp_path / "run.pt", {**state, "stage": "train"})
    grids = _grids(3)
    one = evaluate(tmp_path / "one", grids, channel_mean=[120.0])
    assert one.T == 1
    run = evaluate(tmp_path / "run.pt", grids, "adv", channel_mean=[120.0], baseline=one)
    assert run.T == 3
    assert run.metric == "adv"
    expected = (one.summary.mean_x1000 - run.summary.mean_x1000) / one.summary.mean_x1000 * 100
    assert run.improvement_pct == pytest.approx(expected)
    out = run.save(tmp_path / "errors.npz")
    with np.load(out) as saved:
        np.testing.assert_allclose(saved["per_sample"], run.per_sample.numpy())
        assert saved["per_start"].shape == (3, 12)
        assert float(saved["mean_x1000"]) > 0
    assert run.to_dict()["improvement_pct"] == run.improvement_pct
    with pytest.raises(FileNotFoundError):
        evaluate(tmp_path / "nothing", grids, channel_mean=[120.0])
