"""docs/cli.md is the generated reference of the current Click commands (``make docs``)."""

from __future__ import annotations

import difflib
import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from pyskick_cli.docgen import REGENERATE, render

ROOT = Path(__file__).resolve().parents[2]
CLI_MD = ROOT / "docs" / "cli.md"

HELLO_PLUGIN = """
import click
import pyskick


@pyskick.hookimpl
def pyskick_register_commands(cli):
    @cli.command(name="hello-plugin")
    def hello_plugin():
        "Say hello from a plugin."
        click.echo("hello")
"""


def _docgen(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pyskick_cli.docgen", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_docs_cli_md_is_current() -> None:
    current = CLI_MD.read_text(encoding="utf-8")
    expected = render()
    if current != expected:
        diff = "".join(
            list(
                difflib.unified_diff(
                    current.splitlines(keepends=True),
                    expected.splitlines(keepends=True),
                    "docs/cli.md",
                    "generated",
                )
            )[:40]
        )
        raise AssertionError(f"docs/cli.md is out of date with the CLI; run {REGENERATE}\n{diff}")


def test_the_reference_covers_commands_subcommands_and_options() -> None:
    text = render()
    assert text == render()  # deterministic
    for heading in ("## `pyskick`", "## `pyskick train`", "### `pyskick data make`"):
        assert f"\n{heading}\n" in text
    assert "Usage: pyskick data from-meshes [OPTIONS] FOLDER" in text
    assert "- `--sidekick-option KEY=VALUE`: Set an option of the sidekick" in text
    assert "- [`pyskick data preview`](#pyskick-data-preview): " in text
    assert "`--help`: Show this message" not in text  # said once, in the header
    assert "&lt;split>" in text  # not an HTML tag in Markdown


def test_check_refuses_a_stale_file_and_writing_makes_it_current(tmp_path: Path) -> None:
    out = tmp_path / "cli.md"
    out.write_text("# stale\n", encoding="utf-8")
    stale = _docgen("--out", str(out), "--check")
    assert stale.returncode == 1
    assert f"{out} is out of date with the CLI; regenerate it: make docs" in stale.stderr
    assert out.read_text(encoding="utf-8") == "# stale\n"  # --check writes nothing

    written = _docgen("--out", str(out))
    assert written.returncode == 0, written.stderr
    assert out.read_text(encoding="utf-8") == render()
    assert _docgen("--out", str(out), "--check").returncode == 0


def test_plugin_commands_are_left_out(tmp_path: Path) -> None:
    """A real plugin distribution (module and ``.dist-info`` entry point) adds a command that
    ``pyskick --help`` lists and the reference does not."""
    site = tmp_path / "site"
    (site / "pyskick_hello-0.1.dist-info").mkdir(parents=True)
    (site / "pyskick_hello.py").write_text(textwrap.dedent(HELLO_PLUGIN))
    (site / "pyskick_hello-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: pyskick-hello\nVersion: 0.1\n"
    )
    (site / "pyskick_hello-0.1.dist-info" / "entry_points.txt").write_text(
        "[pyskick]\npyskick-hello = pyskick_hello\n"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYSKICK_")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    listing = subprocess.run(
        [sys.executable, "-m", "pyskick_cli", "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert "hello-plugin" in listing.stdout, listing.stdout + listing.stderr
    out = tmp_path / "cli.md"
    result = _docgen("--out", str(out), env=env)
    assert result.returncode == 0, result.stderr
    text = out.read_text(encoding="utf-8")
    assert "hello-plugin" not in text
    assert text == render()
    assert importlib.util.find_spec("pyskick_hello") is None  # nothing leaked into this process
