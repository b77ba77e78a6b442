"""A training step never waits for the device: no value read back, no shape that depends on
values, no copy between host and device (``pyskick.training.syncs``), for every method. And
within an epoch it launches the same operators with the same arguments for every batch, and
updates its state in place: what a CUDA graph of it replays (``pyskick.training.graphs``)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from pyskick.envs.lookaround import LookAroundEnv
from pyskick.sidekicks.demo import DemoSidekick
from pyskick.sidekicks.reward import RewardSidekick
from pyskick.training.pack import PackMember, PackTrainer
from pyskick.training.syncs import HostSyncError, no_host_syncs
from pyskick.training.trainer import Trainer

MEAN = (120.0,)

# name -> (config changes, sidekick factory)
METHODS = {
    "ltla": ({}, None),
    "rnd-actions": ({"actor": "random"}, None),
    "ours(rew)": ({}, lambda one: RewardSidekick(one, channel_mean=MEAN, decay_every=1)),
    "ours(demo)": ({}, lambda one: DemoSidekick(one, channel_mean=MEAN, hybrid_schedule=1)),
    "ltla+ac": ({"critic": "critic"}, None),
    "asymm-ac": ({"critic": "asymm-critic"}, None),
    "ours(rew)+ac": (
        {"critic": "critic"},
        lambda one: RewardSidekick(one, channel_mean=MEAN, decay_every=1),
    ),
    "ours(demo)+ac": (
        {"critic": "critic"},
        lambda one: DemoSidekick(one, channel_mean=MEAN, hybrid_schedule=1),
    ),
    # Every glimpse decoded at the last (decode_once), with the pastes of memorize.
    "ltla, decoding once": ({"decode_once": True, "memorize": True}, None),
}


@pytest.mark.parametrize("method", list(METHODS))
def test_training_steps_make_no_host_synchronisation(
    tmp_path, pretrained, tiny_config, tiny_data, method
):
    changes, make = METHODS[method]
    config = tiny_config.replace(epochs=2, **changes)
    sidekick = make(pretrained) if make is not None else None
    trainer = Trainer(
        config, tmp_path / "t", tiny_data, stage="train", init=pretrained, sidekick=sidekick
    ).setup()
    before = {k: v.clone() for k, v in trainer.policy.state_dict().items()}
    steps = 0
    for epoch in range(2):  # the second epoch: the demo sidekick's T_sup has dropped to 1
        for batch in trainer.batches(epoch):
            with no_host_syncs():
                metrics = trainer.train_step(batch, epoch)
            steps += 1
        trainer.sidekick.on_epoch_end(epoch)
    assert steps == 4
    assert torch.isfinite(torch.stack(list(metrics))).all()
    after = trainer.policy.state_dict()
    assert not torch.equal(before["aggregate.weight_hh_l0"], after["aggregate.weight_hh_l0"])


class OperatorTrace(TorchDispatchMode):
    """Every operator run, with its tensors' shapes and its other arguments' values."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, Any]] = []
        self.paused = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self.paused and not str(func).startswith("profiler."):  # named ranges
            self.calls.append((str(func), _describe((args, sorted(kwargs.items())))))
        return func(*args, **kwargs)


def _describe(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), str(value.dtype), value.device.type)
    if isinstance(value, torch.Generator):
        return "generator"
    if isinstance(value, list | tuple):
        return tuple(_describe(v) for v in value)
    if isinstance(value, torch.dtype | torch.device | torch.memory_format | torch.layout):
        return str(value)
    if isinstance(value, float) and value != value:
        return "nan"  # equal to itself, unlike NaN
    return value


def _state_addresses(trainer: Trainer) -> list[int]:
    """Where the state a step updates lives: weights, Adam's state, the baseline's sums."""
    tensors = list(trainer.params)
    tensors += [
        t for s in trainer.optimizer.state.values() for t in s.values() if torch.is_tensor(t)
    ]
    tensors += [trainer.baseline.sums, trainer.control_variate.sums]
    return [t.data_ptr() for t in tensors]


@pytest.mark.parametrize("method", list(METHODS))
def test_the_steps_of_an_epoch_replay_the_same_operators(
    tmp_path, pretrained, tiny_config, tiny_data, method
):
    changes, make = METHODS[method]
    config = tiny_config.replace(epochs=2, batch_size=4, **changes)
    sidekick = make(pretrained) if make is not None else None
    trainer = Trainer(
        config, tmp_path / "t", tiny_data, stage="train", init=pretrained, sidekick=sidekick
    ).setup()
    trace = OperatorTrace()
    # Adam on the CPU computes its bias corrections on the host (a capturable Adam, which a
    # graph needs, does it on the device): its step is left out.
    trainer.optimizer.register_step_pre_hook(lambda *_: setattr(trace, "paused", True))
    trainer.optimizer.register_step_post_hook(lambda *_: setattr(trace, "paused", False))
    batches = list(trainer.batches(0))
    assert len(batches) == 4
    trainer.train_step(batches[0], 0)  # the first creates Adam's state (and calibrates)
    addresses = _state_addresses(trainer)
    traces = []
    for batch in batches[1:]:
        trace.calls = []
        with trace:
            trainer.train_step(batch, 0)
        traces.append(trace.calls)
    assert len(traces[0]) > 100
    assert traces[1] == traces[0]
    assert traces[2] == traces[0]
    assert _state_addresses(trainer) == addresses


@pytest.mark.parametrize("decode_once", [False, True], ids=["", "decoding-once"])
def test_the_steps_of_a_packs_epoch_replay_the_same_operators(
    tmp_path, pretrained, tiny_config, tiny_data, decode_once
):
    # ltla, ours(rew), ours(demo) and rnd-actions in one pack, as reproduce packs them.
    config = tiny_config.replace(epochs=2, batch_size=4, decode_once=decode_once)
    members = [
        PackMember(config.replace(**METHODS[name][0]), tmp_path / str(r), init=pretrained,
                   sidekick=None if METHODS[name][1] is None else METHODS[name][1](pretrained))
        for r, name in enumerate(["ltla", "ours(rew)", "ours(demo)", "rnd-actions"])
    ]  # fmt: skip
    pack = PackTrainer(members, tiny_data).setup()
    trace = OperatorTrace()
    pack.optimizer.optimizer.register_step_pre_hook(lambda *_: setattr(trace, "paused", True))
    pack.optimizer.optimizer.register_step_post_hook(lambda *_: setattr(trace, "paused", False))
    scales = torch.ones(4, dtype=torch.float64)
    batches = list(pack.batches(0))
    assert len(batches) == 4
    pack.train_step(batches[0], 0, scales)

    def addresses() -> list[int]:
        state = pack.optimizer.optimizer.state.values()
        tensors = [*pack.params, pack.baselines.sums, pack.baselines.cv]
        tensors += [t for s in state for t in s.values() if torch.is_tensor(t)]
        return [t.data_ptr() for t in tensors]

    before = addresses()
    traces = []
    for batch in batches[1:]:
        trace.calls = []
        with trace, no_host_syncs():
            pack.train_step(batch, 0, scales)
        traces.append(trace.calls)
    pack._locks.close()
    assert len(traces[0]) > 100
    assert traces[1] == traces[0]
    assert traces[2] == traces[0]
    assert addresses() == before


def test_pretraining_steps_make_no_host_synchronisation(tmp_path, tiny_config, tiny_data):
    trainer = Trainer(tiny_config, tmp_path / "p", tiny_data, stage="pretrain").setup()
    for batch in trainer.batches(0):
        with no_host_syncs():
            trainer.train_step(batch, 0)


@pytest.mark.parametrize(
    ("what", "action"),
    [
        ("bool", lambda x: bool(x[0] > 0)),
        ("float", lambda x: float(x[0])),
        ("int", lambda x: int(x[0])),
        ("item", lambda x: x[0].item()),
        ("tolist", lambda x: x.tolist()),
        ("numpy", lambda x: x.numpy()),
        ("cpu", lambda x: x.cpu()),
        ("range", lambda x: range(x[0].long())),
        ("format", lambda x: f"{x[0]:.2f}"),
        ("boolean mask", lambda x: x[x > 0]),
        ("boolean mask write", lambda x: x.__setitem__(x > 0, 0.0)),
        ("nonzero", lambda x: x.nonzero()),
        ("unique", lambda x: torch.unique(x)),
        ("repeat_interleave", lambda x: x.repeat_interleave(x.long().abs())),
        ("tensor from Python data", lambda x: torch.tensor([1.0, 2.0])),
    ],
)
def test_the_guard_names_each_kind_of_synchronisation(what, action):
    x = torch.tensor([1.0, -2.0, 3.0])
    where = r"host synchronisation: .* at .*test_sync_free_step"
    with pytest.raises(HostSyncError, match=where), no_host_syncs():
        action(x)


def test_the_guard_lets_device_work_and_the_optimiser_through():
    weight = torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.Adam([weight], lr=0.1)
    x = torch.tensor([1.0, -2.0, 3.0])
    index = torch.tensor([0, 2])
    with no_host_syncs():
        y = torch.where(x > 0, x, torch.zeros_like(x)).sum()
        x.repeat_interleave(2)
        x[index]
        (weight * y).sum().backward()
        torch.nn.utils.clip_grad_norm_([weight], 1.0)
        optimizer.step()  # its host-side step counter is read on the host: not a device wait
    assert not torch.equal(weight.detach(), torch.ones(3))


def test_public_environment_calls_keep_their_checks_and_the_training_path_skips_them():
    env = LookAroundEnv(T=3)
    grids = torch.zeros(2, 3, 4, 1, 16, 16, dtype=torch.uint8)
    starts = torch.tensor([0, 5])
    with pytest.raises(HostSyncError), no_host_syncs():
        env.reset(grids, starts=starts)  # the range of the starts is read
    actions = torch.tensor([7, 3])
    with no_host_syncs():
        env.reset(grids, starts=starts, check_values=False)
        env.step(actions, check_values=False)
    with pytest.raises(ValueError, match=r"actions must lie in \[0, 15\)"):
        env.step(torch.tensor([15, 0]))
