"""One test per hook (a meta-test checks that none is missing) and the docs check."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import click
import pluggy
import pytest

from pyskick import hookimpl, hookspecs
from pyskick.plugins import PluginHost, make_plugin_host
from pyskick.registry import KINDS

DOCS = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"


def hook_names() -> list[str]:
    pm = pluggy.PluginManager("pyskick")
    pm.add_hookspecs(hookspecs)
    return sorted(name for name in dir(pm.hook) if name.startswith("pyskick_"))


class Recorder:
    """A plugin registering one name of every kind and one command."""

    @hookimpl
    def pyskick_register_sidekicks(self, register: hookspecs.Register) -> None:
        register("rec-sidekick", lambda: "s")

    @hookimpl
    def pyskick_register_critics(self, register: hookspecs.Register) -> None:
        register("rec-critic", lambda: "c")

    @hookimpl
    def pyskick_register_actors(self, register: hookspecs.Register) -> None:
        register("rec-actor", lambda: "a")

    @hookimpl
    def pyskick_register_datasets(self, register: hookspecs.Register) -> None:
        register("rec-dataset", lambda data_dir=None: Path("rec.h5"))

    @hookimpl
    def pyskick_register_loggers(self, register: hookspecs.Register) -> None:
        register("rec-logger", lambda: "l")

    @hookimpl
    def pyskick_register_methods(self, register: hookspecs.RegisterMethod) -> None:
        register("rec-method", label="A row", sidekick="rec-sidekick", role="sidekick")

    @hookimpl
    def pyskick_register_commands(self, cli: click.Group) -> None:
        cli.add_command(click.Command("rec-command", callback=lambda: None))


@pytest.fixture
def host_with_recorder() -> PluginHost:
    host = make_plugin_host(autoload=False)
    host.pm.register(Recorder(), name="recorder")
    return host


def check_registration(host: PluginHost, kind: str) -> None:
    entry = host.registries[kind].get(f"rec-{kind}")
    assert entry.plugin == "recorder"
    assert entry.name == f"rec-{kind}"


def test_hook_pyskick_register_sidekicks(host_with_recorder: PluginHost) -> None:
    check_registration(host_with_recorder, "sidekick")


def test_hook_pyskick_register_critics(host_with_recorder: PluginHost) -> None:
    check_registration(host_with_recorder, "critic")


def test_hook_pyskick_register_actors(host_with_recorder: PluginHost) -> None:
    check_registration(host_with_recorder, "actor")


def test_hook_pyskick_register_datasets(host_with_recorder: PluginHost) -> None:
    check_registration(host_with_recorder, "dataset")
    assert host_with_recorder.registries.dataset.get("rec-dataset").factory() == Path("rec.h5")


def test_hook_pyskick_register_loggers(host_with_recorder: PluginHost) -> None:
    check_registration(host_with_recorder, "logger")
    assert host_with_recorder.registries.logger.get("rec-logger").factory() == "l"


def test_hook_pyskick_register_methods(host_with_recorder: PluginHost) -> None:
    check_registration(host_with_recorder, "method")
    method = host_with_recorder.registries.method.get("rec-method")
    assert (method.label, method.sidekick, method.role) == ("A row", "rec-sidekick", "sidekick")
    # After the paper's rows (positions 0 to 10) by default.
    assert host_with_recorder.registries.method.names()[-1] == "rec-method"


def test_hook_pyskick_register_commands(host_with_recorder: PluginHost) -> None:
    group = click.Group("root")
    host_with_recorder.pm.hook.pyskick_register_commands(cli=group)
    assert "rec-command" in group.commands


def test_recorder_covers_every_kind(host_with_recorder: PluginHost) -> None:
    for kind in KINDS:
        check_registration(host_with_recorder, kind)


def test_every_hook_has_a_test() -> None:
    tests = {name for name in globals() if name.startswith("test_hook_")}
    missing = [name for name in hook_names() if f"test_hook_{name}" not in tests]
    assert not missing, f"hooks without a test_hook_<name>: {missing}"


def test_every_hook_is_documented_with_its_signature() -> None:
    docs = DOCS.read_text()
    for name in hook_names():
        params = ", ".join(inspect.signature(getattr(hookspecs, name)).parameters)
        heading = f"### `{name}({params})`"
        assert heading in docs, f"docs/plugins.md lacks the heading {heading}"


def test_hookspecs_have_docstrings() -> None:
    for name in hook_names():
        doc = getattr(hookspecs, name).__doc__ or ""
        assert re.search(r":param \w+:", doc), f"{name} docstring documents no parameter"
