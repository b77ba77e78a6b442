"""Compiled networks (``TrainConfig.compile``): the training step's policy and critic compiled
by inductor (on the CPU here: C++ kernels), the same arithmetic to float rounding, kept out of
checkpoints, validation and evaluation."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import counters

from pyskick.checkpoint import load_checkpoint
from pyskick.config import RUNTIME_FIELDS, TrainConfig
from pyskick.models import CompletionPolicy, preset
from pyskick.training.compiled import CompiledNetwork
from pyskick.training.pack import PackMember, PackTrainer
from pyskick.training.trainer import Trainer, train

# Dynamo reads .grad of every tensor it is given and hides the warning a non-leaf one raises
# through warnings.showwarning, which an "error" filter never reaches.
pytestmark = pytest.mark.filterwarnings(
    "ignore:The .grad attribute of a Tensor that is not a leaf Tensor:UserWarning"
)

METRICS = ("rec_error", "loss", "policy_loss", "entropy", "critic_loss")


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    """Each test compiles from nothing and counts only its own graphs (and never fills the
    per-function cache other tests of the process compile into)."""
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()


def _compiled(module: torch.nn.Module | None) -> bool:
    return isinstance(module, CompiledNetwork)


def _graphs() -> int:
    return counters["stats"]["unique_graphs"]


def _breaks() -> list[str]:
    return list(counters["graph_break"])


def _assert_same_step(got, expected, params_a, params_b) -> None:
    for name in METRICS:
        torch.testing.assert_close(
            getattr(got, name), getattr(expected, name), rtol=1e-5, atol=1e-7
        )
    scale = max(float(p.grad.abs().max()) for p in params_a if p.grad is not None)
    for a, b in zip(params_a, params_b, strict=True):
        assert (a.grad is None) == (b.grad is None)
        if a.grad is not None:
            torch.testing.assert_close(b.grad, a.grad, rtol=1e-4, atol=1e-5 * scale)


def test_a_bool_setting_off_by_default_that_a_resumed_run_may_change():
    assert TrainConfig().compile is False
    assert "compile" in RUNTIME_FIELDS
    with pytest.raises(TypeError, match=r"TrainConfig\.compile must be a bool"):
        TrainConfig(compile="yes")
    config = TrainConfig(compile=True)
    assert TrainConfig.from_dict(config.to_dict()) == config


def test_a_compiled_step_is_the_eager_step(tmp_path, pretrained, tiny_config, tiny_data):
    """A run alone with a learned critic that sees the whole grid: both networks compiled."""
    config = tiny_config.replace(epochs=1, critic="asymm-critic")  # T = 3
    steps = []
    for compile in (False, True):
        trainer = Trainer(
            config.replace(compile=compile), tmp_path / str(compile), tiny_data,
            stage="train", init=pretrained,
        ).setup()  # fmt: skip
        trainer.optimizer.step = lambda: None  # the gradients, before the update
        assert _compiled(trainer.policy_ddp) is compile
        assert _compiled(trainer.critic_ddp) is compile
        assert not _compiled(trainer.policy)  # what validation and checkpoints use
        batches = trainer.batches(0)
        steps.append((trainer, trainer.train_step(next(batches), 0)))
    (plain, expected), (compiled, got) = steps
    _assert_same_step(got, expected, plain.params, compiled.params)
    # Whole graphs: nothing breaks them (nn.LSTM would, and a value read on the host would).
    assert _breaks() == []
    # Every time index compiled in the first step: the next one compiles nothing.
    graphs = _graphs()
    compiled.train_step(next(batches), 0)
    assert _graphs() == graphs
    # The compiled wrappers add nothing to the state: names are the modules'.
    assert compiled.policy.state_dict().keys() == plain.policy.state_dict().keys()


def test_a_compiled_pack_step_is_the_eager_pack_step(tmp_path, pretrained, tiny_config, tiny_data):
    """A pack of two ltla runs (a critic compiles as the run alone's test shows)."""
    config = tiny_config.replace(epochs=1)
    steps = []
    for compile in (False, True):
        root = tmp_path / str(compile)
        members = [
            PackMember(
                config.replace(seed=11 + r, compile=compile), root / f"run{r}", init=pretrained
            )
            for r in range(2)
        ]
        packed = PackTrainer(members, tiny_data).setup()
        assert _compiled(packed.policy_step) is compile
        assert packed.critic_step is None
        packed.optimizer.step = lambda: None  # type: ignore[method-assign]
        scales = torch.zeros(2, dtype=torch.float64)
        steps.append((packed, packed.train_step(next(packed.batches(0)), 0, scales)))
        packed._locks.close()
    (plain, expected), (compiled, got) = steps
    _assert_same_step(got, expected, plain.params, compiled.params)
    assert _breaks() == []


def test_a_compiled_pack_refuses_an_uncompiled_member(tmp_path, pretrained, tiny_config, tiny_data):
    members = [
        PackMember(
            tiny_config.replace(seed=11, compile=compile), tmp_path / str(compile), init=pretrained
        )
        for compile in (True, False)
    ]
    with pytest.raises(ValueError, match=r"cannot share a pack: compile differs \(True vs False\)"):
        PackTrainer(members, tiny_data).setup()


def test_a_compiled_run_checkpoints_plain_weights_and_resumes_uncompiled(
    tmp_path, pretrained, tiny_config, tiny_data
):
    config = tiny_config.replace(epochs=2)
    train(config.replace(epochs=1, compile=True), tmp_path / "run", tiny_data, init=pretrained)
    resumed = train(config, tmp_path / "run", tiny_data, resume=True)
    plain = train(config, tmp_path / "plain", tiny_data, init=pretrained)
    for a, b in zip(plain.history, resumed.history, strict=True):
        assert b["val_error"] == pytest.approx(a["val_error"], rel=1e-3)
    state = load_checkpoint(resumed.run_dir / "latest.pt")
    policy = CompletionPolicy(preset("cpu-demo").from_dict(state["model_config"]))
    policy.load_state_dict(state["model"])  # evaluate, export and --init load it as it is
