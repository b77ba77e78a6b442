"""Sidekick options: declarations, parsing, defaults per run, make_sidekick, resume rules,
TrainConfig/TOML recording and the score-cache key."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyskick.config import TrainConfig, load_config
from pyskick.data.spec import GridSpec
from pyskick.experiments.reproduce import split_sidekick_options
from pyskick.options import parse_assignments, resolve_options
from pyskick.registry import Registry
from pyskick.sidekicks import NoSidekick, Sidekick, SidekickOption, make_sidekick
from pyskick.sidekicks.defaults import (
    DECAY_FACTOR,
    REWARD_OPTIONS,
    decay_every_default,
    hybrid_schedule_default,
)
from pyskick.sidekicks.demo import DemoSidekick
from pyskick.sidekicks.factory import for_run
from pyskick.sidekicks.reward import RewardSidekick
from pyskick.sidekicks.scores import score_key

from .conftest import MEAN, smooth_grids

SPEC = GridSpec(3, 4, 1, 16, (30.0, 0.0, -30.0), (0.0, 90.0, 180.0, 270.0), 45.0, MEAN, "custom")
MODELNET = GridSpec(
    3, 4, 1, 16, (30.0, 0.0, -30.0), (0.0, 90.0, 180.0, 270.0), 45.0, MEAN, "modelnet-hard"
)


# ------------------------------------------------------------------------------- one option


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        (SidekickOption("n", int, 1, "h", minimum=1), "5", 5),
        (SidekickOption("n", int, 1, "h", minimum=1), 7, 7),
        (SidekickOption("x", float, 1.0, "h", minimum=0.0), "1e-3", 1e-3),
        (SidekickOption("x", float, 1.0, "h", minimum=0.0), 2, 2.0),  # TOML int for a float
        (SidekickOption("b", bool, False, "h"), "yes", True),
        (SidekickOption("b", bool, False, "h"), "0", False),
        (SidekickOption("b", bool, False, "h"), True, True),
        (SidekickOption("s", str, "a", "h", choices=("a", "b")), "b", "b"),
    ],
)
def test_values_are_parsed_to_the_declared_type(option, value, expected) -> None:
    parsed = option.parse(value, "sidekick 'x'")
    assert parsed == expected
    assert type(parsed) is type(expected)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        (SidekickOption("n", int, 1, "h", minimum=1), "abc", "n must be an int >= 1, got 'abc'"),
        (SidekickOption("n", int, 1, "h", minimum=1), "0", "n must be an int >= 1, got '0'"),
        (SidekickOption("n", int, 1, "h", minimum=1), 1.5, "got 1.5"),
        (SidekickOption("n", int, 1, "h", minimum=1), True, "got True"),
        (SidekickOption("x", float, 1.0, "h", minimum=0.0, above_minimum=True), "0", "> 0"),
        (SidekickOption("x", float, 1.0, "h"), "nan", "must be a number"),
        (SidekickOption("b", bool, False, "h"), "maybe", "true or false"),
        (SidekickOption("s", str, "a", "h", choices=("a", "b")), "c", "one of a, b"),
    ],
)
def test_bad_values_name_the_option(option, value, message) -> None:
    with pytest.raises(ValueError, match="sidekick 'x' option") as info:
        option.parse(value, "sidekick 'x'")
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_declarations_are_checked() -> None:
    with pytest.raises(ValueError, match="identifier"):
        SidekickOption("bad-name", int, 1, "h")
    with pytest.raises(TypeError, match="int, float, bool or str"):
        SidekickOption("x", list, [], "h")
    registry = Registry("sidekick")
    with pytest.raises(ValueError, match="declared twice"):
        registry.register(
            "s", NoSidekick, options=[SidekickOption("a", int, 1, "h")] * 2, plugin="p"
        )
    critics = Registry("critic")
    with pytest.raises(TypeError, match="only sidekicks declare options"):
        critics.register("c", NoSidekick, options=[SidekickOption("a", int, 1, "h")], plugin="p")


def test_assignments() -> None:
    assert parse_assignments(["k=4", " scale = 0.5 ", "name=a=b"]) == {
        "k": "4",
        "scale": "0.5",
        "name": "a=b",
    }
    for bad, message in ((["k"], "KEY=VALUE"), (["=4"], "KEY=VALUE"), (["k=1", "k=2"], "twice")):
        with pytest.raises(ValueError, match=message):
            parse_assignments(bad)


# ------------------------------------------------------------------- the built-in sidekicks


def test_defaults_scale_with_the_run() -> None:
    short = TrainConfig(epochs=12)
    paper = TrainConfig(epochs=1000)
    assert decay_every_default(SPEC, short) == 6
    assert decay_every_default(SPEC, paper) == 500
    assert decay_every_default(SPEC, TrainConfig(epochs=1)) == 1
    assert decay_every_default(SPEC, TrainConfig(epochs=5)) == 3  # decays once, after epoch 3
    assert hybrid_schedule_default(SPEC, paper) == 50
    assert hybrid_schedule_default(SPEC, TrainConfig(epochs=3)) == 1
    rew = for_run("rew", {}, spec=SPEC, config=short).options
    assert rew == {
        "scale": 255e-4,
        "decay_every": 6,
        "decay_factor": DECAY_FACTOR,
        "k": 4,
        "radius": 1,
    }
    # NMS follows the dataset preset (ModelNet Hard: 5 peaks, radius 2).
    modelnet = for_run("rew", {"k": "3"}, spec=MODELNET, config=short).options
    assert (modelnet["k"], modelnet["radius"]) == (3, 2)
    assert for_run("demo", {}, spec=SPEC, config=paper).options == {"hybrid_schedule": 50}
    assert for_run("none", {}).options == {}


def test_unknown_options_list_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="sidekick 'rew' has no option 'decay'") as info:
        for_run("rew", {"decay": "2"}, spec=SPEC, config=TrainConfig())
    assert "valid options: scale, decay_every, decay_factor, k, radius" in str(info.value)
    with pytest.raises(ValueError, match="valid options: none: it takes no options"):
        for_run("none", {"k": "1"})


def test_make_sidekick_stamps_name_and_options(one_view_ckpt: Path) -> None:
    config = TrainConfig(epochs=8)
    sidekick = make_sidekick(
        "rew", one_view=one_view_ckpt, spec=SPEC, config=config, options={"decay_every": "2"}
    )
    assert isinstance(sidekick, RewardSidekick)
    assert sidekick.name == "rew"
    assert dict(sidekick.options) == {
        "scale": 255e-4,
        "decay_every": 2,
        "decay_factor": DECAY_FACTOR,
        "k": 4,
        "radius": 1,
    }
    assert (sidekick.decay_every, sidekick.decay_factor, sidekick.k) == (2, DECAY_FACTOR, 4)
    # The schedule the options set: halved after epochs 2 and 4 (indices 1 and 3).
    scales = []
    for epoch in range(5):
        scales.append(sidekick.reward_scale(epoch))
        sidekick.on_epoch_end(epoch)
    assert scales == pytest.approx([255e-4, 255e-4, 255e-4 / 2, 255e-4 / 2, 255e-4 / 4])
    demo = make_sidekick("demo", one_view=one_view_ckpt, spec=SPEC, config=config)
    assert isinstance(demo, DemoSidekick)
    assert demo.hybrid_schedule == 1  # 5 % of 8 epochs, at least 1


def test_make_sidekick_checks_what_the_factory_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    from pyskick.registry import Entry
    from pyskick.sidekicks import factory

    entry = Entry("sidekick", "odd", lambda **_: object(), "tests")
    monkeypatch.setattr(factory, "sidekick_entry", lambda name, field=None: entry)
    with pytest.raises(TypeError, match=r"built a object, not a pyskick\.sidekicks\.Sidekick"):
        make_sidekick("odd", one_view=None, spec=None, config=None)


def test_a_resumed_run_keeps_its_recorded_options() -> None:
    options = {"scale": 0.01, "decay_every": 3, "decay_factor": 2.0, "k": 4, "radius": 1}
    recorded = {"sidekick": "rew", "sidekick_options": options}  # what the run recorded
    longer = TrainConfig(epochs=40)  # its own default decay_every would be 20

    def resumed(name: str | None, given: dict, record: dict = recorded) -> dict:
        return for_run(name, given, spec=SPEC, config=longer, recorded=record).options

    assert resumed("rew", {}) == options
    assert resumed(None, {}) == options  # no name: the run's own sidekick
    assert resumed("rew", {"decay_every": "3"}) == options
    with pytest.raises(ValueError, match="cannot resume: sidekick 'rew' option decay_every is 5 "):
        resumed("rew", {"decay_every": "5"})
    with pytest.raises(ValueError, match="cannot resume: the run used sidekick 'rew', not 'demo'"):
        resumed("demo", {})
    # An option the run predates gets its default.
    partial = {key: value for key, value in options.items() if key != "radius"}
    assert resumed("rew", {}, {"sidekick": "rew", "sidekick_options": partial})["radius"] == 1
    with pytest.raises(ValueError, match="started by a pyskick without sidekick options"):
        resumed(None, {}, {"sidekick": "rew"})
    # A new run resolves the defaults of its config.
    assert for_run("rew", {}, spec=SPEC, config=longer).options["decay_every"] == 20


def test_options_that_change_scores_change_the_cache_key(one_view_ckpt: Path) -> None:
    grids = smooth_grids(3, seed=4)
    config = TrainConfig(epochs=8)

    def key(**options: str) -> str:
        sidekick = make_sidekick(
            "rew", one_view=one_view_ckpt, spec=SPEC, config=config, options=options
        )
        return score_key(sidekick, grids, 4)

    assert key() == key(decay_every="5", scale="0.5")  # the schedule does not change scores
    assert key() != key(k="3")
    assert key() != key(radius="0")


# ------------------------------------------------------------------------ config and TOML


def test_train_config_records_the_options() -> None:
    config = TrainConfig(sidekick="rew", sidekick_options={"decay_every": 3})
    assert config.to_dict()["sidekick_options"] == {"decay_every": 3}
    assert TrainConfig.from_dict(config.to_dict()) == config
    given = {"k": 4}
    frozen = TrainConfig(sidekick_options=given)
    given["k"] = 5
    assert frozen.sidekick_options == {"k": 4}  # a private copy
    with pytest.raises(TypeError, match="sidekick_options"):
        TrainConfig(sidekick_options={"k": [1]})
    with pytest.raises(TypeError, match="sidekick_options"):
        TrainConfig(sidekick_options=[("k", 1)])


def test_configs_from_before_the_options_drop_the_moved_field() -> None:
    old = {**TrainConfig().to_dict(), "hybrid_schedule": 7}
    del old["sidekick_options"]
    del old["start_zeroing"]
    # Such a run zeroed the start's neighbourhood (the rule of that time) and keeps it.
    assert TrainConfig.from_dict(old) == TrainConfig(start_zeroing="neighbourhood")
    with pytest.raises(ValueError, match="hybrid_schedule is now the demonstrating sidekicks"):
        TrainConfig().replace(hybrid_schedule=7)


def test_toml_sidekick_table(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text(
        'preset = "cpu-demo"\nepochs = 12\n\n[sidekick]\nname = "rew"\ndecay_every = 2\n'
        "scale = 0.01\n"
    )
    config = load_config(path)
    assert config.sidekick == "rew"
    assert config.sidekick_options == {"decay_every": 2, "scale": 0.01}
    # Command-line options are added to the file's, and win.
    merged = load_config(path, overrides={"sidekick_options": {"decay_every": "4", "k": "3"}})
    assert merged.sidekick_options == {"decay_every": "4", "scale": 0.01, "k": "3"}
    flat = tmp_path / "flat.toml"
    flat.write_text('sidekick = "demo"\n')
    assert load_config(flat).sidekick == "demo"
    nested = tmp_path / "nested.toml"
    nested.write_text("[model]\nwidth = 3\n")
    with pytest.raises(ValueError, match="apart from a \\[sidekick\\] table; got tables model"):
        load_config(nested)
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ValueError, match=f"config file {binary} is not a UTF-8 text file"):
        load_config(binary)


# --------------------------------------------------------------------------------- reproduce


def test_reproduce_splits_options_by_sidekick() -> None:
    sidekicks = ["none", "rew", "demo", "rnd-rewards"]
    split, record = split_sidekick_options(
        {"decay_every": "3", "rew.decay_every": "5", "hybrid_schedule": "2"}, sidekicks
    )
    assert split == {
        "rew": {"decay_every": 5},
        "rnd-rewards": {"decay_every": 3},
        "demo": {"hybrid_schedule": 2},
    }
    # What a folder records is what was given (parsed), whatever methods are selected.
    assert record == {"decay_every": 3, "hybrid_schedule": 2, "rew.decay_every": 5}
    assert split_sidekick_options({"decay_every": "3"}, ["rew"])[1] == {"decay_every": 3}
    with pytest.raises(ValueError, match="no selected sidekick has option 'foo'"):
        split_sidekick_options({"foo": "1"}, sidekicks)
    with pytest.raises(ValueError, match="no selected method uses sidekick 'expert-clone'"):
        split_sidekick_options({"expert-clone.hybrid_schedule": "1"}, ["rew"])
    with pytest.raises(ValueError, match="sidekick 'rew' has no option 'hybrid_schedule'"):
        split_sidekick_options({"rew.hybrid_schedule": "1"}, ["rew", "demo"])
    with pytest.raises(ValueError, match="decay_every must be an int >= 1"):
        split_sidekick_options({"decay_every": "0"}, ["rew"])


def test_declared_reward_options_match_the_sidekick_arguments() -> None:
    import inspect

    parameters = inspect.signature(RewardSidekick).parameters
    for option in REWARD_OPTIONS:
        assert option.name in parameters
    assert resolve_options(REWARD_OPTIONS, {}, owner="x", spec=None, config=None)["k"] == 4
    assert issubclass(RewardSidekick, Sidekick)


def test_sidekick_settings_do_not_split_the_one_view_cache(tmp_path: Path) -> None:
    # Every sidekick (and its options, the start rule) starts from the same cached one-view
    # model: they only matter after pretraining.
    from pyskick.training.one_view_cache import cache_key, pretrain_config

    dataset = tmp_path / "d.h5"
    dataset.write_bytes(b"bytes of a dataset")
    base = TrainConfig(epochs=10)
    rew = base.replace(
        sidekick="rew", sidekick_options={"k": 3}, start_zeroing="none", reward_radius=2
    )
    assert cache_key(dataset, rew) == cache_key(dataset, base)
    assert pretrain_config(rew) == pretrain_config(base)
    assert cache_key(dataset, base.replace(pretrain_epochs=7)) != cache_key(dataset, base)
