"""ModelConfig: validation, derived sizes, presets and the plain-dict round trip."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyskick.models import INIT_SCHEMES, PRESETS, ModelConfig, preset


def test_paper_defaults_and_derived_sizes() -> None:
    cfg = preset("paper-sun360")
    assert cfg == ModelConfig()
    assert (cfg.n_elevations, cfg.n_azimuths, cfg.channels, cfg.n_actions) == (4, 8, 3, 15)
    assert cfg.proprio_size == 3
    assert cfg.encoder_map_size == 3  # 32 -> 15 -> 7 -> 3 through three k3 s2 pools
    assert cfg.encoder_flat_size == 64 * 3 * 3 == 576
    assert cfg.fuse_input_size == 256 + 16 == 272
    assert cfg.decode_start_size == 4
    assert cfg.decode_linear_size == 64 * 4 * 4 == 1024
    assert cfg.decoded_channels == 4 * 8 * 3 == 96
    assert cfg.act_input_size == 256 + 2 + 1 + 1 == 260
    assert cfg.full_critic_input_size == 256 + 2 + 1 + 1 + 1 + 256 == 517
    assert (cfg.act_on_elevation, cfg.act_on_azimuth, cfg.act_on_time) == (True, False, True)
    assert (cfg.known_azimuth, cfg.mean_subtract, cfg.init) == (False, True, "xavier")


def test_presets() -> None:
    assert set(PRESETS) == {"paper-sun360", "paper-modelnet", "cpu-demo"}
    modelnet = preset("paper-modelnet")
    assert (modelnet.n_elevations, modelnet.n_azimuths, modelnet.channels) == (5, 9, 1)
    assert modelnet.n_views * modelnet.grid_view_size == 5760
    assert preset("paper-sun360").n_views * preset("paper-sun360").grid_view_size == 4096
    demo = preset("cpu-demo")
    assert (demo.n_elevations, demo.n_azimuths, demo.channels) == (4, 8, 3)
    assert demo.conv_channels == (16, 16, 32)
    assert (demo.sense_size, demo.fuse_size, demo.hidden_size, demo.act_size) == (128, 128, 128, 64)
    assert demo.decode_linear_size == 512
    assert demo.deconv_channels == (64, 32)


def test_unknown_preset_lists_valid_names() -> None:
    with pytest.raises(ValueError, match="paper-sun360, paper-modelnet, cpu-demo"):
        preset("paper-sun361")


def test_config_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        ModelConfig().hidden_size = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"view_size": 20}, ValueError, "multiple of 8"),
        ({"view_size": 8}, ValueError, "at least 16"),
        ({"hidden_size": 0}, ValueError, "hidden_size must be positive"),
        ({"n_actions": 15.0}, TypeError, "n_actions must be an int"),
        ({"channels": True}, TypeError, "channels must be an int"),
        ({"known_azimuth": 1}, TypeError, "known_azimuth must be a bool"),
        ({"init": "kaiming"}, ValueError, "xavier, normal, uniform"),
        ({"conv_channels": (32, 32)}, TypeError, "conv_channels must be a tuple of 3"),
        ({"deconv_channels": [256, 128]}, TypeError, "deconv_channels must be a tuple of 2"),
    ],
)
def test_invalid_values_are_rejected(kwargs: dict, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        ModelConfig(**kwargs)


def test_to_dict_is_plain_and_json_serialisable() -> None:
    data = preset("cpu-demo").to_dict()
    assert data["conv_channels"] == [16, 16, 32]
    assert all(isinstance(v, int | bool | str | list) for v in data.values())
    assert ModelConfig.from_dict(json.loads(json.dumps(data))) == preset("cpu-demo")


def test_from_dict_rejects_unknown_keys_and_fills_defaults() -> None:
    with pytest.raises(ValueError, match="unknown keys hiden_size"):
        ModelConfig.from_dict({"hiden_size": 3})
    assert ModelConfig.from_dict({"channels": 1}) == ModelConfig(channels=1)
    with pytest.raises(TypeError, match="needs a mapping, got list"):
        ModelConfig.from_dict([("channels", 1)])  # type: ignore[arg-type]


@settings(max_examples=50, deadline=None)
@given(
    n_elevations=st.integers(1, 6),
    n_azimuths=st.integers(1, 12),
    channels=st.integers(1, 4),
    view_size=st.sampled_from([16, 24, 32, 64]),
    conv_channels=st.tuples(*[st.integers(1, 64)] * 3),
    known_azimuth=st.booleans(),
    act_on_azimuth=st.booleans(),
    act_on_time=st.booleans(),
    init=st.sampled_from(INIT_SCHEMES),
)
def test_dict_round_trip(**kwargs: object) -> None:
    cfg = ModelConfig(**kwargs)  # type: ignore[arg-type]
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
