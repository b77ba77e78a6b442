"""Packed networks: R runs of one architecture as one module give what the R modules give
alone (forward, gradients, BatchNorm statistics), and pack/unpack are exact."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from pyskick.models import (
    CompletionPolicy,
    FullObservabilityCritic,
    PartialObservabilityCritic,
    preset,
)
from pyskick.models.memory_format import use_channels_last
from pyskick.models.packed import (
    PACKED_CONVS,
    PackedCompletionPolicy,
    PackedConv2d,
    PackedConvTranspose2d,
    episodes_first,
    pack,
    pack_state,
    runs_first,
    set_packed_convs,
    unpack,
    unpack_into,
)


def _config(N: int = 3, M: int = 4, C: int = 1, view: int = 16, **widths: object):
    return dataclasses.replace(
        preset("cpu-demo"), n_elevations=N, n_azimuths=M, channels=C, view_size=view, **widths
    )


def _interleave(per_run: list[torch.Tensor]) -> torch.Tensor:
    """R tensors ``[B, ...]`` as ``[B * R, ...]``, episode ``b * R + r``."""
    stacked = torch.stack(per_run, dim=1)
    return stacked.reshape(-1, *stacked.shape[2:])


def _close(packed: torch.Tensor, solo: torch.Tensor, scale: float, tol: float = 1e-5) -> None:
    """Equal up to float32 rounding: ``tol`` relative, and ``tol`` of the tensor's (or the
    model's) largest magnitude ``scale`` absolute. Measured over 40 random cases: outputs
    within 7e-6 of their largest value, gradients within 3.1e-5 of the largest gradient
    (three glimpses of LSTM and BatchNorm sum in another order): tolerances 1e-5 and 1e-4; a
    later drawn case put the logits at 2.5e-5, so they are held to 1e-4 too."""
    torch.testing.assert_close(packed, solo, rtol=tol, atol=tol * max(scale, 1e-12))


@st.composite
def shapes(draw: st.DrawFn) -> dict:
    N, M = draw(st.sampled_from([(2, 3), (3, 4), (4, 8)]))
    return {
        "runs": draw(st.integers(1, 4)),
        "batch": draw(st.integers(4, 8)),
        "N": N,
        "M": M,
        "C": draw(st.sampled_from([1, 3])),
        "view": draw(st.sampled_from([16, 24])),
        "known_azimuth": draw(st.booleans()),
        "seed": draw(st.integers(0, 2**31)),
        "train": draw(st.booleans()),
        # Channels-last convolutions (TrainConfig.channels_last) on either side: the same
        # arithmetic to float rounding, held to the same tolerances.
        "packed_channels_last": draw(st.booleans()),
        "solo_channels_last": draw(st.booleans()),
        # How the pack computes its convolutions (TrainConfig.packed_convs): grouped, run by
        # run, or the device's way.
        "convs": draw(st.sampled_from(PACKED_CONVS)),
    }


def _glimpses(case: dict, dtype: torch.dtype) -> tuple[nn.Module, list[CompletionPolicy], list]:
    """Three glimpses of ``case``'s R solo policies and of their pack, in ``dtype``, each
    side's loss backpropagated: the pack, the solo policies and, per glimpse, the packed
    output with the solo outputs interleaved."""
    cfg = _config(
        case["N"], case["M"], case["C"], case["view"], known_azimuth=case["known_azimuth"]
    )
    R, B = case["runs"], case["batch"]
    torch.manual_seed(case["seed"])
    policies = [CompletionPolicy(cfg).train(case["train"]).to(dtype) for _ in range(R)]
    packed = pack(policies).to(dtype)
    assert isinstance(packed, PackedCompletionPolicy)
    set_packed_convs(packed, case.get("convs", "auto"))
    if case["packed_channels_last"]:
        use_channels_last(packed)
    if case["solo_channels_last"]:
        for policy in policies:
            use_channels_last(policy)
    views = [torch.randn(B, cfg.channels, cfg.view_size, cfg.view_size) for _ in range(R)]
    views = [v.to(dtype) for v in views]
    proprio = [torch.randn(B, cfg.proprio_size).to(dtype) for _ in range(R)]
    azimuth = [torch.randint(cfg.n_azimuths, (B,)) for _ in range(R)]
    solo_state = [None] * R
    state = None
    solo_loss = packed_loss = torch.zeros((), dtype=dtype)
    glimpses = []
    for t in range(3):  # three glimpses: the recurrent state is carried in both layouts
        outs = [
            p(v, q, t, s, azimuth=a)
            for p, v, q, s, a in zip(policies, views, proprio, solo_state, azimuth, strict=True)
        ]
        solo_state = [o.state for o in outs]
        out = packed(
            _interleave(views), _interleave(proprio), t, state, azimuth=_interleave(azimuth)
        )
        state = out.state
        glimpses.append(
            (out, {name: _interleave([getattr(o, name) for o in outs]) for name in _OUTPUTS})
        )
        solo_loss = solo_loss + sum(
            o.decoded.square().mean() + o.logits.square().mean() for o in outs
        )
        per_run = runs_first(out.decoded.square().flatten(1), R).mean((1, 2))
        per_run = per_run + runs_first(out.logits.square(), R).mean((1, 2))
        packed_loss = packed_loss + per_run.sum()
    solo_loss.backward()
    packed_loss.backward()
    return packed, policies, glimpses


_OUTPUTS = ("logits", "decoded", "hidden")


@given(shapes())
@settings(max_examples=12, deadline=None)
def test_a_packed_policy_steps_as_its_runs_do(case: dict) -> None:
    packed, policies, glimpses = _glimpses(case, torch.float32)
    for out, expected in glimpses:
        for name in _OUTPUTS:
            # The logits, a product of the last layers in another order, were within 2.5e-5
            # of their largest value in one drawn case (runs 2, batch 7, 3x4x3 views of 24):
            # 1e-4 for them, 1e-5 for the rest.
            tol = 1e-4 if name == "logits" else 1e-5
            _close(getattr(out, name), expected[name], _largest(expected[name]), tol=tol)
    grads = dict(packed.named_parameters())
    scale = max(float(p.grad.abs().max()) for m in policies for p in m.parameters())
    for r, policy in enumerate(policies):
        for name, param in policy.named_parameters():
            # Upstream of max pooling, a near-tie (1e-7 apart) may pick the other input in one
            # of the two and route one element's gradient elsewhere (measured: 2.6e-3 and
            # 1.3e-2 of the gradient's norm where that happened): float64 below.
            if not name.startswith(_BEFORE_MAX_POOLING):
                _close(grads[name].grad[r], param.grad, scale, tol=1e-4)
    # BatchNorm statistics moved per run exactly as alone (train mode).
    state_dict = packed.state_dict()
    for r, policy in enumerate(policies):
        for name, value in policy.state_dict().items():
            if "running" in name or "num_batches" in name:
                _close(state_dict[name][r].double(), value.double(), 1.0)


_BEFORE_MAX_POOLING = ("sense_im.0.", "sense_im.3.", "sense_im.6.")  # the convolutions


@pytest.mark.parametrize(
    ("packed_channels_last", "solo_channels_last"),
    [(False, False), (True, False), (False, True)],
    ids=["contiguous", "packed-channels-last", "solo-channels-last"],
)
@given(shapes())
@settings(max_examples=4, deadline=None)
def test_a_packed_policy_backpropagates_as_its_runs_do_in_float64(
    packed_channels_last: bool, solo_channels_last: bool, case: dict
) -> None:
    """Every gradient, the convolutions' too, in float64 (where no two pooled inputs come
    within rounding of each other), each layout on either side: within 1e-10 of the
    largest."""
    case = dict(
        case, packed_channels_last=packed_channels_last, solo_channels_last=solo_channels_last
    )
    packed, policies, _ = _glimpses(case, torch.float64)
    grads = dict(packed.named_parameters())
    scale = max(float(p.grad.abs().max()) for m in policies for p in m.parameters())
    for r, policy in enumerate(policies):
        for name, param in policy.named_parameters():
            _close(grads[name].grad[r], param.grad, scale, tol=1e-10)


@pytest.mark.parametrize("kind", ["conv", "transposed"])
def test_packed_convolutions_grouped_and_run_by_run_agree(kind: str) -> None:
    """Each way is each run's own convolution (float64, by hand from the solo layers); "auto"
    is run by run on the CPU."""
    torch.manual_seed(0)
    R, B = 3, 2
    if kind == "conv":
        layers = [nn.Conv2d(2, 4, 5, stride=2, padding=2).double() for _ in range(R)]
        packed: nn.Module = PackedConv2d(R, layers[0]).double()
    else:
        layers = [
            nn.ConvTranspose2d(2, 4, 5, stride=2, padding=2, output_padding=1).double()
            for _ in range(R)
        ]
        packed = PackedConvTranspose2d(R, layers[0]).double()
    with torch.no_grad():
        packed.weight.copy_(torch.stack([layer.weight for layer in layers]))
        packed.bias.copy_(torch.stack([layer.bias for layer in layers]))
    x = torch.randn(B, R * 2, 8, 8, dtype=torch.float64)
    parts = x.chunk(R, 1)
    expected = torch.cat([layer(part) for layer, part in zip(layers, parts, strict=True)], 1)
    outputs = {}
    for convs in PACKED_CONVS:
        set_packed_convs(packed, convs)
        outputs[convs] = packed(x)
        torch.testing.assert_close(outputs[convs], expected, rtol=1e-12, atol=1e-12)
    assert torch.equal(outputs["auto"], outputs["per-run"])  # the CPU's way
    calls = []
    packed.grouped = lambda x: calls.append("grouped") or x  # type: ignore[method-assign]
    packed.per_run = lambda x: calls.append("per-run") or x  # type: ignore[method-assign]
    for convs in PACKED_CONVS:
        set_packed_convs(packed, convs)
        packed(x)
    assert calls == ["per-run", "grouped", "per-run"]
    with pytest.raises(ValueError, match="packed convs must be one of auto, grouped, per-run"):
        set_packed_convs(packed, "fused")  # type: ignore[arg-type]


def test_a_packed_policy_under_bf16_autocast_keeps_its_state_as_its_runs_do() -> None:
    """Autocast runs a run alone's nn.LSTM in bfloat16 (oneDNN's), state included: the pack's
    state is bfloat16 too, and three glimpses stay within bfloat16 rounding of the runs'
    (measured over 20 seeds: hidden states within 7.8e-3, reconstructions within 1.5e-3)."""
    case = {"runs": 3, "batch": 5, "N": 3, "M": 4, "C": 3, "view": 16, "known_azimuth": False,
            "seed": 7, "train": True, "packed_channels_last": False,
            "solo_channels_last": False}  # fmt: skip
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, _, glimpses = _glimpses(case, torch.float32)
    for out, expected in glimpses:
        assert out.state[0].dtype == out.state[1].dtype == torch.bfloat16
        assert expected["hidden"].dtype == torch.bfloat16
        torch.testing.assert_close(out.hidden, expected["hidden"], rtol=2e-2, atol=2e-2)
        torch.testing.assert_close(
            out.decoded.float(), expected["decoded"].float(), rtol=2e-2, atol=1e-2
        )


def _largest(x: torch.Tensor) -> float:
    return float(x.detach().abs().max())


@pytest.mark.parametrize("full", [False, True])
def test_packed_critics_value_as_their_runs_do(full: bool) -> None:
    cfg = _config()
    R, B = 3, 4
    torch.manual_seed(0)
    policies = [CompletionPolicy(cfg) for _ in range(R)]
    if full:
        critics = [FullObservabilityCritic(cfg, p.sense_im) for p in policies]
    else:
        critics = [PartialObservabilityCritic(cfg) for _ in range(R)]
    for critic in critics:  # the output layer starts at zero: give it weights to compare
        torch.nn.init.normal_(critic.output_layer.weight)
    packed_policy = pack(policies)
    packed = pack(critics, image_encoder=packed_policy.sense_im)
    hidden = [torch.randn(B, cfg.hidden_size) for _ in range(R)]
    proprio = [torch.randn(B, cfg.proprio_size) for _ in range(R)]
    azimuth = [torch.randint(cfg.n_azimuths, (B,)) for _ in range(R)]
    grid = [torch.randn(B, cfg.n_elevations, cfg.n_azimuths, 1, 16, 16) for _ in range(R)]
    if full:
        solo = [
            c(h, q, 1, g, azimuth=a)
            for c, h, q, g, a in zip(critics, hidden, proprio, grid, azimuth, strict=True)
        ]
        out = packed(
            _interleave(hidden),
            _interleave(proprio),
            1,
            _interleave(grid),
            azimuth=_interleave(azimuth),
        )
    else:
        solo = [
            c(h, q, 1, azimuth=a)
            for c, h, q, a in zip(critics, hidden, proprio, azimuth, strict=True)
        ]
        out = packed(_interleave(hidden), _interleave(proprio), 1, azimuth=_interleave(azimuth))
    expected = _interleave(solo)
    _close(out, expected, float(expected.detach().abs().max()))


def test_pack_and_unpack_are_exact_copies() -> None:
    cfg = _config()
    torch.manual_seed(1)
    policies = [CompletionPolicy(cfg) for _ in range(3)]
    for policy in policies[1:]:
        policy.freeze_sense_and_fuse(batchnorm="eval")
    policies[0].freeze_sense_and_fuse(batchnorm="eval")
    packed = pack(policies)
    assert packed.frozen_modules == ("sense_im", "sense_pro", "fuse")
    back = unpack(packed)
    for original, copy in zip(policies, back, strict=True):
        assert copy.frozen_modules == original.frozen_modules
        for name, value in original.state_dict().items():
            assert torch.equal(copy.state_dict()[name], value), name
        assert [p.requires_grad for p in copy.parameters()] == [
            p.requires_grad for p in original.parameters()
        ]
    fresh = [CompletionPolicy(cfg) for _ in range(3)]
    unpack_into(packed, fresh)
    for original, copy in zip(policies, fresh, strict=True):
        assert all(torch.equal(copy.state_dict()[k], v) for k, v in original.state_dict().items())
    assert set(pack_state([p.state_dict() for p in policies])) == set(policies[0].state_dict())


def test_layouts_round_trip() -> None:
    x = torch.arange(24).reshape(6, 4)  # 3 episodes of 2 runs
    per_run = runs_first(x, 2)
    assert per_run.shape == (2, 3, 4)
    assert torch.equal(per_run[1, 2], x[5])  # episode b * R + r = 2 * 2 + 1
    assert torch.equal(episodes_first(per_run), x)


def test_pack_refuses_what_is_not_one_architecture() -> None:
    with pytest.raises(ValueError, match="one kind and one config"):
        pack([CompletionPolicy(_config()), CompletionPolicy(_config(N=2))])
    with pytest.raises(ValueError, match="at least one"):
        pack([])
    with pytest.raises(TypeError, match="cannot pack a Linear"):
        pack([torch.nn.Linear(2, 2)])
    frozen = CompletionPolicy(_config())
    frozen.freeze_sense_and_fuse()
    with pytest.raises(ValueError, match="same frozen modules"):
        pack([CompletionPolicy(_config()), frozen])
    packed = pack([CompletionPolicy(_config()), CompletionPolicy(_config())])
    with pytest.raises(ValueError, match=r"needs B \* 2 episodes, got 3"):
        packed(torch.zeros(3, 1, 16, 16), torch.zeros(3, 3), 0)
