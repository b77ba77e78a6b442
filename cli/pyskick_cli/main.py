"""Entry point of the ``pyskick`` command.

Exit codes: 0 success, 1 runtime failure (or a bug), 2 bad usage or bad input
(:class:`pyskick.errors.UserError`). Errors are one line on stderr; ``pyskick --debug ...`` (or
``PYSKICK_DEBUG=1``) also prints the traceback.
"""

from __future__ import annotations

import errno
import os
import re
import sys
import traceback
from typing import Any, NoReturn

import click

from pyskick import __version__
from pyskick.errors import UserError
from pyskick.memory import keep_freed_memory
from pyskick_cli.lazy import LazyGroup

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
DIAGNOSTICS = ("info", "plugins")
"""Commands that answer whatever the environment holds (they report it)."""
DEBUG_ENV = "PYSKICK_DEBUG"
MAX_MESSAGE = 1000
"""The longest error line printed (a longer one is cut, its length named)."""
DIVERGED = re.compile(
    # torch.multinomial on action probabilities that are no longer finite: the weights are not
    r"probability tensor contains either `inf`, `nan` or element < 0"
)
OUT_OF_MEMORY = re.compile(
    r"can't allocate memory"  # torch's CPU allocator
    r"|out of memory"  # CUDA, and torch.OutOfMemoryError
    r"|could not create a primitive(?! descriptor)"  # oneDNN's workspace (a descriptor is not)
)
"""What libraries say when memory ran out without raising MemoryError (or ENOMEM)."""

# Set by the root --debug option of the running call (reset by every main()).
_state: dict[str, Any] = {"debug": False, "help": False}

COMMANDS = {
    "info": "pyskick_cli.commands.info:info",
    "bench": "pyskick_cli.commands.bench:bench",
    "plugins": "pyskick_cli.commands.plugins:plugins",
    "data": "pyskick_cli.commands.data:data",
    "pretrain": "pyskick_cli.commands.train:pretrain",
    "train": "pyskick_cli.commands.train:train",
    "score": "pyskick_cli.commands.score:score",
    "evaluate": "pyskick_cli.commands.evaluate:evaluate",
    "compare": "pyskick_cli.commands.compare:compare",
    "reproduce": "pyskick_cli.commands.reproduce:reproduce",
    "pool": "pyskick_cli.commands.reproduce:pool",
    "plan": "pyskick_cli.commands.reproduce:plan",
    "demo": "pyskick_cli.commands.demo:demo",
    "visualize": "pyskick_cli.commands.visualize:visualize",
    "export": "pyskick_cli.commands.export:export",
}


def _version_message() -> str:
    from pyskick.ops import build_info

    info = build_info()
    native = "yes" if info["native"] else "no"
    cuda = f"yes (CUDA {info['cuda_version']})" if info.get("cuda") else "no"
    return f"pyskick {__version__} (native: {native}, cuda kernels: {cuda})"


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(_version_message())
        ctx.exit(0)


@click.group(
    cls=LazyGroup,
    lazy_subcommands=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and how the native kernels were built, then exit.",
)
@click.option(
    "--debug",
    is_flag=True,
    help=f"Show the full traceback of an error (or set {DEBUG_ENV}=1).",
)
def cli(debug: bool) -> None:
    """pyskick: sidekick policy learning for active visual exploration.

    \b
    Exit codes: 0 ok, 1 runtime failure or internal error, 2 bad usage or input.
    Progress goes to stderr: bars on a terminal, else one line per epoch or stage
    (PYSKICK_PROGRESS=bars|lines|off chooses).
    """
    from pyskick.files import cache_root, data_dir
    from pyskick_cli.progress import rendering

    if debug:
        _state["debug"] = True
    # A cache variable that names no folder is refused before any work (not after generating
    # a dataset into the other one); help and the diagnostics still answer.
    if not _state["help"] and click.get_current_context().invoked_subcommand not in DIAGNOSTICS:
        cache_root()
        data_dir()
    # Closed (bars cleared) when the command ends, before an error is printed.
    click.get_current_context().with_resource(rendering())


def _debug_requested() -> bool:
    """``--debug`` was given, or the environment asks for tracebacks."""
    return _state["debug"] or os.environ.get(DEBUG_ENV, "").lower() not in ("", "0", "false", "no")


def _one_line(text: str) -> str:
    """An error message on one line (the contract of every refusal), at most
    :data:`MAX_MESSAGE` characters: a library's message can hold a whole array's repr."""
    line = " ".join(text.split())
    if len(line) <= MAX_MESSAGE:
        return line
    return f"{line[: MAX_MESSAGE - 25]} ... ({len(line)} chars)"


def _exit(code: int) -> NoReturn:
    """Exit with ``code``; a rank of a ``torchrun`` launch that joined the process group ends
    without the interpreter's teardown, which can hang in torch's gloo process group
    (:func:`pyskick.distributed.end_process`)."""
    # torchrun's WORLD_SIZE too: only a launch's rank ends so, never a process (a test) that
    # calls main() with a group of its own open. (A bad value is refused elsewhere, not here.)
    launched = os.environ.get("WORLD_SIZE", "1").strip() not in ("", "0", "1")
    if launched and "torch.distributed" in sys.modules:
        from pyskick.distributed import end_process, in_process_group

        if in_process_group():
            end_process(code)
    sys.exit(code)


# Click 8.2 and later raise it for a group run without a command (8.1 shows the help, exit 0).
_NO_ARGS_IS_HELP: type[Exception] | tuple[()] = getattr(click.exceptions, "NoArgsIsHelpError", ())


def main(argv: list[str] | None = None) -> None:
    """Run the CLI and exit with its documented exit code.

    Exit 2 (one line): Click's usage errors and :class:`~pyskick.errors.UserError` (bad input).
    Exit 1 (one line): any other exception, a runtime failure or a bug; ``--debug`` (or
    ``PYSKICK_DEBUG=1``) prints its traceback first.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    keep_freed_memory()
    _state["debug"] = False
    _state["help"] = any(arg in ("-h", "--help") for arg in args)
    try:
        code = cli.main(args=args, prog_name="pyskick", standalone_mode=False)
    except click.exceptions.Exit as exc:
        _exit(exc.exit_code)
    except click.Abort:
        click.echo("Aborted!", err=True)
        _exit(EXIT_FAILURE)
    except click.ClickException as exc:  # UsageError/BadParameter: 2, ClickException: 1
        group = getattr(exc, "ctx", None) if isinstance(exc, _NO_ARGS_IS_HELP) else None
        if group is not None:
            # `pyskick` or `pyskick data` alone: the help, whole, as Click itself shows it.
            click.echo(group.get_help(), err=True)
            _exit(exc.exit_code)
        # One line like every other error; the usage block is a pointer to --help.
        ctx = getattr(exc, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        click.echo(f"Error: {_one_line(exc.format_message())}{hint}", err=True)
        _exit(exc.exit_code)
    except UserError as exc:
        if _debug_requested():
            traceback.print_exc()
        click.echo(f"Error: {_one_line(str(exc))}", err=True)
        _exit(EXIT_USAGE)
    except Exception as exc:  # not the user's input: a runtime failure or a bug
        if _debug_requested():
            traceback.print_exc()
        from pyskick.registry import DuplicateNameError, PluginFailure

        # The machine or the installation (a full disk, a missing extra, a broken plugin, two
        # plugins claiming a name) vs pyskick's own bug.
        runtime = isinstance(
            exc, OSError | MemoryError | ImportError | PluginFailure | DuplicateNameError
        )
        kind = "runtime failure" if runtime else "internal error"
        if DIVERGED.search(str(exc)) is not None:
            kind = (
                "the training diverged (its weights are no longer finite): try a lower --lr, "
                "or a lower grad_clip in a --config file; runtime failure"
            )
        if (
            isinstance(exc, MemoryError)
            or (isinstance(exc, OSError) and exc.errno == errno.ENOMEM)
            or OUT_OF_MEMORY.search(str(exc)) is not None
        ):
            kind = (
                "out of memory: a smaller --batch-size, --eval-batch-size or --num, or fewer "
                "runs at once; runtime failure"
            )
        click.echo(
            f"Error: {type(exc).__name__}: {_one_line(str(exc))} ({kind}; run `pyskick --debug "
            "...` for the traceback)",
            err=True,
        )
        _exit(EXIT_FAILURE)
    # Without standalone mode, click returns ctx.exit(n)'s code instead of raising.
    _exit(code if isinstance(code, int) else EXIT_OK)
