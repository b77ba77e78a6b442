"""Channels-last convolutions (``TrainConfig.channels_last``): the same weights and arithmetic
(to float32 rounding) in the layout cuDNN's convolutions compute in, kept through training,
checkpoints and resumption."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from pyskick.checkpoint import load_checkpoint
from pyskick.models import CompletionPolicy, FullObservabilityCritic, preset
from pyskick.models.memory_format import is_channels_last, use_channels_last
from pyskick.models.packed import pack
from pyskick.training.syncs import no_host_syncs
from pyskick.training.trainer import Trainer, train


def test_converting_keeps_the_parameters_and_their_values():
    torch.manual_seed(0)
    policies = [CompletionPolicy(preset("cpu-demo")) for _ in range(3)]
    packed = pack(policies)
    for module in (policies[0], packed):
        before = {name: (p, p.detach().clone()) for name, p in module.named_parameters()}
        assert not is_channels_last(module)
        assert use_channels_last(module) is module
        assert is_channels_last(module)
        for name, param in module.named_parameters():
            assert param is before[name][0]  # an optimizer made before keeps them
            assert torch.equal(param, before[name][1])
    # A packed convolution's grouped weight is a channels-last view, not a copy.
    conv = packed.sense_im[0]
    grouped = conv.weight.reshape(-1, *conv.weight.shape[2:])
    assert grouped.data_ptr() == conv.weight.data_ptr()
    assert grouped.is_contiguous(memory_format=torch.channels_last)
    assert not grouped.is_contiguous()
    # Nothing to convert: a full-observability critic encodes with the policy's convolutions.
    assert is_channels_last(FullObservabilityCritic(preset("cpu-demo"), policies[1].sense_im))
    assert is_channels_last(nn.Linear(2, 3))


@pytest.mark.parametrize("critic", ["average", "asymm-critic"])
def test_a_channels_last_step_is_the_contiguous_step(
    tmp_path, pretrained, tiny_config, tiny_data, critic, first_step, assert_same_step
):
    config = tiny_config.replace(epochs=1, critic=critic)
    plain, expected = first_step(config, tmp_path / "a", tiny_data, pretrained)
    last, got = first_step(
        config.replace(channels_last=True), tmp_path / "b", tiny_data, pretrained
    )
    assert is_channels_last(last.policy)
    assert not is_channels_last(plain.policy)
    assert_same_step(got, expected, plain.params, last.params)


def test_a_channels_last_run_trains_checkpoints_and_resumes_exactly(
    tmp_path, pretrained, tiny_config, tiny_data
):
    config = tiny_config.replace(epochs=3, channels_last=True)
    full = train(config, tmp_path / "full", tiny_data, init=pretrained)
    train(config.replace(epochs=1), tmp_path / "cut", tiny_data, init=pretrained)
    resumed = train(config, tmp_path / "cut", tiny_data, resume=True)
    assert full.history == resumed.history
    x = load_checkpoint(full.run_dir / "latest.pt")
    y = load_checkpoint(resumed.run_dir / "latest.pt")
    assert all(torch.equal(x["model"][k], y["model"][k]) for k in x["model"])
    # The checkpoint loads into a contiguous policy (evaluate, export, --init) unchanged.
    policy = CompletionPolicy(preset("cpu-demo").from_dict(x["model_config"]))
    policy.load_state_dict(x["model"])
    assert not is_channels_last(policy)
    assert all(torch.equal(v, x["model"][k]) for k, v in policy.state_dict().items())
    # Within float32 rounding of the same run in the contiguous layout.
    plain = train(
        config.replace(channels_last=False), tmp_path / "plain", tiny_data, init=pretrained
    )
    for a, b in zip(plain.history, full.history, strict=True):
        assert b["val_error"] == pytest.approx(a["val_error"], rel=1e-3)


def _moments_like_weights(trainer: Trainer) -> bool:
    return all(
        value.stride() == param.stride()
        for param, state in trainer.optimizer.state.items()
        for value in state.values()
        if value.shape == param.shape
    )


@pytest.mark.parametrize("first", [False, True], ids=["then-channels-last", "then-contiguous"])
def test_a_run_resumes_in_the_other_layout(tmp_path, pretrained, tiny_config, tiny_data, first):
    config = tiny_config.replace(epochs=2, channels_last=first)
    full = train(config, tmp_path / "full", tiny_data, init=pretrained)
    train(config.replace(epochs=1), tmp_path / "run", tiny_data, init=pretrained)
    other = config.replace(channels_last=not first)
    trainer = Trainer(other, tmp_path / "run", tiny_data, stage="train", resume=True).setup()
    assert is_channels_last(trainer.policy) is not first
    assert trainer.optimizer.state  # Adam's moments, restored in the weights' layout
    assert _moments_like_weights(trainer)
    more = trainer.fit()
    assert len(more.history) == 2
    assert load_checkpoint(more.run_dir / "latest.pt")["config"]["channels_last"] is not first
    assert more.history[1]["val_error"] == pytest.approx(full.history[1]["val_error"], rel=1e-3)


def test_a_channels_last_pretraining_step_is_the_contiguous_step(tmp_path, tiny_config, tiny_data):
    """Pretraining is where the convolutions learn (Sense is frozen after it)."""
    steps = []
    for channels_last in (False, True):
        config = tiny_config.replace(channels_last=channels_last)
        trainer = Trainer(config, tmp_path / str(channels_last), tiny_data, stage="pretrain")
        trainer.setup()
        trainer.optimizer.step = lambda: None  # the gradients, before the update
        with no_host_syncs():
            metrics = trainer.train_step(next(trainer.batches(0)), 0)
        steps.append((trainer, metrics))
    (plain, expected), (last, got) = steps
    assert is_channels_last(last.policy)
    conv = dict(last.policy.named_parameters())["sense_im.0.weight"]
    assert conv.requires_grad  # the convolutions learn here
    assert conv.grad is not None
    torch.testing.assert_close(got.rec_error, expected.rec_error, rtol=1e-5, atol=1e-7)
    scale = max(float(p.grad.abs().max()) for p in plain.params if p.grad is not None)
    for (name, a), b in zip(plain.policy.named_parameters(), last.policy.parameters(), strict=True):
        if a.grad is not None:
            torch.testing.assert_close(b.grad, a.grad, rtol=1e-4, atol=1e-4 * scale, msg=name)
