"""TrainConfig: presets, validation, plain-dict round trip, TOML and overrides."""

from __future__ import annotations

import json

import pytest
import torch

from pyskick.config import RUNTIME_FIELDS, TRAIN_PRESETS, TrainConfig, load_config, train_preset


def test_paper_defaults():
    cfg = TrainConfig()
    assert (cfg.T, cfg.batch_size, cfg.lr, cfg.weight_decay) == (4, 32, 1e-4, 1e-6)
    assert (cfg.grad_clip, cfg.lambda_entropy, cfg.critic_coeff) == (10.0, 1e-4, 1e-2)
    assert (cfg.critic, cfg.actor, cfg.seed, cfg.frozen_batchnorm) == (
        "average",
        "learned",
        123,
        "train",
    )


@pytest.mark.parametrize("name", sorted(TRAIN_PRESETS))
def test_presets_round_trip_through_json(name):
    cfg = train_preset(name)
    assert TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def test_cpu_demo_is_small_and_short():
    cfg = train_preset("cpu-demo")
    assert cfg.model == "cpu-demo"
    assert cfg.epochs <= 5


@pytest.mark.parametrize("name", sorted(TRAIN_PRESETS))
def test_every_preset_runs_where_the_machine_allows(name: str) -> None:
    """Issue 26: cpu-demo pinned the CPU, so the README's flow stayed there on a GPU machine."""
    assert train_preset(name).device == "auto"


@pytest.mark.parametrize(
    ("changes", "error", "field"),
    [
        ({"T": 0}, ValueError, "T"),
        ({"batch_size": 2.0}, TypeError, "batch_size"),
        ({"lr": 0.0}, ValueError, "lr"),
        ({"lambda_entropy": -1.0}, ValueError, "lambda_entropy"),
        ({"critic": ""}, ValueError, "critic"),
        ({"actor": 3}, ValueError, "actor"),
        ({"hybrid_schedule": 0}, ValueError, "hybrid_schedule"),
        ({"model": "resnet"}, ValueError, "model"),
        ({"memorize": 1}, TypeError, "memorize"),
        ({"grad_clip": float("nan")}, ValueError, "grad_clip"),
    ],
)
def test_invalid_values_name_the_field(changes, error, field):
    with pytest.raises(error, match=rf"TrainConfig\.{field}\b") as info:
        TrainConfig().replace(**changes)
    assert "\n" not in str(info.value)


def test_unknown_keys_are_listed():
    with pytest.raises(ValueError, match="unknown keys gamma"):
        TrainConfig.from_dict({"gamma": 0.99})


def test_unknown_preset():
    with pytest.raises(ValueError, match="valid presets: paper-sun360"):
        train_preset("huge")


def test_toml_then_overrides(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('preset = "cpu-demo"\nT = 3\nlr = 1\ncritic = "critic"\n')
    cfg = load_config(path, overrides={"T": 5, "seed": None})
    assert cfg.model == "cpu-demo"
    assert cfg.T == 5
    assert cfg.lr == 1.0
    assert cfg.critic == "critic"
    assert cfg.seed == 123
    assert load_config(path, preset="paper-modelnet").model == "paper-modelnet"


@pytest.mark.parametrize(
    ("line", "override", "error"),
    [
        ('lr = "fast"', {"lr": 0.001}, "TrainConfig.lr must be a number"),
        ("batch_size = 2.5", {"batch_size": 4}, "TrainConfig.batch_size must be an int"),
    ],
)
def test_a_bad_value_in_the_file_is_an_error_where_an_override_gives_the_field_too(
    tmp_path, line, override, error
):
    path = tmp_path / "run.toml"
    path.write_text(line + "\n")
    with pytest.raises(ValueError, match=f"config file {path}: {error}"):
        load_config(path, overrides=override)


def test_toml_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_config(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("T = \n")
    with pytest.raises(ValueError, match="not valid TOML"):
        load_config(bad)
    nested = tmp_path / "nested.toml"
    nested.write_text("[model]\nwidth = 3\n")
    with pytest.raises(ValueError, match="must be flat"):
        load_config(nested)


@pytest.mark.parametrize(
    "name", ["cuda_graph", "channels_last", "compile", "decode_once", "cudnn_benchmark"]
)
def test_speed_switches_are_bools_off_by_default_that_a_resumed_run_may_change(name):
    assert getattr(TrainConfig(), name) is False
    assert name in RUNTIME_FIELDS
    with pytest.raises(TypeError, match=rf"TrainConfig\.{name} must be a bool"):
        TrainConfig(**{name: "yes"})
    config = TrainConfig(**{name: True})
    assert TrainConfig.from_dict(config.to_dict()) == config


def test_packed_convs_is_a_choice_a_resumed_run_may_change():
    assert TrainConfig().packed_convs == "auto"
    assert "packed_convs" in RUNTIME_FIELDS
    refused = r"TrainConfig\.packed_convs must be one of auto, grouped, per-run, got 'x'"
    with pytest.raises(ValueError, match=refused):
        TrainConfig(packed_convs="x")  # type: ignore[arg-type]
    config = TrainConfig(packed_convs="per-run")
    assert TrainConfig.from_dict(config.to_dict()) == config


def test_cudnn_benchmark_excludes_deterministic_algorithms():
    with pytest.raises(ValueError, match="cudnn_benchmark and deterministic exclude each other"):
        TrainConfig(cudnn_benchmark=True, deterministic=True)
    # and a resumed run that asks for it is refused the same way
    with pytest.raises(ValueError, match="exclude each other"):
        TrainConfig(deterministic=True).replace(cudnn_benchmark=True)


def test_cudnn_benchmark_turns_the_autotuner_on_and_false_leaves_it_alone(
    tmp_path, tiny_config, tiny_data, monkeypatch
):
    from pyskick.training.trainer import Trainer

    monkeypatch.setattr(torch.backends.cudnn, "benchmark", False)
    Trainer(tiny_config, tmp_path / "a", tiny_data, stage="pretrain").setup()
    assert torch.backends.cudnn.benchmark is False
    tuned = tiny_config.replace(cudnn_benchmark=True)
    Trainer(tuned, tmp_path / "b", tiny_data, stage="pretrain").setup()
    assert torch.backends.cudnn.benchmark is True
    Trainer(tiny_config, tmp_path / "c", tiny_data, stage="pretrain").setup()
    assert torch.backends.cudnn.benchmark is True  # the process's setting, left alone
