"""Actors and critics from the registry in training and evaluation: forced trajectories,
name checks, the critic contract, and the random actor's unchanged results."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor, nn

import pyskick.plugins
import pyskick.training.step
from pyskick import hookimpl
from pyskick.actors import Actor, LearnedActor, RandomActor
from pyskick.checkpoint import load_checkpoint
from pyskick.envs import LookAroundEnv
from pyskick.envs.rollout import Rollout, collect_rollout, make_env
from pyskick.evaluation import evaluate, evaluate_policy, evaluation_starts
from pyskick.plugins import PluginHost, make_plugin_host
from pyskick.run_dir import RunDir
from pyskick.sidekicks import Sidekick
from pyskick.training.loggers import read_metrics
from pyskick.training.trainer import Trainer, pretrain, train


class GridPathActor(Actor):
    """Forces one motion per viewgrid, chosen from the grid's pixels, at every step.

    The motion depends on the content of the grids given to :meth:`prepare`, so a trajectory
    is right only when ``indices`` point into those very grids.
    """

    name = "grid-path"

    def __init__(self, one_view: Path | None = None) -> None:
        self.one_view = one_view
        self.prepared: list[int] = []

    def prepare(self, grids: Tensor, *, T: int, device: torch.device) -> None:
        self.T = T
        self.motions = grid_motions(grids).to(device)
        self.prepared.append(grids.shape[0])

    def mode(self, *, training: bool) -> str:
        return "greedy"

    def forced_actions(self, indices: Tensor, starts: Tensor) -> Tensor:
        return self.motions[indices].expand(self.T - 1, -1).clone()


def grid_motions(grids: Tensor) -> Tensor:
    """``[n]`` one of the 15 motions per viewgrid, from its pixel sum."""
    return grids.flatten(1).long().sum(1) % 15


class LinearCritic(nn.Module):
    """A value from h alone, or from h and the grid's mean when ``full`` (records its inputs)."""

    def __init__(self, hidden_size: int, *, full: bool) -> None:
        super().__init__()
        self.full_observability = full
        self.value = nn.Linear(hidden_size + 1, 1)
        self.grid_shapes: list[tuple[int, ...]] = []

    def forward(self, hidden, proprio, t, grid=None, *, azimuth=None):
        if grid is not None:
            self.grid_shapes.append(tuple(grid.shape))
            extra = grid.flatten(1).mean(1, keepdim=True)
        else:
            extra = torch.zeros_like(hidden[:, :1])
        return self.value(torch.cat([hidden, extra], 1)).squeeze(1)


class ActorCriticPlugin:
    """Registers the test actor and critics, as a third-party plugin would."""

    def __init__(self) -> None:
        self.actors: list[GridPathActor] = []
        self.critics: list[LinearCritic] = []

    def grid_path(self, *, one_view: Path | None, **_: Any) -> Actor:
        """Forced grid-dependent motions (test)."""
        self.actors.append(GridPathActor(one_view))
        return self.actors[-1]

    def critic(self, model_config: Any, *, full: bool) -> nn.Module:
        self.critics.append(LinearCritic(model_config.hidden_size, full=full))
        return self.critics[-1]

    def partial_critic(self, *, model_config: Any, **_: Any) -> nn.Module:
        """Linear value from h (test)."""
        return self.critic(model_config, full=False)

    def full_critic(self, *, model_config: Any, **_: Any) -> nn.Module:
        """Linear value from h and the grid's mean (test)."""
        return self.critic(model_config, full=True)

    @hookimpl
    def pyskick_register_actors(self, register: Any) -> None:
        register("grid-path", self.grid_path)

    @hookimpl
    def pyskick_register_critics(self, register: Any) -> None:
        register("lin-partial", self.partial_critic)
        register("lin-full", self.full_critic)
        register("not-a-module", lambda **_: "critic")
        register("no-flag", lambda **_: nn.Linear(1, 1))


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch) -> ActorCriticPlugin:
    """The test plugin, installed in the host the library's name lookups use."""
    test_plugin = ActorCriticPlugin()
    host: PluginHost = make_plugin_host(autoload=False)
    host.pm.register(test_plugin, name="test-plugin")
    monkeypatch.setattr(pyskick.plugins, "get_host", lambda: host)
    return test_plugin


@pytest.fixture
def pretrained(tmp_path, tiny_config, tiny_data) -> Path:
    return pretrain(tiny_config.replace(pretrain_epochs=1), tmp_path / "pre", tiny_data).run_dir


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[tuple[dict[str, Any], Rollout]]:
    """Record every collect_rollout call of training and evaluation (the real function runs)."""
    calls: list[tuple[dict[str, Any], Rollout]] = []

    def recording(*args: Any, **kwargs: Any) -> Rollout:
        rollout = collect_rollout(*args, **kwargs)
        calls.append((kwargs, rollout))
        return rollout

    # The module, not the function ``pyskick.evaluation.evaluate`` that shadows its name.
    evaluation = importlib.import_module("pyskick.evaluation.evaluate")
    for module in (pyskick.training.step, evaluation):
        monkeypatch.setattr(module, "collect_rollout", recording)
    return calls


def _expected_visits(grids: Tensor, starts: Tensor, T: int) -> Tensor:
    """``[B, T]`` views visited by moving each grid's motion from ``starts`` (env only)."""
    env = LookAroundEnv(T)
    env.reset(grids, starts=starts)
    motions = grid_motions(grids)
    for _ in range(T - 1):
        env.step(motions)
    return env.visited_views


def test_forced_actor_trains_reconstruction_only_and_follows_its_path(
    tmp_path, monkeypatch, plugin, pretrained, tiny_config, tiny_data
):
    calls = _spy(monkeypatch)
    config = tiny_config.replace(epochs=1, actor="grid-path", critic="critic")
    trainer = Trainer(config, tmp_path / "run", tiny_data, stage="train", init=pretrained)
    trainer.setup()
    act_before = {k: v.clone() for k, v in trainer.policy.act.named_parameters()}
    decode_before = {k: v.clone() for k, v in trainer.policy.decode.named_parameters()}
    trainer.fit()

    # One actor from the registry (one_view = init), prepared on the training grids; its
    # copy on the validation grids, once.
    assert len(plugin.actors) == 1
    assert trainer.actor is plugin.actors[0]
    assert trainer.actor.one_view == pretrained.resolve()
    assert trainer.actor.prepared == [16]
    assert trainer.val_actor is not trainer.actor
    assert trainer.val_actor.prepared == [6]
    assert not trainer.learn_actions
    assert trainer.critic is None  # no action is learned: no critic either

    training = [(kw, r) for kw, r in calls if r.actions.shape[1] == config.batch_size]
    assert len(training) == 2
    for kwargs, rollout in training:
        actions, mask = kwargs["demonstrations"]
        assert bool(mask.all())
        assert torch.equal(rollout.actions, actions)
        assert bool(rollout.supervised.all())
    record = read_metrics(tmp_path / "run" / "metrics.jsonl")[0]
    assert record["train/policy_loss"] == 0.0
    assert record["train/supervised_loss"] == 0.0  # forced steps add no NLL
    assert all(torch.equal(v, act_before[k]) for k, v in trainer.policy.act.named_parameters())
    assert any(
        not torch.equal(v, decode_before[k]) for k, v in trainer.policy.decode.named_parameters()
    )

    # Validation followed the path of the validation grids from every avg start.
    starts = evaluation_starts(3, 4, "avg")
    validation = [r for kw, r in calls if r.actions.shape[1] == 6 * starts.numel()]
    assert len(validation) == 1
    grids = tiny_data.val.repeat_interleave(starts.numel(), 0)
    expected = _expected_visits(grids, starts.repeat(6), config.T)
    assert torch.equal(validation[0].visited, expected)
    assert load_checkpoint(tmp_path / "run" / "latest.pt")["init"] == str(pretrained.resolve())


def test_evaluate_builds_the_named_actor_on_the_evaluated_grids(
    tmp_path, monkeypatch, plugin, pretrained, tiny_config, tiny_data, smooth_grids
):
    config = tiny_config.replace(epochs=1, actor="grid-path")
    train(config, tmp_path / "run", tiny_data, init=pretrained)
    calls = _spy(monkeypatch)
    grids = smooth_grids(5, seed=9)
    result = evaluate(tmp_path / "run", grids, "adv", channel_mean=(120.0,), batch_size=24)
    assert result.actor == "grid-path"
    built = plugin.actors[-1]
    assert built.one_view == pretrained.resolve()  # the run's init, from its checkpoint
    assert built.prepared == [5]
    starts = evaluation_starts(3, 4, "adv")
    assert len(calls) == 3  # 2 samples (24 episodes) per chunk
    visited = torch.cat([rollout.visited.cpu() for _, rollout in calls])  # on the run's device
    repeated = grids.repeat_interleave(starts.numel(), 0)
    assert torch.equal(visited, _expected_visits(repeated, starts.repeat(5), config.T))

    # Without an init in the checkpoint, RUN/dataset.json says where the run came from.
    state = load_checkpoint(tmp_path / "run" / "best.pt")
    state.pop("init")
    torch.save(state, tmp_path / "run" / "bare.pt")
    data_file = tmp_path / "data.h5"
    data_file.write_bytes(b"stands for the data file")
    with RunDir(tmp_path / "run").locked() as run:
        run.record_dataset(data_file, init=tmp_path / "x")
    evaluate(tmp_path / "run" / "bare.pt", grids, channel_mean=(120.0,))
    assert plugin.actors[-1].one_view == tmp_path / "x"
    # A pretrained model moves nowhere: the learned actor, whatever its config says.
    state = load_checkpoint(pretrained / "best.pt")
    state["config"]["actor"] = "grid-path"
    torch.save(state, tmp_path / "pre.pt")
    built = len(plugin.actors)
    assert evaluate(tmp_path / "pre.pt", grids, channel_mean=(120.0,)).actor == "learned"
    assert len(plugin.actors) == built


def test_an_actor_object_replaces_the_configs_name(tmp_path, pretrained, tiny_config, tiny_data):
    actor = GridPathActor()
    trainer = Trainer(
        tiny_config.replace(epochs=1), tmp_path / "r", tiny_data, stage="train",
        init=pretrained, actor=actor,
    ).setup()  # fmt: skip
    assert trainer.config.actor == "grid-path"
    assert trainer.actor is actor
    assert actor.prepared == [16]
    with pytest.raises(TypeError, match=r"actor must be a pyskick\.actors\.Actor"):
        Trainer(tiny_config, tmp_path / "s", tiny_data, stage="train", actor="random")  # type: ignore[arg-type]


class Demonstrator(Sidekick):
    name = "always-demo"

    def prepare(self, grids, *, T, device):
        self.T = T

    def demonstrations(self, indices, starts, epoch):
        B = indices.shape[0]
        return torch.zeros(self.T - 1, B, dtype=torch.int64), torch.ones(self.T - 1, B).bool()


def test_forcing_actor_and_demonstrating_sidekick_conflict(tmp_path, tiny_config, tiny_data):
    actor = GridPathActor()
    with pytest.raises(ValueError, match=r"actor 'grid-path' forces .* sidekick 'always-demo'"):
        Trainer(
            tiny_config.replace(epochs=1), tmp_path / "r", tiny_data, stage="train",
            sidekick=Demonstrator(), actor=actor,
        ).setup()  # fmt: skip
    assert actor.prepared == []  # refused before anything was prepared or written
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("field", "value"), [("critic", "oracle"), ("actor", "oracle")]
)  # fmt: skip
def test_unknown_names_are_refused_before_anything_is_written(
    tmp_path, tiny_config, tiny_data, field, value
):
    config = tiny_config.replace(**{field: value})
    valid = "asymm-critic, average, critic" if field == "critic" else "learned, random"
    message = f"TrainConfig.{field}: unknown {field} 'oracle'; valid names: .*{valid}"
    with pytest.raises(ValueError, match=message):
        Trainer(config, tmp_path / "run", tiny_data, stage="train").setup()
    assert not (tmp_path / "run").exists()
    # Pretraining has neither critic nor actor.
    Trainer(config, tmp_path / "pre", tiny_data, stage="pretrain").setup()


@pytest.mark.parametrize("name", ["lin-partial", "lin-full"])
def test_a_plugin_critic_is_called_per_its_observability(
    tmp_path, plugin, tiny_config, tiny_data, name
):
    config = tiny_config.replace(epochs=1, critic=name)
    trainer = Trainer(config, tmp_path / name, tiny_data, stage="train").setup()
    before = trainer.critic.value.weight.clone()
    trainer.train_epoch(0)
    critic = plugin.critics[-1]
    assert trainer.critic is critic
    assert not torch.equal(critic.value.weight, before)  # the critic loss trains it
    full = name == "lin-full"
    assert critic.grid_shapes == ([(8, 3, 4, 1, 16, 16)] * 4 if full else [])


def test_critic_factories_must_honour_the_contract(tmp_path, plugin, tiny_config, tiny_data):
    with pytest.raises(TypeError, match="critic 'not-a-module' built a str"):
        Trainer(
            tiny_config.replace(critic="not-a-module"), tmp_path / "a", tiny_data, stage="train"
        ).setup()
    with pytest.raises(TypeError, match="critic 'no-flag' has no bool attribute full_obs"):
        Trainer(
            tiny_config.replace(critic="no-flag"), tmp_path / "b", tiny_data, stage="train"
        ).setup()


def test_random_actor_evaluation_is_independent_of_batching(
    tmp_path, tiny_config, tiny_data, smooth_grids
):
    """The random actor's motions are drawn up front as ``[n, S, T-1]`` from a CPU generator
    seeded with ``seed``: the same episodes whatever ``batch_size``."""
    trainer = Trainer(tiny_config, tmp_path, tiny_data, stage="pretrain").setup()
    policy, grids = trainer.policy.eval(), smooth_grids(5, seed=4)
    common = {"channel_mean": (120.0,), "T": 3, "metric": "adv", "seed": 11}
    results = [
        evaluate_policy(policy, grids, actor=RandomActor(), batch_size=batch_size, **common)
        for batch_size in (24, 7, 256)
    ]
    assert results[0].actor == "random"
    for other in results[1:]:
        torch.testing.assert_close(other.per_start, results[0].per_start, rtol=1e-6, atol=1e-8)
    starts = evaluation_starts(3, 4, "adv")
    motions = torch.randint(15, (5, 12, 2), generator=torch.Generator().manual_seed(11))
    rollout = collect_rollout(
        policy, make_env(policy.config, 3, (120.0,)), grids.repeat_interleave(12, 0),
        mode="random", starts=starts.repeat(5),
        demonstrations=(motions.reshape(60, 2).T, torch.ones(2, 60, dtype=torch.bool)),
        paste=True,
    )  # fmt: skip
    assert torch.equal(rollout.actions.T.reshape(5, 12, 2), motions)
    torch.testing.assert_close(
        results[0].per_start, rollout.final_errors.view(5, 12).double(), rtol=1e-6, atol=1e-8
    )
    by_name = evaluate_policy(
        policy, grids, channel_mean=(120.0,), T=3, metric="adv", actor="random", seed=11
    )
    assert torch.equal(by_name.per_start, results[0].per_start)
    other_seed = evaluate_policy(
        policy, grids, channel_mean=(120.0,), T=3, metric="adv", actor="random", seed=12
    )
    assert not torch.allclose(other_seed.per_start, results[0].per_start)
    greedy = evaluate_policy(policy, grids, channel_mean=(120.0,), T=3, actor=LearnedActor())
    assert greedy.actor == "learned"


def test_random_actor_evaluation_leaves_the_global_rng_alone(
    tmp_path, tiny_config, tiny_data, smooth_grids
):
    trainer = Trainer(tiny_config, tmp_path, tiny_data, stage="pretrain").setup()
    before = torch.random.get_rng_state()
    evaluate_policy(
        trainer.policy, smooth_grids(2, seed=4), channel_mean=(120.0,), T=3, actor="random"
    )
    assert torch.equal(torch.random.get_rng_state(), before)
