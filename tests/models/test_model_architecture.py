"""Output shapes for several configs, and parameter counts and layer names of the paper model."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from pyskick.models import (
    CompletionPolicy,
    FullObservabilityCritic,
    ModelConfig,
    PartialObservabilityCritic,
    preset,
)

SMALL = {
    "conv_channels": (4, 4, 8),
    "sense_size": 16,
    "proprio_embed_size": 4,
    "fuse_size": 16,
    "hidden_size": 12,
    "act_size": 8,
    "decode_start_channels": 4,
    "deconv_channels": (8, 8),
    "grid_view_size": 4,
    "grid_size": 8,
}

CONFIGS = {
    "paper-sun360": preset("paper-sun360"),
    "paper-modelnet": preset("paper-modelnet"),
    "cpu-demo": preset("cpu-demo"),
    "5x9x1-small-relu": ModelConfig(
        n_elevations=5, n_azimuths=9, channels=1, mean_subtract=False, **SMALL
    ),
    "4x8x3-small-known-azimuth": ModelConfig(
        known_azimuth=True, act_on_azimuth=True, act_on_time=False, **SMALL
    ),
    "2x3x2-view16": ModelConfig(n_elevations=2, n_azimuths=3, channels=2, view_size=16, **SMALL),
    "4x8x3-view64": ModelConfig(view_size=64, **SMALL),
}


def count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("name", list(CONFIGS))
def test_step_and_critic_shapes(name: str) -> None:
    cfg = CONFIGS[name]
    B, S = 2, cfg.view_size
    policy = CompletionPolicy(cfg)
    view = torch.randn(B, cfg.channels, S, S)
    proprio = torch.randint(-2, 3, (B, cfg.proprio_size)).float()
    state = policy.initial_state(B)
    assert [s.shape for s in state] == [(B, cfg.hidden_size)] * 2
    for t in range(2):
        out = policy.step(view, proprio, t, state)
        state = out.state
    assert out.logits.shape == (B, cfg.n_actions)
    assert out.decoded.shape == (B, cfg.n_elevations, cfg.n_azimuths, cfg.channels, S, S)
    assert out.hidden.shape == (B, cfg.hidden_size)
    assert out.state[0] is out.hidden
    assert out.state[1].shape == (B, cfg.hidden_size)
    torch.testing.assert_close(out.probs.sum(1), torch.ones(B))
    if not cfg.mean_subtract:
        assert out.decoded.min() >= 0  # final ReLU

    grid = torch.randn(B, cfg.n_elevations, cfg.n_azimuths, cfg.channels, S, S)
    azimuth = torch.arange(B)
    partial = PartialObservabilityCritic(cfg)(out.hidden, proprio, 1, azimuth=azimuth)
    full = FullObservabilityCritic(cfg, policy.sense_im)(
        out.hidden, proprio, 1, grid, azimuth=azimuth
    )
    assert partial.shape == full.shape == (B,)


def test_paper_parameter_counts_per_module() -> None:
    policy = CompletionPolicy(preset("paper-sun360"))
    conv = lambda cin, cout: cin * cout * 5 * 5 + cout  # noqa: E731
    linear = lambda fin, fout: fin * fout + fout  # noqa: E731
    bn = lambda n: 2 * n  # noqa: E731
    expected = {
        # 3*32*25+32 = 2432; 32*32*25+32 = 25632; 32*64*25+64 = 51264; 576*256+256 = 147712
        "sense_im": conv(3, 32) + conv(32, 32) + conv(32, 64) + linear(576, 256),
        "sense_pro": linear(3, 16),  # 64
        "fuse": linear(272, 256) + linear(256, 256) + bn(256),  # 69888 + 65792 + 512
        # 4 gates * 256 * (256 + 256) weights + 2 bias vectors of 4 * 256
        "aggregate": 4 * 256 * (256 + 256) + 2 * 4 * 256,
        "act": linear(260, 128) + linear(128, 128) + bn(128) + linear(128, 15),
        # BN 512; 256*1024+1024; deconvs 64*256*25+256, 256*128*25+128, 128*96*25+96
        "decode": bn(256) + linear(256, 1024) + conv(64, 256) + conv(256, 128) + conv(128, 96),
    }
    assert expected == {
        "sense_im": 227040,
        "sense_pro": 64,
        "fuse": 136192,
        "aggregate": 526336,
        "act": 52111,
        "decode": 1800160,
    }
    assert {name: count(m) for name, m in policy.named_children()} == expected
    assert count(policy) == 2741903

    critic = PartialObservabilityCritic(policy.config)
    assert count(critic) == linear(260, 128) + linear(128, 128) + bn(128) + linear(128, 1)
    full = FullObservabilityCritic(policy.config, policy.sense_im)
    # critic_fuse: 256*128+128, then the 32 views' 4096 features -> 256, BN(256)
    assert count(full.critic_fuse) == linear(256, 128) + linear(32 * 128, 256) + bn(256)
    assert count(full.critic) == linear(517, 128) + linear(128, 128) + bn(128) + linear(128, 1)
    assert count(full) == count(full.critic_fuse) + count(full.critic) == 1165441


def test_modelnet_parameter_counts_differ_where_channels_and_views_enter() -> None:
    sun, obj = CompletionPolicy(preset("paper-sun360")), CompletionPolicy(preset("paper-modelnet"))
    # The first conv sees 1 channel instead of 3; the last deconv emits 45 maps instead of 96.
    assert count(sun.sense_im) - count(obj.sense_im) == (3 - 1) * 32 * 25
    assert count(sun.decode) - count(obj.decode) == (96 - 45) * (128 * 25 + 1)
    for name in ("sense_pro", "fuse", "aggregate", "act"):
        assert count(sun.get_submodule(name)) == count(obj.get_submodule(name))


def test_layer_names_and_shapes_match_the_authors_policy() -> None:
    shapes = {
        k: tuple(v.shape) for k, v in CompletionPolicy(preset("paper-sun360")).state_dict().items()
    }
    assert shapes["sense_im.0.weight"] == (32, 3, 5, 5)
    assert shapes["sense_im.3.weight"] == (32, 32, 5, 5)
    assert shapes["sense_im.6.weight"] == (64, 32, 5, 5)
    assert shapes["sense_im.10.weight"] == (256, 576)
    assert shapes["sense_pro.0.weight"] == (16, 3)
    assert shapes["fuse.0.weight"] == (256, 272)
    assert shapes["fuse.3.running_mean"] == (256,)
    assert shapes["aggregate.weight_ih_l0"] == shapes["aggregate.weight_hh_l0"] == (1024, 256)
    assert shapes["act.0.weight"] == (128, 260)
    assert shapes["act.4.running_var"] == (128,)
    assert shapes["act.5.weight"] == (15, 128)
    assert shapes["decode.0.running_mean"] == (256,)
    assert shapes["decode.1.weight"] == (1024, 256)
    assert shapes["decode.4.weight"] == (64, 256, 5, 5)
    assert shapes["decode.6.weight"] == (256, 128, 5, 5)
    assert shapes["decode.8.weight"] == (128, 96, 5, 5)


def test_act_input_widths() -> None:
    cfg = preset("paper-sun360")
    policy = CompletionPolicy(cfg)
    assert policy.act[0].in_features == 260
    full = FullObservabilityCritic(cfg, policy.sense_im)
    assert full.critic[0].in_features == 517
    assert PartialObservabilityCritic(cfg).critic[0].in_features == 260
    wide = dataclasses.replace(cfg, act_on_azimuth=True)
    narrow = dataclasses.replace(cfg, act_on_elevation=False, act_on_time=False)
    assert CompletionPolicy(wide).act[0].in_features == 261
    assert CompletionPolicy(narrow).act[0].in_features == 258
    assert (
        CompletionPolicy(dataclasses.replace(cfg, known_azimuth=True)).sense_pro[0].in_features == 4
    )


def test_final_activation_follows_mean_subtract() -> None:
    on = CompletionPolicy(preset("cpu-demo")).decode[-1]
    off = CompletionPolicy(dataclasses.replace(preset("cpu-demo"), mean_subtract=False)).decode[-1]
    assert isinstance(on, nn.LeakyReLU)
    assert on.negative_slope == 0.8
    assert isinstance(off, nn.ReLU)
