"""glibc malloc settings that keep freed memory (``pyskick.memory.keep_freed_memory``, which
the CLI applies): applied on Linux, never over the user's own."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pyskick.memory import keep_freed_memory

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


_MALLINFO = (
    "import ctypes, ctypes.util\n"
    "from pyskick.memory import _MallInfo2, keep_freed_memory\n"
    "libc = ctypes.CDLL(ctypes.util.find_library('c'))\n"
    "libc.mallinfo2.restype = _MallInfo2\n"
    "libc.malloc.restype = ctypes.c_void_p\n"
    "libc.free.argtypes = [ctypes.c_void_p]\n"
)


def _run(script: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", _MALLINFO + script], capture_output=True, text=True, check=True
    ).stdout
    return out.split()


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
        f"print(libc.mallinfo2().hblkhd >= {mb} * 1024**2)\n"
    )
    assert _run(script) == [str(not tuned)]


@linux
@pytest.mark.parametrize("tuned", [True, False])
def test_freed_memory_stays_in_the_process(tuned: bool) -> None:
    """A freed 256 MB block at the top of the heap is kept for the next allocation (glibc
    would return it to the kernel: unmapped, or trimmed off the heap)."""
    script = (
        f"assert keep_freed_memory() if {tuned} else True\n"
        "small = libc.malloc(64)\n"  # the heap exists before the big block
        "block = libc.malloc(256 * 1024**2)\n"
        "libc.free(block)\n"
        "print(libc.mallinfo2().fordblks >= 256 * 1024**2)\n"
    )
    assert _run(script) == [str(tuned)]


@linux
def test_memory_the_process_keeps_counts_as_available() -> None:
    """What the process freed and keeps is memory it can allocate again: check_memory must not
    refuse work because of it. (A cgroup limit leaving 1 GiB fixes the rest of the sum.)"""
    script = (
        "from pyskick import memory\n"
        "assert keep_freed_memory()\n"
        "before = memory.free_heap_bytes()\n"
        "libc.free(libc.malloc(512 * 1024**2))\n"
        "memory._cgroup_available = lambda root: 2**30\n"
        "available, kept = memory.available_memory(), memory.free_heap_bytes()\n"
        "print(kept - before >= 512 * 1024**2, abs(available - 2**30 - kept) < 2**24)\n"
    )
    assert _run(script) == ["True", "True"]
