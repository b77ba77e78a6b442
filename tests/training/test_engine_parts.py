"""Parts of the training engine: checkpoints every N epochs, device data, device-side sums,
evaluation batch sizes, collectives that name a device they cannot reduce, span timers."""

from __future__ import annotations

import json

import pytest
import torch

from pyskick.checkpoint import load_checkpoint
from pyskick.distributed import DistContext, all_reduce_sum, reducible_devices
from pyskick.evaluation.evaluate import auto_eval_batch_size, resolve_eval_batch_size
from pyskick.models import preset
from pyskick.timing import SpanTimer
from pyskick.training.baselines import AverageBaseline, ControlVariate
from pyskick.training.batches import GridSource, epoch_batches, resolve_data_on_device
from pyskick.training.metric_sums import MetricSums
from pyskick.training.trainer import Trainer, train


def test_checkpoints_every_n_epochs_keep_the_best_epoch(
    tmp_path, pretrained, tiny_config, tiny_data, monkeypatch
):
    written: list[tuple[str, int]] = []
    from pyskick.training import trainer as trainer_module

    real = trainer_module.save_checkpoint

    def spy(path, state):
        written.append((path.name, state["epoch"]))
        return real(path, state)

    monkeypatch.setattr(trainer_module, "save_checkpoint", spy)
    config = tiny_config.replace(epochs=5, save_every=2)
    result = train(config, tmp_path / "r", tiny_data, init=pretrained)
    latest = [epoch for name, epoch in written if name == "latest.pt"]
    assert latest == [1, 3, 4]  # every second epoch and the last
    history = result.history
    best_epoch = min(history, key=lambda h: h["val_error"])["epoch"]
    assert load_checkpoint(tmp_path / "r" / "best.pt")["epoch"] == best_epoch
    assert load_checkpoint(tmp_path / "r" / "best.pt")["best_val"] == result.best_val
    records = [
        json.loads(line) for line in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()
    ]
    assert [r["step"] for r in records] == [0, 1, 2, 3, 4]


def test_every_n_epochs_ends_like_every_epoch(tmp_path, pretrained, tiny_config, tiny_data):
    every = train(tiny_config.replace(epochs=3), tmp_path / "a", tiny_data, init=pretrained)
    third = train(
        tiny_config.replace(epochs=3, save_every=3), tmp_path / "b", tiny_data, init=pretrained
    )
    assert every.history == third.history
    a, b = (load_checkpoint(tmp_path / run / "latest.pt") for run in ("a", "b"))
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert a["config"]["save_every"] == 1
    # save_every changes no result: a run may be resumed with another value.
    resumed = Trainer(
        tiny_config.replace(epochs=4, save_every=2),
        tmp_path / "b",
        tiny_data,
        stage="train",
        resume=True,
    )
    assert resumed.setup().start_epoch == 3


def test_batches_gather_the_epoch_order_on_the_device(tiny_data):
    source = GridSource(tiny_data.train, torch.device("cpu"), resident=False)
    assert source.on_device  # the CPU's data is where it computes
    order = torch.tensor([[3, 1], [0, 2]])
    starts = torch.tensor([[5, 6], [7, 8]])
    batches = list(epoch_batches(source, order, starts, torch.device("cpu")))
    assert len(batches) == 2
    assert torch.equal(batches[1].grids, tiny_data.train[[0, 2]])
    assert torch.equal(batches[0].starts, starts[0])
    assert resolve_data_on_device("off", [tiny_data.train], torch.device("cpu"))


def test_metric_sums_on_the_device_equal_float64_sums():
    sums = MetricSums()
    values = torch.rand(5, dtype=torch.float32)
    for v in values:
        sums.add(2, x=v * 2, y=float(v))
    means = sums.means()
    expected = 0.0
    for v in values:
        expected += float(v * 2)
    assert means["x"] == expected / 10
    assert means["y"] == pytest.approx(sum(float(v) for v in values) / 10)


def test_baseline_and_control_variate_sums_live_on_the_device_and_round_trip():
    base = AverageBaseline()
    base.add(AverageBaseline.batch_sums(torch.tensor([0.2, 0.4]), torch.tensor([[1.0, 3.0]])))
    assert base.final_mean == pytest.approx(-0.3)
    assert base.intrinsic_mean == pytest.approx(2.0)
    torch.testing.assert_close(base.values(3, 0.5), torch.tensor([-0.3 + 2.0, -0.3 + 1.0]))
    state = base.state_dict()
    assert state == {
        "final_sum": pytest.approx(-0.6),
        "final_count": 2,
        "intrinsic_sum": 4.0,
        "intrinsic_count": 2,
    }
    assert all(isinstance(v, int | float) for v in state.values())
    copy = AverageBaseline()
    copy.load_state_dict(state)
    assert copy.state_dict() == state
    cv = ControlVariate()
    cv.add(torch.tensor([1.0, 4.0], dtype=torch.float64))
    assert isinstance(cv.weight, torch.Tensor)
    assert float(cv.weight) == 0.25


def test_eval_batch_size_auto_is_256_on_the_cpu_and_checked():
    config = preset("cpu-demo")
    assert auto_eval_batch_size(config, "cpu") == 256
    assert resolve_eval_batch_size("auto", config, "cpu") == 256
    assert resolve_eval_batch_size(32, config, "cpu") == 32
    for bad in (0, -1, "many", 1.5, True):
        with pytest.raises(ValueError, match="positive int or 'auto'"):
            resolve_eval_batch_size(bad, config, "cpu")


def test_a_collective_refuses_a_tensor_its_group_cannot_reduce():
    assert reducible_devices("gloo") == {"cpu"}
    assert reducible_devices("nccl") == {"cuda"}
    assert reducible_devices("cpu:gloo,cuda:nccl") == {"cpu", "cuda"}
    nccl = DistContext(reducible=reducible_devices("nccl"))
    with pytest.raises(ValueError, match="a cpu tensor cannot be reduced by a process group"):
        all_reduce_sum(torch.zeros(2), nccl)
    assert torch.equal(all_reduce_sum(torch.ones(2), DistContext()), torch.ones(2))


def test_span_timer_sums_named_spans_and_resets():
    timer = SpanTimer("cpu")
    for _ in range(2):
        with timer.span("a"):
            torch.ones(1000).sum()
    with timer.span("b"):
        pass
    totals = timer.totals()
    assert set(totals) == {"a", "b"}
    assert totals["a"] > 0.0
    assert timer.totals() == {}


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("where", ["on", "off"])
def test_device_data_on_and_off_give_the_same_run(
    tmp_path, pretrained, tiny_config, tiny_data, where
):
    config = tiny_config.replace(epochs=1, device="cuda")
    base = train(config, tmp_path / "auto", tiny_data, init=pretrained)
    other = train(
        config.replace(data_on_device=where), tmp_path / where, tiny_data, init=pretrained
    )
    # Two CUDA runs of the same batches agree to float rounding, not bit for bit: cuDNN's and
    # the index backward's atomics sum in any order (seen on an H100: 4e-8 relative, the same
    # data path twice). The batches themselves are the same bits (the test below).
    assert len(other.history) == len(base.history)
    for got, expected in zip(other.history, base.history, strict=True):
        assert got == pytest.approx(expected, rel=1e-5)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_resident_and_host_grid_sources_give_the_same_batches(tiny_data):
    device = torch.device("cuda")
    order = torch.randperm(tiny_data.train.shape[0], generator=torch.Generator().manual_seed(0))
    order = order[: 4 * (order.numel() // 4)].reshape(-1, 4)
    starts = torch.zeros_like(order)
    sources = [GridSource(tiny_data.train, device, resident=r) for r in (True, False)]
    assert [s.on_device for s in sources] == [True, False]
    resident, host = (list(epoch_batches(s, order, starts, device)) for s in sources)
    assert len(resident) == len(host) == order.shape[0]
    for a, b, rows in zip(resident, host, order, strict=True):
        assert a.grids.device.type == b.grids.device.type == "cuda"
        assert torch.equal(a.grids.cpu(), tiny_data.train[rows])
        assert torch.equal(b.grids.cpu(), tiny_data.train[rows])


BF16_METHODS = {
    "ltla": ({}, None),
    "rnd-actions": ({"actor": "random"}, None),
    "ours(rew)": ({}, "rew"),
    "ours(demo)": ({}, "demo"),
    "ltla+ac": ({"critic": "critic"}, None),
}


@pytest.mark.parametrize("method", list(BF16_METHODS))
def test_bf16_autocast_trains_every_method_as_fp32_does(
    tmp_path, pretrained, tiny_config, tiny_data, method
):
    """Paired on the validation grids, a bf16 run's errors stay within 5 % of the same
    run's in fp32 (the networks' passes in bfloat16, everything else in float32)."""
    from pyskick.evaluation import evaluate
    from pyskick.sidekicks.demo import DemoSidekick
    from pyskick.sidekicks.reward import RewardSidekick

    changes, kind = BF16_METHODS[method]
    config = tiny_config.replace(epochs=2, **changes)
    errors = {}
    for precision in ("fp32", "bf16"):
        sidekick = None
        if kind == "rew":
            sidekick = RewardSidekick(pretrained, channel_mean=(120.0,), decay_every=1)
        elif kind == "demo":
            sidekick = DemoSidekick(pretrained, channel_mean=(120.0,), hybrid_schedule=1)
        run = tmp_path / precision
        train(
            config.replace(precision=precision), run, tiny_data, init=pretrained, sidekick=sidekick
        )
        assert load_checkpoint(run / "latest.pt")["config"]["precision"] == precision
        result = evaluate(run, tiny_data.val, "avg", channel_mean=(120.0,))
        errors[precision] = result.per_sample
    assert torch.isfinite(errors["bf16"]).all()
    gap = (errors["bf16"] - errors["fp32"]).mean()
    assert abs(float(gap)) <= 0.05 * float(errors["fp32"].mean())


# Dynamo reads tensor attributes while it traces; torch warns about .grad of a non-leaf then.
@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")
def test_a_compiled_policy_runs_the_same_episodes(tmp_path, tiny_config, tiny_data):
    """collect_rollout takes a torch.compile'd policy (the trace-only aot_eager backend here;
    whether inductor or CUDA graphs pay is a GPU measurement)."""
    from pyskick.envs.rollout import collect_rollout

    trainer = Trainer(tiny_config, tmp_path / "p", tiny_data, stage="pretrain").setup()
    batch = next(trainer.batches(0))
    policy = trainer.policy.eval()
    eager = collect_rollout(policy, trainer.env, batch.grids, mode="greedy", starts=batch.starts)
    compiled = torch.compile(policy, backend="aot_eager", dynamic=False)
    traced = collect_rollout(compiled, trainer.env, batch.grids, mode="greedy", starts=batch.starts)
    torch.testing.assert_close(traced.rec_errors, eager.rec_errors)
    torch.testing.assert_close(traced.decoded, eager.decoded)
