"""Table 1 rows added by a plugin (``pyskick_register_methods``): listed, selected, refused, run."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from pyskick.data.builtin import make_builtin
from pyskick.experiments import check_available, reproduce, select_methods
from pyskick.plugins import get_host, make_plugin_host
from pyskick.registry import DuplicateNameError

MakeDist = Callable[[str, str], Path]
RunCli = Callable[..., subprocess.CompletedProcess[str]]

MINE_PLUGIN = """
import pyskick


@pyskick.hookimpl
def pyskick_register_methods(register):
    register(
        "ours(mine)",
        label="The rew sidekick with two peaks",
        sidekick="rew",
        sidekick_options={"k": 2},
        role="sidekick",
        position=6,
    )
    register("orphan", label="A row whose sidekick nobody registers", sidekick="nowhere")
    register("bad-option", label="A row fixing an option rew lacks", sidekick="rew",
             sidekick_options={"peaks": 2})
"""


@pytest.fixture
def process_host() -> Iterator[None]:
    """The process's plugin host, rebuilt for the test (and after it)."""
    get_host.cache_clear()
    yield
    get_host.cache_clear()


def test_a_plugin_row_is_listed_and_selected(make_dist: MakeDist, run_cli: RunCli) -> None:
    site = make_dist("pyskick-mine", MINE_PLUGIN)
    listed = run_cli(site, "plugins", "--json")
    assert listed.returncode == 0, listed.stderr
    report = json.loads(listed.stdout)
    plugin = {p["name"]: p for p in report["plugins"]}["pyskick-mine"]
    assert plugin["hooks"] == ["pyskick_register_methods"]
    # In table order: by position, then name.
    assert plugin["registered"] == {"method": ["ours(mine)", "bad-option", "orphan"]}
    summary = report["summaries"]["method:ours(mine)"]
    assert summary == (
        "The rew sidekick with two peaks (actor learned, critic average, sidekick rew [k=2]; "
        "role sidekick)"
    )
    # `reproduce --methods` lists it among the valid rows (before ours(rew): same position,
    # then by name), before the dataset is even read.
    out, data = site / "out", site / "never-read.h5"
    data.write_bytes(b"")
    refused = run_cli(
        site, "reproduce", "--dataset", str(data), "--out", str(out), "--methods", "x"
    )
    assert refused.returncode == 2, refused.stderr
    assert "unknown method 'x'; valid methods: one-view, rnd-actions, rnd-rewards, ltla, " in (
        refused.stderr
    )
    assert "ours(mine), ours(rew), ours(demo)," in refused.stderr
    assert "orphan" in refused.stderr
    assert not out.exists()


def test_rows_that_cannot_run_are_refused_when_selected(make_dist: MakeDist) -> None:
    make_dist("pyskick-mine", MINE_PLUGIN)
    registries = make_plugin_host().registries
    assert [m.name for m in select_methods(["ours(mine)"], registries)] == [
        "one-view",
        "ours(mine)",
    ]
    check_available(select_methods(["ours(mine)"], registries), registries)
    with pytest.raises(
        ValueError,
        match=r"method orphan \(plugin pyskick-mine\) needs sidekick 'nowhere', which no "
        r"installed plugin registers",
    ):
        check_available(select_methods(["orphan"], registries), registries)
    with pytest.raises(
        ValueError, match=r"method bad-option .* sets option 'peaks' that sidekick 'rew' does not"
    ):
        check_available(select_methods(["bad-option"], registries), registries)


def test_bad_registrations_name_the_plugin(make_dist: MakeDist, run_cli: RunCli) -> None:
    make_dist(
        "pyskick-taken",
        """
        import pyskick

        @pyskick.hookimpl
        def pyskick_register_methods(register):
            register("ltla", label="Another ltla")
        """,
    )
    with pytest.raises(
        DuplicateNameError,
        match=r"method 'ltla' registered by both pyskick.builtins.methods and pyskick-taken",
    ):
        make_plugin_host().registries  # noqa: B018
    site = make_dist(
        "pyskick-sloppy",
        """
        import pyskick

        @pyskick.hookimpl
        def pyskick_register_methods(register):
            register("mine", label="Mine", sidekicks="rew")
        """,
    )
    report = json.loads(run_cli(site, "plugins", "--json").stdout)
    assert "method 'mine' has no field 'sidekicks'" in report["failures"]["pyskick-sloppy"]
    assert "method 'ltla' registered by both" in report["failures"]["pyskick-taken"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"label": ""}, "label must be a non-empty string"),
        (
            {"label": "x", "role": "hero"},
            "role must be one of one-view, reference, sidekick, baseline",
        ),
        ({"label": "x", "role": "one-view"}, "only the 'one-view' row has role 'one-view'"),
        ({"label": "x", "position": 1.5}, "position must be an int"),
        ({"label": "x", "sidekick_options": {"k": [2]}}, "sidekick_options must map"),
        ({}, "label"),
    ],
)
def test_method_fields_are_checked(fields: dict[str, object], message: str) -> None:
    from pyskick.registry import MethodRegistry

    with pytest.raises((TypeError, ValueError), match=message):
        MethodRegistry("method").register("mine", plugin="p", **fields)
    with pytest.raises(ValueError, match="has no '/'"):
        MethodRegistry("method").register("a/b", plugin="p", label="x")


def test_reproduce_runs_a_plugin_row_with_its_options(
    make_dist: MakeDist, tmp_path: Path, process_host: None
) -> None:
    make_dist("pyskick-mine", MINE_PLUGIN)
    get_host.cache_clear()  # the process's host sees the new distribution
    scenes = make_builtin("synthetic-scenes", tmp_path / "s.h5", 40, 1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result = reproduce(
            scenes, tmp_path / "out", methods=["ltla", "ours(mine)"], preset="cpu-demo",
            epochs=1, pretrain_epochs=1, batch_size=8, device="cpu", seeds=1, report=False,
            loggers=["jsonl"], sidekick_options={"decay_every": 3},
        )  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    rows = {row["method"]: row for row in result.table["rows"]}
    assert list(rows) == ["one-view", "ltla", "ours(mine)"]
    assert rows["ours(mine)"]["role"] == "sidekick"
    # As a sidekick row it is checked against ltla, like ours(...) rows.
    assert {(c["better"], c["worse"]) for c in result.table["ordering"]} >= {("ours(mine)", "ltla")}
    # The run has the row's own option and the user's; the folder's shared resolution of rew
    # (for rows without options of their own) keeps the default k.
    config = json.loads((tmp_path / "out" / "ours(mine)" / "seed-0" / "config.json").read_text())
    assert config["sidekick"] == "rew"
    assert config["sidekick_options"]["k"] == 2
    assert config["sidekick_options"]["decay_every"] == 3
    assert config["loggers"] == ["jsonl"]
    settings = json.loads((tmp_path / "out" / "reproduce.json").read_text())
    assert settings["resolved_sidekick_options"]["rew"]["k"] == 4  # SUN360-shaped default
    assert not (tmp_path / "out" / "ours(mine)" / "seed-0" / "tensorboard").exists()
