"""The CLI's contract: lazy subcommands load, --version, exit codes, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from pyskick import __version__
from pyskick_cli.main import cli, main


def run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Call the real entry point (exit-code mapping included) in-process."""
    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def test_every_subcommand_has_working_help() -> None:
    runner = CliRunner()
    ctx = click.Context(cli)
    names = cli.list_commands(ctx)
    assert {"info", "bench"} <= set(names)
    for name in names:
        result = runner.invoke(cli, [name, "--help"])
        assert result.exit_code == 0, (name, result.output)
        assert "Usage:" in result.output


def test_version_reports_native_build(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(["--version"], capsys)
    assert code == 0
    assert out.startswith(f"pyskick {__version__} (native: ")
    assert "cuda kernels:" in out


def test_info_json_matches_build_info(capsys: pytest.CaptureFixture[str]) -> None:
    from pyskick.ops import build_info

    code, out, _ = run_main(["info", "--json"], capsys)
    assert code == 0
    report = json.loads(out)
    assert report["pyskick"] == __version__
    assert report["build"] == build_info()


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(["no-such-command"], capsys)
    assert code == 2
    assert out == ""
    assert "No such command" in err


def test_bad_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(["info", "--bogus"], capsys)
    assert code == 2
    assert "--bogus" in err


@pytest.mark.parametrize("module", ["pyskick", "pyskick_cli"])
def test_module_entry_points_run_the_cli(module: str) -> None:
    by_module = subprocess.run(
        [sys.executable, "-m", module, "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert by_module.stdout.startswith(f"pyskick {__version__}")
    refused = subprocess.run(
        [sys.executable, "-m", module, "no-such-command"], capture_output=True, text=True
    )
    assert refused.returncode == 2
    assert "No such command" in refused.stderr


def test_import_pyskick_is_light_and_reaches_every_subpackage() -> None:
    # A fresh process: `import pyskick` loads neither torch nor a subpackage, and each
    # subpackage is then an attribute, imported on first use.
    script = (
        "import sys, pyskick\n"
        "assert 'torch' not in sys.modules, 'torch'\n"
        "packages = ('actors', 'data', 'envs', 'evaluation', 'experiments', 'models', 'ops',\n"
        "            'sidekicks', 'training', 'viz')\n"
        "loaded = [m for m in sys.modules if m.startswith('pyskick.')\n"
        "          and m.split('.')[1] in packages]\n"
        "assert not loaded, loaded\n"
        "for missing in ('no_such_module', '_io'):  # unknown, or private: not exposed\n"
        "    try:\n"
        "        getattr(pyskick, missing)\n"
        "    except AttributeError as exc:\n"
        "        assert missing in str(exc), exc\n"
        "    else:\n"
        "        raise AssertionError(missing)\n"
        "assert isinstance(pyskick.ops.build_info(), dict)\n"
        "for name in (*packages, 'errors', 'registry', 'plugins'):\n"
        "    assert getattr(pyskick, name).__name__ == 'pyskick.' + name, name\n"
        "    assert name in dir(pyskick), name\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
