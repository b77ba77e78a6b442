"""Decoding an episode's glimpses once (``TrainConfig.decode_once``): the T glimpses' hidden
states decoded in one batch at the last glimpse give what T per-glimpse decodes give, to float32
rounding: each glimpse's BatchNorm statistics and running-statistic updates, the pastes of a
memorizing run, the errors, the gradients; through training, checkpoints and resumption."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from pyskick.checkpoint import load_checkpoint
from pyskick.envs.rollout import collect_rollout, make_env, reconstruction_error
from pyskick.models import CompletionPolicy, preset
from pyskick.models.decode import glimpse_batch_norm
from pyskick.models.packed import PackedBatchNorm1d, pack
from pyskick.training.trainer import train

MEAN = (120.0, 120.0, 120.0)
BUFFERS = ("running_mean", "running_var", "num_batches_tracked")


def _layer(packed: int, features: int, seed: int) -> nn.Module:
    """A BatchNorm1d (packed: R of them) with random affine parameters and running stats."""
    gen = torch.Generator().manual_seed(seed)
    layer: nn.Module = nn.BatchNorm1d(features)
    if packed:
        layer = PackedBatchNorm1d(packed, layer)
    shape = layer.weight.shape
    with torch.no_grad():
        layer.weight.copy_(torch.rand(shape, generator=gen) + 0.5)
        layer.bias.copy_(torch.randn(shape, generator=gen))
        layer.running_mean.copy_(torch.randn(shape, generator=gen))
        layer.running_var.copy_(torch.rand(shape, generator=gen) + 0.5)
    return layer


def _per_glimpse(layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return torch.stack([layer(x[t]) for t in range(x.shape[0])])


@settings(max_examples=40, deadline=None)
@given(
    T=st.integers(1, 5),
    B=st.integers(2, 9),
    features=st.integers(1, 6),
    packed=st.sampled_from([0, 1, 3]),
    training=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_glimpse_batch_norm_is_one_batch_norm_per_glimpse(T, B, features, packed, training, seed):
    layer = _layer(packed, features, seed).train(training)
    twin = copy.deepcopy(layer)
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(T, *((packed,) if packed else ()), B, features, generator=gen) * 3 + 1
    x.requires_grad_(True)
    got = glimpse_batch_norm(layer, x)
    expected = _per_glimpse(twin, x)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    for name in BUFFERS:
        torch.testing.assert_close(getattr(layer, name), getattr(twin, name), rtol=1e-5, atol=1e-6)
    weights = torch.randn(got.shape, generator=gen)
    (grad,) = torch.autograd.grad((got * weights).sum(), x)
    (twin_grad,) = torch.autograd.grad((expected * weights).sum(), x)
    torch.testing.assert_close(grad, twin_grad, rtol=1e-4, atol=1e-5)


def test_glimpse_batch_norm_by_hand():
    layer = nn.BatchNorm1d(1, momentum=0.5, eps=1e-12)  # below float32's resolution here
    # Glimpse 0: samples 1 and 3 (mean 2, biased variance 1, unbiased 2); glimpse 1: 0 and 4
    # (mean 2, biased variance 4, unbiased 8).
    x = torch.tensor([[[1.0], [3.0]], [[0.0], [4.0]]])
    out = glimpse_batch_norm(layer, x)
    torch.testing.assert_close(out.flatten(), torch.tensor([-1.0, 1.0, -1.0, 1.0]))
    # Running mean 0 -> 0.5 * 0 + 0.5 * 2 = 1 -> 0.5 * 1 + 0.5 * 2 = 1.5; variance
    # 1 -> 0.5 + 1 = 1.5 -> 0.75 + 4 = 4.75.
    assert layer.running_mean.tolist() == [1.5]
    assert layer.running_var.tolist() == [4.75]
    assert int(layer.num_batches_tracked) == 2
    layer.eval()  # the running statistics, the same for every glimpse
    out = glimpse_batch_norm(layer, torch.tensor([[[1.5]], [[6.25]]]))
    torch.testing.assert_close(out.flatten(), torch.tensor([0.0, 4.75**0.5]))
    with pytest.raises(ValueError, match="needs a momentum and running statistics"):
        glimpse_batch_norm(nn.BatchNorm1d(1, momentum=None), x)
    # A float64 layer keeps float64 statistics, as its own calls would.
    layer = nn.BatchNorm1d(1, momentum=0.5).double()
    glimpse_batch_norm(layer, x.double())
    assert layer.running_var.dtype == torch.float64
    assert layer.running_var.tolist() == pytest.approx([4.75])


@pytest.mark.parametrize("runs", [0, 3], ids=["alone", "pack"])
def test_decoding_earlier_glimpses_with_the_last_is_decoding_each(runs):
    torch.manual_seed(0)
    config = preset("cpu-demo")
    policy = CompletionPolicy(config)
    if runs:  # each run's own weights and statistics
        policy = pack([CompletionPolicy(config) for _ in range(runs)])
        for name in ("running_mean", "running_var"):
            buffer = getattr(policy.decode[0], name)
            buffer.copy_(torch.rand(buffer.shape) + 0.5)
    policy.train()
    twin = copy.deepcopy(policy)
    T, B = 3, 4
    R = max(runs, 1)
    shape = (runs, B) if runs else (B,)
    earlier = torch.randn(T - 1, *shape, config.hidden_size)
    view = torch.randn(B * R, config.channels, config.view_size, config.view_size)
    proprio = torch.randn(B * R, config.proprio_size)
    out = policy(view, proprio, T - 1, None, earlier_hidden=earlier)
    assert out.decoded is not None
    grid = policy.grid_shape if runs else policy.decode.grid_shape
    assert out.decoded.shape == (T, B * R, *grid)
    # In glimpse order: the running statistics' updates are too.
    each = [twin._decode(h, B) if runs else twin.decode(h) for h in earlier]
    one = twin(view, proprio, T - 1, None)
    torch.testing.assert_close(out.logits, one.logits, rtol=0, atol=0)
    torch.testing.assert_close(out.decoded, torch.stack([*each, one.decoded]), rtol=1e-5, atol=1e-6)
    for name in BUFFERS:
        torch.testing.assert_close(
            getattr(policy.decode[0], name), getattr(twin.decode[0], name), rtol=1e-5, atol=1e-6
        )
    with pytest.raises(ValueError, match="earlier_hidden"):
        policy(view, proprio, 1, None, earlier_hidden=earlier[:, ..., :-1])
    with pytest.raises(ValueError, match="earlier_hidden is decoded with this glimpse"):
        policy(view, proprio, 1, None, decode=False, earlier_hidden=earlier)


def test_reconstruction_errors_of_glimpses_against_one_target():
    target = torch.tensor([[[1.0, 2.0]], [[0.0, 0.0]]])  # [B=2, 1, 2]
    decoded = torch.tensor(
        [[[[1.0, 0.0]], [[1.0, 1.0]]], [[[3.0, 2.0]], [[0.0, 0.0]]]], requires_grad=True
    )  # [T=2, B=2, 1, 2]
    error = reconstruction_error(decoded, target)
    assert error.tolist() == [[2.0, 1.0], [2.0, 0.0]]
    error.sum().backward()
    assert decoded.grad.tolist() == [[[[0.0, -2.0]], [[1.0, 1.0]]], [[[2.0, 0.0]], [[0.0, 0.0]]]]
    with pytest.raises(ValueError, match=r"does not end with target's shape \[2, 1, 2\]"):
        reconstruction_error(decoded[..., :1], target)


def _rollout(policy, grids, *, decode_once, paste, final_only=False, T=4):
    env = make_env(policy.config, T, MEAN)
    return collect_rollout(
        policy,
        env,
        grids,
        mode="sample",
        generator=torch.Generator().manual_seed(1),
        paste=paste,
        final_only=final_only,
        decode_once=decode_once,
    )


@pytest.mark.parametrize("runs", [1, 3], ids=["alone", "pack"])
@pytest.mark.parametrize("paste", [False, True], ids=["no-paste", "pasting"])
@pytest.mark.parametrize("known_azimuth", [False, True], ids=["", "known-azimuth"])
def test_a_rollout_decoding_once_is_the_rollout_decoding_each_glimpse(runs, paste, known_azimuth):
    """Pasting too, each glimpse what it had seen: with a known azimuth the target's frame is
    the grid's, and the slots seen are the episode's own visits, which later steps update."""
    torch.manual_seed(0)
    config = dataclasses.replace(preset("cpu-demo"), known_azimuth=known_azimuth)
    policies = [CompletionPolicy(config) for _ in range(runs)]
    base = policies[0] if runs == 1 else pack(policies)
    shape = (config.n_elevations, config.n_azimuths, config.channels, 32, 32)
    grids = torch.randint(0, 256, (4 * runs, *shape), dtype=torch.uint8)
    results = []
    for once in (False, True):
        policy = copy.deepcopy(base).train()
        rollout = _rollout(policy, grids, decode_once=once, paste=paste)
        (rollout.rec_errors.sum() + rollout.log_probs.sum()).backward()
        results.append((rollout, policy))
    (each, a), (once, b) = results
    assert torch.equal(each.actions, once.actions)
    assert torch.equal(each.visited, once.visited)
    torch.testing.assert_close(once.rec_errors, each.rec_errors, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(once.decoded, each.decoded, rtol=1e-5, atol=1e-6)
    assert once.decoded.shape == each.decoded.shape
    grads = [(p.grad, q.grad) for p, q in zip(a.parameters(), b.parameters(), strict=True)]
    scale = max(float(g.abs().max()) for g, _ in grads if g is not None)
    for g, h in grads:
        assert (g is None) == (h is None)
        if g is not None:
            torch.testing.assert_close(h, g, rtol=1e-4, atol=1e-5 * scale)
    for name in BUFFERS:
        torch.testing.assert_close(
            getattr(b.decode[0], name), getattr(a.decode[0], name), rtol=1e-5, atol=1e-6
        )


def test_decoding_once_changes_nothing_where_one_glimpse_is_decoded():
    torch.manual_seed(0)
    config = preset("cpu-demo")
    policy = CompletionPolicy(config).train()
    shape = (config.n_elevations, config.n_azimuths, config.channels, 32, 32)
    grids = torch.randint(0, 256, (4, *shape), dtype=torch.uint8)
    for kwargs in ({"final_only": True}, {"T": 1}):
        a, b = (
            _rollout(copy.deepcopy(policy), grids, decode_once=once, paste=True, **kwargs)
            for once in (False, True)
        )
        torch.testing.assert_close(a.rec_errors, b.rec_errors, rtol=0, atol=0, equal_nan=True)
        assert torch.equal(a.decoded, b.decoded)


@pytest.mark.parametrize("critic", ["average", "asymm-critic"])
def test_a_step_decoding_once_is_the_step_decoding_each_glimpse(
    tmp_path, pretrained, tiny_config, tiny_data, critic, first_step, assert_same_step
):
    config = tiny_config.replace(epochs=1, critic=critic, memorize=True)
    each, expected = first_step(config, tmp_path / "a", tiny_data, pretrained)
    once, got = first_step(config.replace(decode_once=True), tmp_path / "b", tiny_data, pretrained)
    assert_same_step(got, expected, each.params, once.params)


def test_a_run_decoding_once_trains_resumes_exactly_and_resumes_decoding_each(
    tmp_path, pretrained, tiny_config, tiny_data
):
    config = tiny_config.replace(epochs=3, decode_once=True)
    full = train(config, tmp_path / "full", tiny_data, init=pretrained)
    train(config.replace(epochs=1), tmp_path / "cut", tiny_data, init=pretrained)
    resumed = train(config, tmp_path / "cut", tiny_data, resume=True)
    assert full.history == resumed.history
    # Within float32 rounding of the same run decoding each glimpse, and resumed that way.
    each = train(config.replace(decode_once=False), tmp_path / "each", tiny_data, init=pretrained)
    for a, b in zip(each.history, full.history, strict=True):
        assert b["val_error"] == pytest.approx(a["val_error"], rel=1e-3)
    train(config.replace(epochs=1), tmp_path / "switch", tiny_data, init=pretrained)
    switched = train(config.replace(decode_once=False), tmp_path / "switch", tiny_data, resume=True)
    assert load_checkpoint(switched.run_dir / "latest.pt")["config"]["decode_once"] is False
    assert switched.history[-1]["val_error"] == pytest.approx(
        full.history[-1]["val_error"], rel=1e-3
    )
