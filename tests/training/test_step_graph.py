"""The training step replayed as a CUDA graph (``TrainConfig.cuda_graph``): what is refused
everywhere, and on a GPU that replays train as the eager step does. That the step can be
replayed at all (the same operators every batch, state updated in place) is checked on the CPU
by tests/training/test_sync_free_step.py."""

from __future__ import annotations

from typing import NamedTuple

import pytest
import torch

from pyskick.errors import UserError
from pyskick.training.graphs import STEP_WARMUP, StepGraph
from pyskick.training.pack import PackMember, PackTrainer
from pyskick.training.setup import adam
from pyskick.training.trainer import Trainer, train

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
# Compiled networks (TrainConfig.compile): dynamo reads .grad of the tensors it is given and
# hides the warning a non-leaf one raises through warnings.showwarning, which "error" misses.
_DYNAMO_GRAD_WARNING = "ignore:The .grad attribute of a Tensor that is not a leaf:UserWarning"


class Inputs(NamedTuple):
    x: torch.Tensor


def test_a_run_on_the_cpu_refuses_cuda_graph_before_writing(tmp_path, tiny_config, tiny_data):
    config = tiny_config.replace(device="cpu", cuda_graph=True)
    with pytest.raises(UserError, match="cuda_graph needs a CUDA device; this run's device is cpu"):
        Trainer(config, tmp_path / "run", tiny_data, stage="pretrain").setup()
    assert not (tmp_path / "run").exists()


def test_a_step_graph_needs_a_cuda_device():
    with pytest.raises(ValueError, match="a CUDA graph needs a CUDA device, got cpu"):
        StepGraph(lambda batch: batch, torch.device("cpu"))


def test_adam_is_capturable_only_for_a_captured_cuda_step(tiny_config):
    params = [torch.nn.Parameter(torch.zeros(2))]
    captured = tiny_config.replace(cuda_graph=True)
    assert not adam(params, captured, torch.device("cpu")).defaults["capturable"]
    assert not adam(params, tiny_config, torch.device("cuda")).defaults["capturable"]
    assert adam(params, captured, torch.device("cuda")).defaults["capturable"]


@pytest.mark.cuda
@cuda
def test_a_step_graph_replays_in_place_updates_and_fresh_random_draws():
    device = torch.device("cuda")
    generator = torch.Generator(device).manual_seed(5)
    total = torch.zeros(3, device=device)

    def step(inputs: Inputs) -> tuple[torch.Tensor, torch.Tensor]:
        draw = torch.rand(3, device=device, generator=generator)
        total.add_(inputs.x * draw)
        return total * 1.0, draw

    graph = StepGraph(step, device, generators=[generator])
    xs = [torch.full((3,), float(i + 1), device=device) for i in range(6)]
    got = []
    for x in xs:
        total_now, draw = graph(Inputs(x), key=0)
        got.append((total_now.clone(), draw.clone()))
    assert graph.eager_steps == STEP_WARMUP
    assert graph.captures == 1
    # The same steps, eagerly, from the same seed and zero.
    generator.manual_seed(5)
    total.zero_()
    for x, (total_now, draw) in zip(xs, got, strict=True):
        expected_total, expected_draw = step(Inputs(x))
        assert torch.equal(draw, expected_draw)
        torch.testing.assert_close(total_now, expected_total)
    # Another key, or other shapes: another capture.
    graph(Inputs(xs[0]), key=1)
    graph(Inputs(torch.ones(3, device=device)), key=1)
    assert graph.captures == 2


@pytest.mark.cuda
@cuda
@pytest.mark.filterwarnings(_DYNAMO_GRAD_WARNING)
@pytest.mark.parametrize(
    ("sidekick", "compile", "decode_once"),
    [("none", False, False), ("rew", False, False), ("none", True, False), ("none", False, True)],
    ids=["none", "rew", "none-compiled", "none-decoding-once"],
)  # fmt: skip
def test_a_captured_run_trains_as_the_eager_one(
    tmp_path, pretrained, tiny_config, tiny_data, sidekick, compile, decode_once
):
    """With ``compile``, the replayed kernels are the compiled networks' (compiled in the eager
    warm-up steps); with ``decode_once``, the glimpses decoded at the last, pasted
    (``memorize``)."""
    config = tiny_config.replace(
        device="cuda", batch_size=4, epochs=2, sidekick=sidekick, decode_once=decode_once,
        memorize=decode_once,
    )  # fmt: skip
    eager = train(config, tmp_path / "eager", tiny_data, init=pretrained)
    trainer = Trainer(
        config.replace(cuda_graph=True, compile=compile), tmp_path / "graph", tiny_data,
        stage="train", init=pretrained,
    )  # fmt: skip
    graphed = trainer.fit()
    # One capture per epoch (the sidekick's schedule values are the epoch's), after the eager
    # warm-up steps; replays agree with the eager run to float rounding.
    assert trainer._step_graph.captures == 2
    assert trainer._step_graph.eager_steps == STEP_WARMUP
    assert len(graphed.history) == len(eager.history) == 2
    for got, expected in zip(graphed.history, eager.history, strict=True):
        assert_same_epoch(got, expected)


def assert_same_epoch(got: dict, expected: dict) -> None:
    """One epoch's record of a captured run against the eager run's. Training metrics average
    the same sampled episodes: equal to float rounding. Validation takes the argmax motion,
    where a near tie that rounding breaks the other way changes one episode's views: on the
    H100 (2026-11-27) one such epoch differed by 0.6 % while its training metrics agreed to
    1e-4, so the validation error is held to 2 %."""
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=2e-2 if key == "val_error" else 1e-4), key


@pytest.mark.cuda
@cuda
@pytest.mark.filterwarnings(_DYNAMO_GRAD_WARNING)
@pytest.mark.parametrize("compile", [False, True], ids=["eager-networks", "compiled"])
def test_a_captured_pack_trains_as_the_eager_one(
    tmp_path, pretrained, tiny_config, tiny_data, compile
):
    config = tiny_config.replace(device="cuda", batch_size=4, epochs=2)

    def fit(folder: str, **changes: bool) -> tuple[PackTrainer, list]:
        members = [
            PackMember(config.replace(seed=s, **changes), tmp_path / folder / str(s),
                       init=pretrained)
            for s in (1, 2)
        ]  # fmt: skip
        pack = PackTrainer(members, tiny_data)
        return pack, pack.fit()

    _, eager = fit("eager")
    pack, graphed = fit("graph", cuda_graph=True, compile=compile)
    assert pack._step_graph.captures == 2
    for got_run, expected_run in zip(graphed, eager, strict=True):
        for got, expected in zip(got_run.history, expected_run.history, strict=True):
            assert_same_epoch(got, expected)
