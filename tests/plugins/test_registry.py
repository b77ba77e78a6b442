"""The plugin manager and registries: discovery, provenance, clashes, broken plugins."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from pyskick.plugins import DEFAULT_PLUGINS, make_plugin_host
from pyskick.registry import DuplicateNameError, Entry, Registry, UnknownNameError

MakeDist = Callable[[str, str], Path]
RunCli = Callable[..., subprocess.CompletedProcess[str]]

TOY_PLUGIN = """
import click
import pyskick


def toy_sidekick():
    "A toy sidekick used by the tests."
    return "toy"


@pyskick.hookimpl
def pyskick_register_sidekicks(register):
    register("toy-sidekick", toy_sidekick, aliases=("toy",))


@pyskick.hookimpl
def pyskick_register_commands(cli):
    @cli.command(name="hello-toy")
    def hello_toy():
        "Say hello."
        click.echo("hello from toy")
"""


def test_builtins_register_through_the_hooks() -> None:
    host = make_plugin_host(autoload=False)
    assert set(DEFAULT_PLUGINS) <= set(host.plugins)
    entry = host.registries.dataset.get("synthetic-scenes")
    assert entry.plugin == "pyskick.builtins.datasets"
    assert entry.summary.startswith("Procedural 360")


def test_a_summary_is_the_docstrings_first_paragraph_on_one_line() -> None:
    def wrapped() -> None:
        """A summary that is too long for one line of a docstring, so it goes on to a
        second.

        Details that are no part of it."""

    def bare() -> None:
        pass

    assert Entry("sidekick", "w", wrapped, "p").summary == (
        "A summary that is too long for one line of a docstring, so it goes on to a second."
    )
    assert Entry("sidekick", "b", bare, "p").summary == ""
    bare.__doc__ = "A summary\n    that wraps.\n    \n    After a blank line of spaces."
    assert Entry("sidekick", "b", bare, "p").summary == "A summary that wraps."


def test_entry_point_plugin_is_discovered_with_provenance(make_dist: MakeDist) -> None:
    make_dist("pyskick-toy", TOY_PLUGIN)
    host = make_plugin_host()
    assert host.plugins["pyskick-toy"].distribution == "pyskick-toy"
    assert host.plugins["pyskick-toy"].version == "0.1"
    entry = host.registries.sidekick.get("toy-sidekick")
    assert entry.plugin == "pyskick-toy"
    assert host.registries.sidekick.get("toy").name == "toy-sidekick"  # alias


def test_autoload_can_be_disabled_and_restricted(
    make_dist: MakeDist, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_dist("pyskick-toy", TOY_PLUGIN)
    monkeypatch.setenv("PYSKICK_DISABLE_PLUGIN_AUTOLOAD", "1")
    assert "pyskick-toy" not in make_plugin_host().plugins
    monkeypatch.delenv("PYSKICK_DISABLE_PLUGIN_AUTOLOAD")
    monkeypatch.setenv("PYSKICK_LOAD_PLUGINS", "something-else")
    assert "pyskick-toy" not in make_plugin_host().plugins
    monkeypatch.setenv("PYSKICK_LOAD_PLUGINS", "something-else, pyskick-toy")
    assert "pyskick-toy" in make_plugin_host().plugins


def test_duplicate_name_names_both_plugins(make_dist: MakeDist) -> None:
    make_dist(
        "pyskick-clash",
        """
        import pyskick

        def scenes():
            "Another dataset with a taken name."

        @pyskick.hookimpl
        def pyskick_register_datasets(register):
            register("synthetic-scenes", scenes)
        """,
    )
    host = make_plugin_host()
    with pytest.raises(DuplicateNameError) as exc:
        _ = host.registries
    message = str(exc.value)
    assert "pyskick-clash" in message
    assert "pyskick.builtins.datasets" in message


def test_unknown_name_lists_valid_names() -> None:
    registry = Registry("critic")
    registry.register("average", lambda: None, plugin="p")
    registry.register("critic", lambda: None, plugin="p")
    with pytest.raises(
        UnknownNameError, match="unknown critic 'avg'; valid names: average, critic"
    ):
        registry.get("avg")


def test_alias_clash_is_rejected() -> None:
    registry = Registry("actor")
    registry.register("random", lambda: None, aliases=("rnd",), plugin="a")
    with pytest.raises(DuplicateNameError, match="actor 'rnd' registered by both a and b"):
        registry.register("rnd", lambda: None, plugin="b")
    with pytest.raises(TypeError, match="must be a list"):
        registry.register("greedy", lambda: None, aliases="gr", plugin="b")


def test_broken_plugin_does_not_break_the_cli(make_dist: MakeDist, run_cli: RunCli) -> None:
    site = make_dist("pyskick-broken", "raise ImportError('needs a missing library')\n")
    make_dist("pyskick-toy", TOY_PLUGIN)
    helped = run_cli(site, "--help")
    assert helped.returncode == 0, helped.stderr
    assert "hello-toy" in helped.stdout  # the working plugin's command is still there
    listed = run_cli(site, "plugins", "--json")
    assert listed.returncode == 0, listed.stderr
    report = json.loads(listed.stdout)
    assert "needs a missing library" in report["failures"]["pyskick-broken"]
    plugins = {p["name"]: p for p in report["plugins"]}  # installed plugins/ folders too
    assert "pyskick-broken" not in plugins
    assert plugins["pyskick-toy"]["registered"] == {"sidekick": ["toy-sidekick"]}


def test_an_unknown_name_names_the_plugins_that_failed_to_load(
    make_dist: MakeDist, run_cli: RunCli
) -> None:
    """Issue 26: ``--sidekick NAME`` of a plugin that failed to load said only "unknown
    sidekick"; the one-line error now names the failed plugin and why."""
    site = make_dist("pyskick-broken", "raise ImportError('needs a missing library')\n")
    done = run_cli(site, "train", "--dataset", "x.h5", "--sidekick", "broken-one", "--out", "r")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()[-1:]
    assert "unknown sidekick 'broken-one'" in line
    assert (
        "plugin 'pyskick-broken' failed to load (ImportError: needs a missing library), see "
        "`pyskick plugins`"
    ) in line


def test_failing_plugins_are_reported_not_fatal(make_dist: MakeDist, run_cli: RunCli) -> None:
    site = make_dist(
        "pyskick-flaky",
        """
        import pyskick

        @pyskick.hookimpl
        def pyskick_register_commands(cli):
            @cli.command(name="train")
            def shadow():
                "Not the real train."
            raise RuntimeError("flaky commands")

        @pyskick.hookimpl
        def pyskick_register_datasets(register):
            register("synthetic-scenes", lambda data_dir=None: None)  # a clash
        """,
    )
    helped = run_cli(site, "--help")
    assert helped.returncode == 0, helped.stderr
    for command in (["plugins", "--json"], ["info", "--json"]):
        result = run_cli(site, *command)
        assert result.returncode == 0, result.stderr
    report = json.loads(run_cli(site, "plugins", "--json").stdout)
    failure = report["failures"]["pyskick-flaky"]
    assert "registered by both" in failure
    assert "flaky commands" in failure
    assert "command 'train' is already provided by pyskick" in failure
    plugins = {p["name"]: p for p in report["plugins"]}
    assert plugins["pyskick-flaky"]["registered"] == {}  # the built-in kept its name
    # Using the registries for real still refuses the ambiguous name.
    used = run_cli(site, "train", "--dataset", "synthetic-scenes", "--out", str(site / "run"))
    assert used.returncode != 0
    assert "registered by both" in used.stderr  # the built-in train ran, not the shadow


def test_a_registration_hook_that_raises_is_named_as_the_plugin_that_failed(
    make_dist: MakeDist, run_cli: RunCli
) -> None:
    # Was "ValueError: registration failed (internal error ...)" for a built-in sidekick's
    # command, and "Invalid value for --logger" for train: neither named the plugin.
    site = make_dist(
        "pyskick-raising",
        """
        import pyskick

        @pyskick.hookimpl
        def pyskick_register_sidekicks(register):
            raise ValueError("registration failed")
        """,
    )
    for args in (
        ["score", "--sidekick", "rew", "--dataset", "x.h5", "--out", "s.h5"],
        ["train", "--dataset", "synthetic-scenes", "--out", str(site / "run")],
    ):
        used = run_cli(site, *args)
        assert used.returncode == 1, used.stderr
        (line,) = used.stderr.strip().splitlines()[-1:]
        assert line.startswith(
            "Error: PluginFailure: plugin 'pyskick-raising' failed in pyskick_register_sidekicks: "
            "ValueError: registration failed"
        )
        assert "(runtime failure;" in line
    assert not (site / "run").exists()


def test_plugin_command_runs(make_dist: MakeDist, run_cli: RunCli) -> None:
    site = make_dist("pyskick-toy", TOY_PLUGIN)
    result = run_cli(site, "hello-toy")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hello from toy\n"
