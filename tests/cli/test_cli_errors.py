"""Exit codes: bad input (UserError, Click usage errors) exits 2, anything else exits 1 with one
line that says it is not the user's input and how to see the traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import click
import pytest
import torch

from pyskick.errors import UserError, UserFileNotFoundError, UserTypeError
from pyskick_cli.main import cli, main

HINT = "run `pyskick --debug ...` for the traceback"


def run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The real entry point (exit-code mapping included), in process."""
    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


@pytest.fixture
def raising_command(monkeypatch: pytest.MonkeyPatch) -> Callable[[BaseException], None]:
    """Add a command ``boom`` to the ``pyskick`` group (as a plugin's
    ``pyskick_register_commands`` does) that raises the given exception."""

    def install(error: BaseException) -> None:
        @click.command("boom")
        def boom() -> None:
            """Fail."""
            raise error

        monkeypatch.setitem(cli.commands, "boom", boom)

    return install


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError("kernel launch failed"),
        ValueError("shape mismatch in a helper"),
        TypeError("unsupported operand"),
        KeyError("missing"),
        FileNotFoundError("/internal/cache/file"),
        ImportError("matplotlib is missing: pip install pyskick[viz]"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_an_internal_error_exits_1_with_one_line_and_the_debug_hint(
    raising_command: Callable[[BaseException], None],
    capsys: pytest.CaptureFixture[str],
    error: BaseException,
) -> None:
    raising_command(error)
    code, out, err = run_main(["boom"], capsys)
    assert code == 1
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"Error: {type(error).__name__}: ")
    assert HINT in lines[0]
    assert "Traceback" not in err
    # The machine or the installation, or else a bug.
    kind = "runtime failure" if isinstance(error, OSError | ImportError) else "internal error"
    assert f"({kind}; " in lines[0]


@pytest.mark.parametrize(
    "error",
    [
        UserError("--thing 3 is not allowed"),
        UserTypeError("TrainConfig.T must be an int, got 'x'"),
        UserFileNotFoundError("no viewgrid file at x.h5"),
        click.BadParameter("bad value", param_hint="--thing"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_bad_input_exits_2_with_one_line(
    raising_command: Callable[[BaseException], None],
    capsys: pytest.CaptureFixture[str],
    error: BaseException,
) -> None:
    raising_command(error)
    code, _, err = run_main(["boom"], capsys)
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("Error: ")
    assert "internal error" not in lines[0]
    assert "--debug" not in lines[0]


@pytest.mark.parametrize("args", [[], ["data"]])
def test_a_group_alone_shows_its_help_whole(
    capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    # Not Click's help flattened into one cut "Error: Usage: ..." line.
    code, out, err = run_main(args, capsys)
    assert code == 2
    assert out == ""
    assert err.startswith(f"Usage: {' '.join(['pyskick', *args])} [OPTIONS] COMMAND [ARGS]...\n")
    assert "\nCommands:\n" in err
    assert "Error:" not in err


def test_user_errors_are_the_builtin_exceptions_library_callers_catch() -> None:
    assert issubclass(UserError, ValueError)
    assert issubclass(UserTypeError, TypeError)
    assert issubclass(UserTypeError, UserError)
    assert issubclass(UserFileNotFoundError, FileNotFoundError)
    assert issubclass(UserFileNotFoundError, UserError)


def test_input_errors_of_the_library_are_user_errors() -> None:
    from pyskick.data.hdf5_format import ViewgridFileError
    from pyskick.registry import UnknownNameError
    from pyskick.run_dir import RunLockedError

    for kind in (ViewgridFileError, UnknownNameError, RunLockedError):
        assert issubclass(kind, UserError), kind


def test_debug_shows_the_traceback_and_keeps_the_exit_code(
    raising_command: Callable[[BaseException], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    raising_command(RuntimeError("kernel launch failed"))
    code, _, err = run_main(["--debug", "boom"], capsys)
    assert code == 1
    assert "Traceback (most recent call last)" in err
    assert "raise error" in err  # the frame that raised
    assert err.rstrip().splitlines()[-1].startswith("Error: RuntimeError: kernel launch failed")
    # The flag belongs to that call only.
    code, _, err = run_main(["boom"], capsys)
    assert code == 1
    assert "Traceback" not in err


def test_debug_from_the_environment_in_a_real_process(tmp_path: Path) -> None:
    # A fresh `python -m pyskick` process whose `info` command hits a failing function.
    script = (
        "import sys, pyskick.ops\n"
        "def broken():\n"
        "    raise RuntimeError('build info unavailable')\n"
        "pyskick.ops.build_info = broken\n"
        "from pyskick_cli.main import main\n"
        "main(sys.argv[1:])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYSKICK_DEBUG"}
    plain = subprocess.run(
        [sys.executable, "-c", script, "info"], capture_output=True, text=True, env=env
    )
    assert plain.returncode == 1
    assert plain.stderr.splitlines() == [
        f"Error: RuntimeError: build info unavailable (internal error; {HINT})"
    ]
    debug = subprocess.run(
        [sys.executable, "-c", script, "info"],
        capture_output=True,
        text=True,
        env={**env, "PYSKICK_DEBUG": "1"},
    )
    assert debug.returncode == 1
    assert "Traceback (most recent call last)" in debug.stderr
    assert "in broken" in debug.stderr


def test_a_multi_line_message_is_printed_on_one_line(
    raising_command: Callable[[BaseException], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    raising_command(UserError("first part\nsecond part"))
    code, _, err = run_main(["boom"], capsys)
    assert code == 2
    assert err.splitlines() == ["Error: first part second part"]


@pytest.mark.parametrize(
    "error",
    [
        MemoryError(),
        RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 78 GB"),
        RuntimeError("could not create a primitive"),
        OSError(12, "Cannot allocate memory"),
    ],
    ids=["MemoryError", "allocator", "oneDNN", "ENOMEM"],
)
def test_out_of_memory_says_so_and_what_to_lower(
    raising_command: Callable[[BaseException], None],
    capsys: pytest.CaptureFixture[str],
    error: BaseException,
) -> None:
    raising_command(error)
    code, _, err = run_main(["boom"], capsys)
    assert code == 1
    (line,) = err.splitlines()
    assert "(out of memory: a smaller --batch-size" in line
    assert "internal error" not in line


def test_a_diverged_training_says_so_and_what_to_lower(
    raising_command: Callable[[BaseException], None], capsys: pytest.CaptureFixture[str]
) -> None:
    # What torch.multinomial raises on the action probabilities of non-finite weights.
    try:
        torch.multinomial(torch.tensor([[float("nan"), 1.0]]), 1)
    except RuntimeError as exc:
        raising_command(exc)
    code, _, err = run_main(["boom"], capsys)
    assert code == 1
    (line,) = err.splitlines()
    assert "(the training diverged (its weights are no longer finite): try a lower --lr" in line
    assert "internal error" not in line


def test_a_library_message_of_a_whole_array_is_cut_to_one_short_line(
    raising_command: Callable[[BaseException], None], capsys: pytest.CaptureFixture[str]
) -> None:
    raising_command(RuntimeError("Error sending result: 'tensor([" + "1, " * 50_000 + "])'"))
    code, _, err = run_main(["boom"], capsys)
    assert code == 1
    (line,) = err.splitlines()
    assert len(line) < 1200
    assert "chars)" in line
    assert HINT in line


def test_a_onednn_descriptor_error_is_not_called_out_of_memory(
    raising_command: Callable[[BaseException], None], capsys: pytest.CaptureFixture[str]
) -> None:
    raising_command(RuntimeError("could not create a primitive descriptor for the reorder"))
    _, _, err = run_main(["boom"], capsys)
    assert "out of memory" not in err
    assert "(internal error; " in err


def test_an_output_that_is_an_input_is_refused_but_not_an_earlier_output_beside_it(
    tmp_path,
) -> None:
    from pyskick.errors import UserError
    from pyskick_cli.outputs import check_not_inputs

    run = tmp_path / "run"
    run.mkdir()
    for name in ("best.pt", "config.json", "metrics.jsonl", "errors.npz"):
        (run / name).write_bytes(b"x")
    data = tmp_path / "scenes.h5"
    data.write_bytes(b"x")
    for output in (run / "best.pt", run / "config.json", run / "metrics.jsonl", data):
        with pytest.raises(UserError, match="is one of this command's inputs"):
            check_not_inputs([output], [run, None, data])
    check_not_inputs([run / "errors.npz"], [run, None, data])  # an earlier --save: replaceable
    check_not_inputs([tmp_path / "new.npz"], [run, data])
    with pytest.raises(UserError, match="is one of this command's inputs"):
        check_not_inputs([run / "best.pt"], [run / "best.pt"])  # RUN given as a checkpoint
