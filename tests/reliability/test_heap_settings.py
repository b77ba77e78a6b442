"""glibc malloc settings that keep freed memory (``pyskick.memory.keep_freed_memory``, which
the CLI applies): applied on Linux, never over the user's own.

Each check runs in a fresh process with glibc's defaults: the settings last for the rest of a
process, and the test session applies them to its own when it starts (tests/conftest.py).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pyskick.memory import keep_freed_memory

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc")

_PREAMBLE = (
    "import ctypes\n"
    "from pyskick.memory import keep_freed_memory\n"
    "libc = ctypes.CDLL(None)\n"
    "class Info(ctypes.Structure):\n"  # glibc's struct mallinfo2
    "    _fields_ = [(n, ctypes.c_size_t) for n in ('arena ordblks smblks hblks hblkhd '\n"
    "                'usmblks fsmblks uordblks fordblks keepcost').split()]\n"
    "libc.mallinfo2.restype = Info\n"
    "libc.malloc.restype = ctypes.c_void_p\n"
    "libc.free.argtypes = [ctypes.c_void_p]\n"
    "libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]\n"
)


def _run(script: str) -> list[str]:
    """``script`` in a fresh interpreter with glibc's defaults (the user's MALLOC_* variables
    and GLIBC_TUNABLES left out): what it prints, split."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("MALLOC_") and key != "GLIBC_TUNABLES"
    }
    out = subprocess.run(
        [sys.executable, "-c", _PREAMBLE + script],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    return out.split()


@linux
def test_applied_on_linux() -> None:
    assert _run("print(keep_freed_memory())") == ["True"]


@pytest.mark.parametrize(
    "variable", ["MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES"]
)  # fmt: skip
def test_the_users_settings_win(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    monkeypatch.setenv(variable, "2")
    assert keep_freed_memory() is False  # returns before changing anything


@linux
@pytest.mark.parametrize("tuned", [True, False])
@pytest.mark.parametrize("mb", [16, 256])
def test_a_block_comes_from_the_heap_not_mmap(tuned: bool, mb: int) -> None:
    """In a fresh process, glibc's initial threshold (128 KiB) would mmap the block (and unmap
    it on free), and no threshold keeps a block over 32 MiB; with the settings it comes from
    the heap, whatever its size."""
    script = (
        f"assert keep_freed_memory() if {tuned} else True\n"
        f"block = libc.malloc({mb} * 1024**2)\n"
        "assert block\n"
        f"print(libc.mallinfo2().hblkhd >= {mb} * 1024**2)\n"
    )
    assert _run(script) == [str(not tuned)]


@linux
@pytest.mark.parametrize("tuned", [True, False])
def test_freed_memory_stays_in_the_process(tuned: bool) -> None:
    """A freed 256 MB block at the top of the heap, written to, is kept for the next
    allocation (glibc would return it to the kernel: unmapped, or trimmed off the heap)."""
    script = (
        f"assert keep_freed_memory() if {tuned} else True\n"
        "small = libc.malloc(64)\n"  # the heap exists before the big block
        "block = libc.malloc(256 * 1024**2)\n"
        "assert small and block\n"
        "libc.memset(block, 1, 256 * 1024**2)\n"
        "libc.free(block)\n"
        "print(libc.mallinfo2().fordblks >= 256 * 1024**2)\n"
    )
    assert _run(script) == [str(tuned)]


def test_the_pyskick_command_applies_them(monkeypatch: pytest.MonkeyPatch) -> None:
    import pyskick_cli.main

    calls: list[str] = []
    monkeypatch.setattr(pyskick_cli.main, "keep_freed_memory", lambda: bool(calls.append("k")))
    with pytest.raises(SystemExit) as exit_:
        pyskick_cli.main.main(["--version"])
    assert exit_.value.code == 0
    assert calls == ["k"]
