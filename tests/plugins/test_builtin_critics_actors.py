"""The built-in critics and actors come through the registry, and a plugin's critic and actor
drive `pyskick train` and `pyskick evaluate` like the built-ins."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from pyskick.actors import LearnedActor, RandomActor, make_actor
from pyskick.checkpoint import load_checkpoint
from pyskick.data.hdf5_write import write_viewgrids
from pyskick.data.spec import GridSpec, evenly_spaced_azimuths
from pyskick.models import (
    CompletionPolicy,
    FullObservabilityCritic,
    PartialObservabilityCritic,
    preset,
)
from pyskick.plugins import get_host, make_plugin_host
from pyskick_cli.main import main

MakeDist = Callable[[str, str], Path]

PLUGIN = """
import torch
from torch import nn

import pyskick
from pyskick.actors import Actor


class HiddenCritic(nn.Module):
    full_observability = False

    def __init__(self, hidden_size):
        super().__init__()
        self.value = nn.Linear(hidden_size, 1)

    def forward(self, hidden, proprio, t, *, azimuth=None):
        return self.value(hidden).squeeze(1)


class RightTurns(Actor):
    name = "right-turns"

    def prepare(self, grids, *, T, device):
        self.T, self.device = T, device

    def mode(self, *, training):
        return "greedy"

    def forced_actions(self, indices, starts):
        # Motion 8 of the 3 x 5 grid: same elevation, two azimuths to the right.
        return torch.full((self.T - 1, indices.shape[0]), 8, dtype=torch.int64, device=self.device)


def hidden_critic(*, model_config, **_):
    "A linear value of the hidden state (test plugin)."
    return HiddenCritic(model_config.hidden_size)


def right_turns(**_):
    "Always turns right by two views (test plugin)."
    return RightTurns()


@pyskick.hookimpl
def pyskick_register_critics(register):
    register("hidden-critic", hidden_critic)


@pyskick.hookimpl
def pyskick_register_actors(register):
    register("right-turns", right_turns)
"""


def test_builtin_critics_and_actors_are_registered_with_provenance() -> None:
    registries = make_plugin_host(autoload=False).registries
    critics = {entry.name: entry for entry in registries.critic}
    actors = {entry.name: entry for entry in registries.actor}
    assert set(critics) == {"average", "critic", "asymm-critic"}
    assert set(actors) == {"learned", "random", "demo-actions"}
    assert {e.plugin for e in critics.values()} == {"pyskick.builtins.critics"}
    assert {actors[name].plugin for name in ("learned", "random")} == {"pyskick.builtins.actors"}
    assert actors["demo-actions"].plugin == "pyskick.builtins.demo"
    assert all(e.summary for e in [*critics.values(), *actors.values()])
    assert "asymm-ac" in critics["asymm-critic"].summary


def test_builtin_factories_honour_the_contracts() -> None:
    registries = make_plugin_host(autoload=False).registries
    config = preset("cpu-demo")
    policy = CompletionPolicy(config)
    built = {
        entry.name: entry.factory(model_config=config, policy=policy) for entry in registries.critic
    }
    assert built["average"] is None
    assert isinstance(built["critic"], PartialObservabilityCritic)
    assert built["critic"].full_observability is False
    assert isinstance(built["asymm-critic"], FullObservabilityCritic)
    assert built["asymm-critic"].full_observability is True
    assert built["asymm-critic"].image_encoder is policy.sense_im
    learned = make_actor("learned")
    random = make_actor("random", one_view=Path("x"), spec=None, config=None)
    assert isinstance(learned, LearnedActor)
    assert learned.learned
    assert isinstance(random, RandomActor)
    assert not random.learned
    assert (learned.mode(training=True), learned.mode(training=False)) == ("sample", "greedy")
    assert random.mode(training=True) == random.mode(training=False) == "random"


def tiny_dataset(path: Path) -> Path:
    """A 3 x 4 grayscale viewgrid file of smooth random fields (16/6/4 samples)."""
    generator = torch.Generator().manual_seed(0)
    coarse = torch.rand(26, 12, 4, 4, generator=generator)
    fine = torch.nn.functional.interpolate(coarse, size=16, mode="bilinear", align_corners=False)
    grids = (fine.view(26, 3, 4, 1, 16, 16) * 255).round().to(torch.uint8)
    spec = GridSpec(
        n_elevations=3, n_azimuths=4, channels=1, view_size=16,
        elevations_deg=(30.0, 0.0, -30.0), azimuths_deg=evenly_spaced_azimuths(4),
        fov_deg=90.0, channel_mean=(120.0,), preset="custom",
    )  # fmt: skip
    splits = {"train": grids[:16], "val": grids[16:22], "test": grids[22:]}
    return write_viewgrids(path, splits, spec, source="test")


@pytest.fixture
def installed(make_dist: MakeDist) -> Iterator[None]:
    """The test plugin installed as a distribution; the CLI's plugin host rebuilt around it.

    One torch thread: the machine's cores are shared, and oversubscription is slow.
    """
    make_dist("pyskick-test-actors", PLUGIN)
    get_host.cache_clear()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
    get_host.cache_clear()


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def test_plugin_critic_and_actor_drive_train_and_evaluate(
    installed: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tiny_dataset(tmp_path / "tiny.h5")
    fast = ["--dataset", str(data), "--preset", "cpu-demo", "--epochs", "1", "--batch-size", "8",
            "--device", "cpu"]  # fmt: skip
    one = tmp_path / "one"
    assert run(["pretrain", *fast, "--out", str(one)], capsys)[0] == 0
    train = [*fast, "--init", str(one), "--glimpses", "3"]
    critic_run, actor_run = tmp_path / "c", tmp_path / "a"
    args = ["train", *train, "--critic", "hidden-critic", "--out", str(critic_run)]
    code, _, err = run(args, capsys)
    assert code == 0, err
    state = load_checkpoint(critic_run / "latest.pt")
    assert state["config"]["critic"] == "hidden-critic"
    assert set(state["critic"]) == {"value.weight", "value.bias"}

    code, _, err = run(["train", *train, "--actor", "right-turns", "--out", str(actor_run)], capsys)
    assert code == 0, err
    state = load_checkpoint(actor_run / "latest.pt")
    assert state["config"]["actor"] == "right-turns"
    assert state["critic"] is None  # the act head is not learned: no critic
    code, out, err = run(["evaluate", str(actor_run), "--json"], capsys)
    assert code == 0, err
    report = json.loads(out)
    assert report["actor"] == "right-turns"
    # The same run moved by the learned act head instead gives another error.
    code, out, err = run(["evaluate", str(actor_run), "--json", "--actor", "learned"], capsys)
    assert code == 0, err
    assert json.loads(out)["actor"] == "learned"
    assert json.loads(out)["mean_x1000"] != report["mean_x1000"]

    code, _, err = run(["train", *train, "--actor", "bogus", "--out", str(tmp_path / "b")], capsys)
    assert code == 2
    assert "unknown actor 'bogus'; valid names: demo-actions, learned, random, right-turns" in err
    assert not (tmp_path / "b").exists()
