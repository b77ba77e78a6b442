"""CompletionPolicy behaviour: normalisation, channel order, freezing, gradients, checkpoints."""

from __future__ import annotations

import dataclasses
import io
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import Tensor, nn

from pyskick.models import CompletionPolicy, ModelConfig, preset
from pyskick.models.policy import lstm_cell

CFG = dataclasses.replace(
    preset("cpu-demo"),
    n_elevations=2,
    n_azimuths=4,
    view_size=16,
    conv_channels=(4, 4, 8),
    sense_size=16,
    fuse_size=16,
    hidden_size=12,
    act_size=8,
    decode_start_channels=4,
    deconv_channels=(8, 8),
)
B = 5


def inputs(cfg: ModelConfig = CFG, batch: int = B, seed: int = 0) -> tuple[Tensor, Tensor]:
    gen = torch.Generator().manual_seed(seed)
    view = torch.randn(batch, cfg.channels, cfg.view_size, cfg.view_size, generator=gen)
    proprio = torch.randint(-2, 3, (batch, cfg.proprio_size), generator=gen).float()
    return view, proprio


def episode(policy: CompletionPolicy, steps: int = 4, seed: int = 0) -> list:
    state, outs = None, []
    for t in range(steps):
        out = policy.step(*inputs(policy.config, seed=seed + t), t, state)
        outs.append(out)
        state = out.state
    return outs


torch.manual_seed(0)
EVAL_POLICY = CompletionPolicy(CFG).eval()
HIDDEN = torch.randn(B, CFG.hidden_size)


@settings(max_examples=15, deadline=None)
@given(scale=st.floats(1e-3, 1e3))
def test_decode_is_invariant_to_scaling_h(scale: float) -> None:
    with torch.no_grad():
        torch.testing.assert_close(
            EVAL_POLICY.decode(HIDDEN * scale), EVAL_POLICY.decode(HIDDEN), rtol=1e-4, atol=1e-5
        )


def test_decode_applies_l1_normalisation_first() -> None:
    torch.manual_seed(0)
    policy = CompletionPolicy(CFG).eval()
    hidden = torch.randn(B, CFG.hidden_size) * 7
    layers = nn.Sequential(*policy.decode)  # the decoder's layers without its normalisation
    expected = layers(hidden / hidden.abs().sum(1, keepdim=True)).reshape(B, 2, 4, 3, 16, 16)
    torch.testing.assert_close(policy.decode(hidden), expected)
    assert not torch.allclose(policy.decode(hidden), layers(hidden).reshape(expected.shape))


def test_decoded_channel_order() -> None:
    cfg = dataclasses.replace(CFG, n_elevations=2, n_azimuths=3, channels=2)
    policy = CompletionPolicy(cfg)
    maps: list[Tensor] = []
    policy.decode[-1].register_forward_hook(lambda _m, _i, out: maps.append(out))
    out = policy.step(*inputs(cfg), 0)
    flat = maps[0]
    assert flat.shape == (B, 2 * 3 * 2, 16, 16)
    for n in range(2):
        for m in range(3):
            for c in range(2):
                torch.testing.assert_close(out.decoded[:, n, m, c], flat[:, (n * 3 + m) * 2 + c])


def test_state_threads_through_steps() -> None:
    torch.manual_seed(0)
    policy = CompletionPolicy(CFG).eval()
    view, proprio = inputs()
    with torch.no_grad():
        first = policy.step(view, proprio, 0)
        explicit = policy.step(view, proprio, 0, policy.initial_state(B))
        second = policy.step(view, proprio, 0, first.state)
    torch.testing.assert_close(first.logits, explicit.logits)
    torch.testing.assert_close(first.decoded, explicit.decoded)
    assert not torch.allclose(second.hidden, first.hidden)


def test_time_as_int_or_per_sample_tensor() -> None:
    torch.manual_seed(0)
    policy = CompletionPolicy(CFG).eval()
    hidden = torch.randn(B, CFG.hidden_size)
    _, proprio = inputs()
    with torch.no_grad():
        as_int = policy.act_logits(hidden, proprio, 2)
        as_tensor = policy.act_logits(hidden, proprio, torch.full((B,), 2))
        other = policy.act_logits(hidden, proprio, 3)
    torch.testing.assert_close(as_int, as_tensor)
    assert not torch.allclose(as_int, other)


def test_act_on_azimuth_reads_the_azimuth() -> None:
    torch.manual_seed(0)
    unknown = CompletionPolicy(dataclasses.replace(CFG, act_on_azimuth=True)).eval()
    hidden = torch.randn(B, CFG.hidden_size)
    _, proprio = inputs()
    with pytest.raises(ValueError, match="needs the absolute azimuth"):
        unknown.act_logits(hidden, proprio, 0)
    with torch.no_grad():
        a = unknown.act_logits(hidden, proprio, 0, azimuth=torch.zeros(B))
        b = unknown.act_logits(hidden, proprio, 0, azimuth=torch.full((B,), 5))
    assert not torch.allclose(a, b)

    known_cfg = dataclasses.replace(CFG, act_on_azimuth=True, known_azimuth=True)
    known = CompletionPolicy(known_cfg).eval()
    proprio4 = torch.cat([proprio, torch.full((B, 1), 5.0)], dim=1)
    with torch.no_grad():
        from_proprio = known.act_logits(hidden, proprio4, 0)
        from_argument = known.act_logits(hidden, proprio4, 0, azimuth=torch.full((B,), 5))
    torch.testing.assert_close(from_proprio, from_argument)


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        (
            {"view": torch.randn(B, 1, 16, 16)},
            ValueError,
            r"view must have shape \[\*, 3, 16, 16\]",
        ),
        ({"view": torch.zeros(B, 3, 16, 16, dtype=torch.uint8)}, TypeError, "view must be a float"),
        ({"proprio": torch.zeros(B, 4)}, ValueError, r"proprio must have shape \[5, 3\]"),
        ({"proprio": torch.zeros(B + 1, 3)}, ValueError, r"proprio must have shape \[5, 3\]"),
        ({"time": torch.zeros(B + 1)}, ValueError, r"time must be an int or have shape \[5\]"),
        ({"state": (torch.zeros(B, 7), torch.zeros(B, 12))}, ValueError, r"state h must have"),
    ],
)
def test_bad_inputs_are_rejected(change: dict, error: type[Exception], match: str) -> None:
    view, proprio = inputs()
    args = {"view": view, "proprio": proprio, "time": 0, "state": None} | change
    with pytest.raises(error, match=match):
        CompletionPolicy(CFG).step(**args)


def test_freeze_keeps_batchnorm_statistics_live_in_train_mode() -> None:
    torch.manual_seed(0)
    policy = CompletionPolicy(CFG)
    policy.freeze_sense_and_fuse()
    assert policy.frozen_modules == ("sense_im", "sense_pro", "fuse")
    frozen = {n: p.detach().clone() for n, p in policy.named_parameters() if not p.requires_grad}
    assert set(frozen) == {
        n for n, _ in policy.named_parameters() if n.split(".")[0] in policy.frozen_modules
    }
    trainable = policy.trainable_parameters()
    assert {id(p) for p in trainable} == {
        id(p) for n, p in policy.named_parameters() if n not in frozen
    }
    optimiser = torch.optim.Adam(trainable, lr=1e-2, weight_decay=1e-6)
    before_mean = policy.fuse[3].running_mean.clone()
    before_decode = policy.decode[1].weight.detach().clone()

    policy.train()
    loss = sum(F.mse_loss(out.decoded, torch.zeros_like(out.decoded)) for out in episode(policy))
    optimiser.zero_grad()
    loss.backward()
    optimiser.step()

    assert policy.fuse[3].training
    assert not torch.allclose(policy.fuse[3].running_mean, before_mean)
    assert int(policy.fuse[3].num_batches_tracked) == 4
    for name, value in frozen.items():
        assert torch.equal(policy.get_parameter(name), value), name
        assert policy.get_parameter(name).grad is None
    assert not torch.allclose(policy.decode[1].weight, before_decode)


def test_freeze_with_batchnorm_eval_fixes_statistics() -> None:
    torch.manual_seed(0)
    policy = CompletionPolicy(CFG)
    policy.freeze_sense_and_fuse(include_decode=True, batchnorm="eval")
    assert policy.frozen_modules == ("sense_im", "sense_pro", "fuse", "decode")
    assert policy.trainable_parameters() == [
        p for n, p in policy.named_parameters() if n.split(".")[0] in ("aggregate", "act")
    ]
    policy.eval().train()  # a later train() must not put the frozen BatchNorms back in train mode
    assert policy.training
    assert not policy.fuse[3].training
    assert not policy.decode[0].training
    assert policy.act[4].training
    fuse_mean, act_mean = policy.fuse[3].running_mean.clone(), policy.act[4].running_mean.clone()
    episode(policy)
    assert torch.equal(policy.fuse[3].running_mean, fuse_mean)
    assert not torch.allclose(policy.act[4].running_mean, act_mean)


def test_freeze_rejects_unknown_batchnorm_mode() -> None:
    with pytest.raises(ValueError, match="batchnorm must be 'train' or 'eval'"):
        CompletionPolicy(CFG).freeze_sense_and_fuse(batchnorm="frozen")  # type: ignore[arg-type]


def grads_by_module(policy: CompletionPolicy) -> dict[str, bool]:
    return {
        name: any(p.grad is not None and p.grad.abs().sum() > 0 for p in module.parameters())
        for name, module in policy.named_children()
    }


def test_reconstruction_loss_reaches_aggregate_and_decode_not_act() -> None:
    torch.manual_seed(0)
    policy = CompletionPolicy(CFG)
    outs = episode(policy)
    sum(F.mse_loss(o.decoded, torch.ones_like(o.decoded)) for o in outs).backward()
    assert grads_by_module(policy) == {
        "sense_im": True,
        "sense_pro": True,
        "fuse": True,
        "aggregate": True,
        "act": False,
        "decode": True,
    }


def test_policy_loss_reaches_act_and_aggregate_not_decode() -> None:
    torch.manual_seed(0)
    policy = CompletionPolicy(CFG)
    policy.freeze_sense_and_fuse()
    outs = episode(policy)
    actions = torch.arange(B) % CFG.n_actions
    loss = sum(-F.log_softmax(o.logits, dim=1)[torch.arange(B), actions].mean() for o in outs[:-1])
    loss.backward()
    assert grads_by_module(policy) == {
        "sense_im": False,
        "sense_pro": False,
        "fuse": False,
        "aggregate": True,
        "act": True,
        "decode": False,
    }


def test_determinism_under_manual_seed() -> None:
    def run(seed: int) -> tuple[dict[str, Tensor], Tensor]:
        torch.manual_seed(seed)
        policy = CompletionPolicy(CFG)
        return policy.state_dict(), episode(policy)[-1].decoded

    (state_a, out_a), (state_b, out_b), (state_c, _) = run(3), run(3), run(4)
    for key in state_a:
        assert torch.equal(state_a[key], state_b[key]), key
    assert torch.equal(out_a, out_b)
    assert not torch.equal(state_a["decode.1.weight"], state_c["decode.1.weight"])


def test_checkpoint_round_trip_with_weights_only(tmp_path: Path) -> None:
    torch.manual_seed(0)
    one_view = CompletionPolicy(CFG)
    episode(one_view, steps=1)  # a T=1 pretraining-like forward updates the BN statistics
    path = tmp_path / "one_view.pt"
    torch.save({"model": one_view.state_dict(), "config": CFG.to_dict()}, path)

    checkpoint = torch.load(path, weights_only=True)
    four_view = CompletionPolicy(ModelConfig.from_dict(checkpoint["config"]))
    four_view.load_state_dict(checkpoint["model"], strict=True)
    for key, value in one_view.state_dict().items():
        assert torch.equal(four_view.state_dict()[key], value), key

    one_view.eval()
    four_view.eval()
    with torch.no_grad():
        expected = episode(one_view)
        got = episode(four_view)
    for a, b in zip(expected, got, strict=True):
        assert torch.equal(a.logits, b.logits)
        assert torch.equal(a.decoded, b.decoded)

    four_view.train()
    four_view.freeze_sense_and_fuse()
    assert len(episode(four_view)) == 4


def test_state_dict_is_loadable_from_a_buffer_with_weights_only() -> None:
    buffer = io.BytesIO()
    torch.save(CompletionPolicy(preset("paper-modelnet")).state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    CompletionPolicy(preset("paper-modelnet")).load_state_dict(state, strict=True)
    with pytest.raises(RuntimeError, match="size mismatch"):
        CompletionPolicy(preset("paper-sun360")).load_state_dict(state, strict=True)


def test_config_type_is_checked() -> None:
    with pytest.raises(TypeError, match="config must be a ModelConfig"):
        CompletionPolicy(CFG.to_dict())  # type: ignore[arg-type]


@settings(max_examples=25, deadline=None)
@given(
    batch=st.integers(1, 9),
    inputs=st.integers(1, 20),
    hidden=st.integers(1, 16),
    seed=st.integers(0, 2**31 - 1),
    scale=st.sampled_from([0.1, 1.0, 5.0]),
)
def test_lstm_cell_is_one_step_of_nn_lstm(batch, inputs, hidden, seed, scale):
    """The cell compiled code runs instead of nn.LSTM (which dynamo does not trace)."""
    torch.manual_seed(seed)
    lstm = nn.LSTM(inputs, hidden, num_layers=1)
    x = torch.randn(batch, inputs) * scale
    state = (torch.randn(batch, hidden) * scale, torch.randn(batch, hidden) * scale)
    _, (h, c) = lstm(x[None], (state[0][None], state[1][None]))
    got = lstm_cell(lstm, x, state)
    torch.testing.assert_close(got[0], h[0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got[1], c[0], rtol=1e-5, atol=1e-6)


def test_lstm_cell_by_hand():
    """One unit, weights chosen so each gate's pre-activation is known: i = f = o = 0 (so
    sigmoid = 1/2), g = atanh(1/2)."""
    lstm = nn.LSTM(1, 1)
    with torch.no_grad():
        lstm.weight_ih_l0.zero_()
        lstm.weight_hh_l0.zero_()
        lstm.bias_hh_l0.zero_()
        lstm.bias_ih_l0.copy_(torch.tensor([0.0, 0.0, math.atanh(0.5), 0.0]))
    h, c = lstm_cell(lstm, torch.ones(1, 1), (torch.zeros(1, 1), torch.full((1, 1), 2.0)))
    assert c.item() == pytest.approx(0.5 * 2.0 + 0.5 * 0.5)  # f c + i g
    assert h.item() == pytest.approx(0.5 * math.tanh(1.25))  # o tanh(c)


def test_lstm_cell_under_autocast_computes_as_nn_lstm_does():
    """Autocast runs nn.LSTM in its lower precision, state included: so does the cell."""
    torch.manual_seed(0)
    lstm = nn.LSTM(6, 5)
    x = torch.randn(3, 6)
    state = (torch.randn(3, 5), torch.randn(3, 5))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, (h, c) = lstm(x[None], (state[0][None], state[1][None]))
        got = lstm_cell(lstm, x, state)
    assert got[0].dtype == got[1].dtype == h.dtype == c.dtype == torch.bfloat16
    torch.testing.assert_close(got[0], h[0], rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(got[1], c[0], rtol=2e-2, atol=2e-2)
