"""Checkpoints: atomic writes, weights-only loads, exact RNG restore, clear errors."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from pyskick.checkpoint import (
    FORMAT_VERSION,
    POLICY_KEYS,
    capture_rng_state,
    load_checkpoint,
    load_run,
    policy_from_state,
    restore_rng_state,
    save_checkpoint,
)
from pyskick.models import CompletionPolicy, ModelConfig


def test_round_trip_with_weights_only(tmp_path: Path) -> None:
    model = torch.nn.Linear(3, 2)
    optim = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(4, 3)).sum().backward()
    optim.step()
    state = {
        "model": model.state_dict(),
        "optim": optim.state_dict(),
        "epoch": 3,
        "config": {"lr": 1e-3, "preset": "cpu-demo", "grid": [4, 8]},
        "rng": capture_rng_state(),
    }
    path = save_checkpoint(tmp_path / "run" / "latest.pt", state)
    raw = torch.load(path, weights_only=True)
    assert raw["format"] == FORMAT_VERSION
    loaded = load_checkpoint(path)
    assert loaded["epoch"] == 3
    assert loaded["config"]["grid"] == [4, 8]
    restored = torch.nn.Linear(3, 2)
    restored.load_state_dict(loaded["model"])
    assert torch.equal(restored.weight, model.weight)
    optim2 = torch.optim.Adam(restored.parameters(), lr=1e-3)
    optim2.load_state_dict(loaded["optim"])
    assert optim2.state_dict()["state"][0]["step"] == optim.state_dict()["state"][0]["step"]
    assert [p.name for p in path.parent.iterdir()] == ["latest.pt"]  # no temp files left


def test_rng_restore_replays_the_same_draws() -> None:
    state = capture_rng_state()
    first = (torch.rand(5), random.random())
    torch.rand(7)  # move on
    restore_rng_state(state)
    second = (torch.rand(5), random.random())
    assert torch.equal(first[0], second[0])
    assert first[1] == second[1]


def test_failed_write_leaves_the_old_checkpoint(tmp_path: Path) -> None:
    path = save_checkpoint(tmp_path / "latest.pt", {"epoch": 1})
    with pytest.raises(Exception, match=r"pickle|serial|lambda|Can.t"):
        save_checkpoint(path, {"epoch": 2, "bad": lambda: None})
    assert load_checkpoint(path)["epoch"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest.pt"]


def test_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.pt")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="not a readable pyskick checkpoint"):
        load_checkpoint(junk)
    foreign = tmp_path / "foreign.pt"
    torch.save({"state_dict": {}}, foreign)
    with pytest.raises(ValueError, match="no 'format' key"):
        load_checkpoint(foreign)
    future = tmp_path / "future.pt"
    torch.save({"format": FORMAT_VERSION + 1}, future)
    with pytest.raises(ValueError, match="upgrade pyskick"):
        load_checkpoint(future)


def test_load_run_reads_best_pt_and_checks_entries(tmp_path: Path) -> None:
    config = ModelConfig.from_dict({"n_elevations": 3, "n_azimuths": 4, "view_size": 16})
    policy = CompletionPolicy(config)
    state = {"model": policy.state_dict(), "model_config": config.to_dict()}
    save_checkpoint(tmp_path / "run" / "best.pt", state)
    with pytest.raises(ValueError, match=r"best.pt is not a pyskick training .*'config'"):
        load_run(tmp_path / "run")
    path, loaded = load_run(tmp_path / "run", keys=POLICY_KEYS)
    assert path == tmp_path / "run" / "best.pt"
    before = torch.random.get_rng_state()
    rebuilt = policy_from_state(loaded)
    assert torch.equal(torch.random.get_rng_state(), before)  # the caller's RNG is untouched
    assert not rebuilt.training
    for name, value in policy.state_dict().items():
        assert torch.equal(rebuilt.state_dict()[name], value), name


def test_rng_states_of_gpus_this_machine_lacks_are_left_out(monkeypatch):
    """A checkpoint saved with more GPUs visible than the resuming machine shows restores the
    GPUs it has (set_rng_state_all would index a missing device). The CPU stands in for the
    CUDA calls here; the CUDA test below makes them."""
    restored = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda s, i: restored.append((i, s)))
    state = {**_cpu_rng_state(), "cuda": [torch.tensor([1], dtype=torch.uint8),
                                           torch.tensor([2], dtype=torch.uint8)]}  # fmt: skip
    restore_rng_state(state)
    assert [(i, int(s[0])) for i, s in restored] == [(0, 1)]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_checkpoint_of_more_gpus_restores_on_this_one():
    state = capture_rng_state()
    first = state["cuda"][0].clone()
    state["cuda"] = [*state["cuda"], *state["cuda"]]  # as if saved with twice the GPUs
    torch.cuda.manual_seed_all(123)
    restore_rng_state(state)
    assert torch.equal(torch.cuda.get_rng_state(0), first)


def _cpu_rng_state() -> dict:
    state = capture_rng_state()
    state.pop("cuda", None)
    return state
