"""The CLI's glibc malloc settings: applied on Linux, never over the user's own."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pyskick_cli.memory import keep_freed_memory

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc")


@linux
def test_applied_on_linux() -> None:
    assert keep_freed_memory() is True


@pytest.mark.parametrize(
    "variable", ["MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES"]
)  # fmt: skip
def test_the_users_settings_win(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    monkeypatch.setenv(variable, "2")
    assert keep_freed_memory() is False


@linux
@pytest.mark.parametrize("tuned", [True, False])
def test_a_16_mb_block_comes_from_the_heap_not_mmap(tuned: bool) -> None:
    """In a fresh process, glibc's initial threshold (128 KiB) would mmap a 16 MB block
    (and unmap it on free); with the settings it comes from the heap."""
    script = (
        "import ctypes, ctypes.util\n"
        "from pyskick_cli.memory import keep_freed_memory\n"
        f"assert keep_freed_memory() if {tuned} else True\n"
        "libc = ctypes.CDLL(ctypes.util.find_library('c'))\n"
        "class Info(ctypes.Structure):\n"
        "    _fields_ = [(n, ctypes.c_size_t) for n in ('arena ordblks smblks hblks hblkhd '\n"
        "                'usmblks fsmblks uordblks fordblks keepcost').split()]\n"
        "libc.mallinfo2.restype = Info\n"
        "libc.malloc.restype = ctypes.c_void_p\n"
        "block = libc.malloc(16 * 1024**2)\n"
        "print(libc.mallinfo2().hblkhd >= 16 * 1024**2)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == str(not tuned)
