"""A plugin implementing a hook that does not exist is reported as failed, not fatal (issue 14).

Before, pluggy's ``check_pending()`` raised for a misspelled hook (``pyskick_register_sidekick``)
of any installed plugin, so every command exited 1, ``--help``, ``info`` and ``plugins``
included. The distributions here are real: a module and a ``*.dist-info`` with an
``entry_points.txt`` on ``sys.path``, found by ``importlib.metadata`` like an installed one.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from pyskick.plugins import make_plugin_host

MakeDist = Callable[[str, str], Path]
RunCli = Callable[..., subprocess.CompletedProcess[str]]

TYPO_PLUGIN = """
import pyskick


def typo_sidekick():
    "Never registered: the plugin has a misspelled hook."


@pyskick.hookimpl
def pyskick_register_sidekick(register):  # missing "s"
    register("typo-sidekick", typo_sidekick)


@pyskick.hookimpl
def pyskick_register_critics(register):  # valid, but the whole plugin is skipped
    register("typo-critic", typo_sidekick)
"""

GOOD_PLUGIN = """
import click
import pyskick


@pyskick.hookimpl
def pyskick_register_commands(cli):
    @cli.command(name="hello-good")
    def hello_good():
        "Say hello."
        click.echo("hello from good")
"""


def test_misspelled_hook_skips_the_plugin_and_names_the_hook(make_dist: MakeDist) -> None:
    make_dist("pyskick-typo", TYPO_PLUGIN)
    # pluggy's contract: an ``optionalhook`` implementation may name a hook that is absent.
    make_dist(
        "pyskick-optional",
        """
        import pluggy

        @pluggy.HookimplMarker("pyskick")(optionalhook=True)
        def pyskick_register_future_things(register):
            pass
        """,
    )
    host = make_plugin_host()
    assert "pyskick-optional" in host.plugins
    assert "pyskick-optional" not in host.failures
    failure = host.failures["pyskick-typo"]
    assert "pyskick-typo" in failure
    assert "unknown hook 'pyskick_register_sidekick'" in failure
    assert "did you mean 'pyskick_register_sidekicks'?" in failure
    assert "pyskick-typo" not in host.plugins
    # Nothing of the plugin is left registered, its valid hooks included.
    assert "typo-critic" not in host.registries.critic.names()
    assert "typo-sidekick" not in host.registries.sidekick.names()


def test_unknown_hook_without_a_close_name_lists_the_hooks(make_dist: MakeDist) -> None:
    make_dist(
        "pyskick-odd",
        """
        import pyskick

        @pyskick.hookimpl
        def frobnicate():
            pass

        @pyskick.hookimpl
        def pyskick_register_actor(register):
            pass
        """,
    )
    failure = make_plugin_host().failures["pyskick-odd"]
    assert "unknown hooks 'frobnicate' (the hooks are pyskick_register_actors," in failure
    assert "'pyskick_register_actor' (did you mean 'pyskick_register_actors'?)" in failure


@pytest.mark.slow
def test_cli_keeps_working_with_a_misspelled_plugin(
    make_dist: MakeDist, run_cli: RunCli, tmp_path: Path
) -> None:
    make_dist("pyskick-typo", TYPO_PLUGIN)
    site = make_dist("pyskick-good", GOOD_PLUGIN)

    helped = run_cli(site, "--help", cwd=tmp_path)
    assert helped.returncode == 0, helped.stderr
    assert "hello-good" in helped.stdout

    info = run_cli(site, "info", "--json", cwd=tmp_path)
    assert info.returncode == 0, info.stderr
    report = json.loads(info.stdout)
    assert report["plugin_failures"] == ["pyskick-typo"]
    assert "typo-critic" not in report["registered"]["critic"]

    listed = run_cli(site, "plugins", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "pyskick-good" in listed.stdout
    failed = [line for line in listed.stderr.splitlines() if line.startswith("pyskick-typo:")]
    assert len(failed) == 1, listed.stderr
    assert "FAILED to load" in failed[0]
    assert "pyskick_register_sidekick" in failed[0]
    assert "pyskick_register_sidekicks" in failed[0]

    # A real command that looks names up in the registries, and the good plugin's command.
    out = tmp_path / "scenes.h5"
    made = run_cli(
        site, "data", "make", "synthetic-scenes", "--num", "3", "--out", str(out), cwd=tmp_path
    )
    assert made.returncode == 0, made.stderr
    assert out.is_file()
    hello = run_cli(site, "hello-good", cwd=tmp_path)
    assert (hello.returncode, hello.stdout) == (0, "hello from good\n"), hello.stderr
