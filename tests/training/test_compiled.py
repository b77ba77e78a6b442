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
from pyskick.errors import UserError
from pyskick.models import CompletionPolicy, preset
from pyskick.training import compiled as compiled_module
from pyskick.training.compiled import CompiledNetwork
from pyskick.training.pack import PackMember, PackTrainer
from pyskick.training.trainer import Trainer, pretrain, train

# Dynamo reads .grad of every tensor it is given and hides the warning a non-leaf one raises
# through warnings.showwarning, which an "error" filter never reaches.
pytestmark = pytest.mark.filterwarnings(
    "ignore:The .grad attribute of a Tensor that is not a leaf Tensor:UserWarning"
)


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


def test_a_compiled_step_is_the_eager_step(
    tmp_path, pretrained, tiny_config, tiny_data, assert_same_step
):
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
    assert_same_step(got, expected, plain.params, compiled.params, grad_atol=1e-5)
    # Compiled, to whole graphs: two per network (t = 0 without a recurrent state, then any t),
    # nothing breaks them (nn.LSTM would, and so would a value read on the host).
    assert _graphs() == 4
    assert _breaks() == []
    # Every time index compiled in the first step: the next one compiles nothing.
    compiled.train_step(next(batches), 0)
    assert _graphs() == 4


def test_a_compiled_step_decoding_once_is_the_eager_step(
    tmp_path, pretrained, tiny_config, tiny_data, first_step, assert_same_step
):
    """The glimpses decoded at the last (``decode_once``), pasted (``memorize``), compiled."""
    config = tiny_config.replace(epochs=1, decode_once=True, memorize=True)  # T = 3
    plain, expected = first_step(config, tmp_path / "eager", tiny_data, pretrained)
    compiled, got = first_step(
        config.replace(compile=True), tmp_path / "compiled", tiny_data, pretrained, guarded=False
    )
    assert_same_step(got, expected, plain.params, compiled.params, grad_atol=1e-5)
    # t = 0, then any t, then the last with the earlier glimpses to decode: whole graphs.
    assert _graphs() == 3
    assert _breaks() == []


@pytest.mark.parametrize("decode_once", [False, True], ids=["", "decoding-once"])
def test_a_compiled_pack_step_is_the_eager_pack_step(
    tmp_path, pretrained, tiny_config, tiny_data, assert_same_step, decode_once
):
    """A pack of two runs with a critic that sees the whole grid (the packed policy's
    convolutions encode it); with ``decode_once``, the policy a third graph for the last
    glimpse."""
    config = tiny_config.replace(epochs=1, critic="asymm-critic", decode_once=decode_once)
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
        assert _compiled(packed.critic_step) is compile
        packed.optimizer.step = lambda: None  # type: ignore[method-assign]
        scales = torch.zeros(2, dtype=torch.float64)
        steps.append((packed, packed.train_step(next(packed.batches(0)), 0, scales)))
        packed._locks.close()
    (plain, expected), (compiled, got) = steps
    assert_same_step(got, expected, plain.params, compiled.params, grad_atol=1e-5)
    assert _graphs() == (5 if decode_once else 4)
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
    assert _graphs() > 0
    # The compiled epoch's checkpoint holds the module's names, as an eager run's: evaluate,
    # export and --init load it as it is.
    state = load_checkpoint(tmp_path / "run" / "latest.pt")
    policy = CompletionPolicy(preset("cpu-demo").from_dict(state["model_config"]))
    assert state["model"].keys() == policy.state_dict().keys()
    policy.load_state_dict(state["model"])
    resumed = train(config, tmp_path / "run", tiny_data, resume=True)
    plain = train(config, tmp_path / "plain", tiny_data, init=pretrained)
    for a, b in zip(plain.history, resumed.history, strict=True):
        assert b["val_error"] == pytest.approx(a["val_error"], rel=1e-3)


def _policy_inputs(cfg, batch: int = 4):
    views = torch.randn(batch, cfg.channels, cfg.view_size, cfg.view_size)
    return views, torch.zeros(batch, cfg.proprio_size), torch.zeros(batch, dtype=torch.long)


def test_a_compiled_policy_under_bf16_autocast_keeps_its_state_in_bfloat16():
    """As nn.LSTM does under autocast: the compiled cell is the eager LSTM's arithmetic."""
    torch.manual_seed(0)
    cfg = preset("cpu-demo")
    policy = CompletionPolicy(cfg).train()
    compiled = CompiledNetwork(policy)
    views, proprio, azimuth = _policy_inputs(cfg)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        eager = policy(views, proprio, 1, policy(views, proprio, 0, azimuth=azimuth).state)
        out = compiled(views, proprio, 1, compiled(views, proprio, 0, azimuth=azimuth).state)
    assert _graphs() == 2
    assert _breaks() == []
    assert out.state[0].dtype == out.state[1].dtype == eager.state[0].dtype == torch.bfloat16
    torch.testing.assert_close(out.decoded, eager.decoded, rtol=2e-2, atol=2e-2)


def test_past_its_recompile_limit_a_network_raises_instead_of_running_eagerly(monkeypatch):
    """Dynamo's default, past its limit, runs the code eagerly with one line in a log: a
    "compiled" run or benchmark would measure eager steps."""
    monkeypatch.setattr(compiled_module, "RECOMPILE_LIMIT", 1)
    torch.manual_seed(0)
    cfg = preset("cpu-demo")
    compiled = CompiledNetwork(CompletionPolicy(cfg).train())
    views, proprio, azimuth = _policy_inputs(cfg)
    first = compiled(views, proprio, 0, azimuth=azimuth)  # its one version
    with pytest.raises(torch._dynamo.exc.FailOnRecompileLimitHit):
        compiled(views, proprio, 1, first.state, azimuth=azimuth)  # would need a second


def test_compile_is_refused_before_anything_is_written_where_it_cannot_build(
    tmp_path, monkeypatch, tiny_config, tiny_data
):
    import torch._inductor.cpp_builder

    def no_compiler() -> str:
        raise RuntimeError("no C++ compiler found among ('g++',)")

    monkeypatch.setattr(torch._inductor.cpp_builder, "get_cpp_compiler", no_compiler)
    with pytest.raises(UserError, match=r"^compile needs a C\+\+ compiler on the CPU .*g\+\+"):
        pretrain(tiny_config.replace(compile=True), tmp_path / "run", tiny_data)
    assert not (tmp_path / "run").exists()
