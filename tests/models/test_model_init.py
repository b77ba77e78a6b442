"""Initialisation schemes, including the untouched sense_pro and BN.

The authors' schemes are in docs/paper-reference.md §3.9.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from torch import nn

from pyskick.models import (
    CompletionPolicy,
    FullObservabilityCritic,
    PartialObservabilityCritic,
    init_weights_,
    preset,
)

WEIGHTED = (nn.Linear, nn.Conv2d, nn.ConvTranspose2d)
INITIALISED = ("sense_im", "fuse", "act", "decode")


def build(scheme: str) -> tuple[CompletionPolicy, nn.Module, nn.Module]:
    cfg = dataclasses.replace(preset("paper-sun360"), init=scheme)
    policy = CompletionPolicy(cfg)
    return policy, PartialObservabilityCritic(cfg), FullObservabilityCritic(cfg, policy.sense_im)


def weighted_layers(*modules: nn.Module) -> list[nn.Module]:
    return [m for module in modules for m in module.modules() if isinstance(m, WEIGHTED)]


def test_xavier_scheme() -> None:
    torch.manual_seed(0)
    policy, partial, full = build("xavier")
    layers = weighted_layers(*(policy.get_submodule(n) for n in INITIALISED), partial, full)
    assert len(layers) == 4 + 2 + 3 + 4 + 3 + 2 + 3  # sense_im, fuse, act, decode, critics
    outputs = {id(partial.output_layer), id(full.output_layer)}
    for layer in layers:
        # The critics' output layers start silent (docs/deviations.md K6).
        assert torch.all(layer.bias == (0.0 if id(layer) in outputs else 0.01))
    assert torch.count_nonzero(partial.output_layer.weight) == 0
    assert torch.count_nonzero(full.output_layer.weight) == 0
    lstm = policy.aggregate
    assert torch.all(lstm.bias_ih_l0 == 0.01)
    assert torch.all(lstm.bias_hh_l0 == 0.01)
    gate_bias = (lstm.bias_ih_l0 + lstm.bias_hh_l0).detach()
    torch.testing.assert_close(gate_bias, torch.full((1024,), 0.02))
    # xavier_normal with gain 1: std = sqrt(2 / (fan_in + fan_out)); (1024, 256) -> 0.0395
    assert lstm.weight_hh_l0.std().item() == pytest.approx(math.sqrt(2 / 1280), rel=0.02)
    assert lstm.weight_ih_l0.std().item() == pytest.approx(0.0395, rel=0.02)
    assert policy.decode[1].weight.std().item() == pytest.approx(math.sqrt(2 / 1280), rel=0.02)
    # ConvTranspose2d(256, 128, 5): fan_in = 128 * 25, fan_out = 256 * 25
    deconv_std = math.sqrt(2 / ((128 + 256) * 25))
    assert policy.decode[6].weight.std().item() == pytest.approx(deconv_std, rel=0.02)


def test_batchnorm_keeps_pytorch_defaults() -> None:
    for scheme in ("xavier", "normal", "uniform"):
        policy, partial, full = build(scheme)
        norms = [
            m
            for module in (policy, partial, full)
            for m in module.modules()
            if isinstance(m, nn.BatchNorm1d)
        ]
        assert len(norms) == 3 + 1 + 2  # fuse, act, decode; partial critic; full critic + fuse
        for norm in norms:
            assert torch.all(norm.weight == 1)
            assert torch.all(norm.bias == 0)


def test_sense_pro_keeps_pytorch_default_init() -> None:
    for scheme in ("xavier", "normal", "uniform"):
        torch.manual_seed(1)
        layer = build(scheme)[0].sense_pro[0]
        bound = 1 / math.sqrt(3)  # nn.Linear default: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
        assert layer.weight.abs().max() <= bound
        assert layer.bias.abs().max() <= bound
        assert not torch.all(layer.bias == 0.01)
        assert layer.weight.abs().max() > 0.1  # wider than both "normal" and "uniform" would give


def test_normal_scheme() -> None:
    torch.manual_seed(0)
    policy, _, _ = build("normal")
    assert policy.decode[1].weight.std().item() == pytest.approx(0.001, rel=0.02)
    assert policy.aggregate.weight_ih_l0.std().item() == pytest.approx(0.001, rel=0.02)
    assert torch.all(policy.aggregate.bias_hh_l0 == 0.01)
    for layer in weighted_layers(policy.sense_im, policy.act):
        assert torch.all(layer.bias == 0.01)


def test_uniform_scheme() -> None:
    torch.manual_seed(0)
    policy, _, _ = build("uniform")
    for name in (
        "decode.1.weight",
        "decode.1.bias",
        "aggregate.weight_hh_l0",
        "aggregate.bias_ih_l0",
    ):
        param = policy.get_parameter(name)
        assert param.abs().max() <= 0.1
        assert param.abs().max() > 0.09
    assert policy.decode[1].weight.std().item() == pytest.approx(0.2 / math.sqrt(12), rel=0.02)


def test_unknown_scheme_is_rejected() -> None:
    with pytest.raises(ValueError, match="xavier, normal, uniform"):
        init_weights_(nn.Linear(2, 2), "he")  # type: ignore[arg-type]
