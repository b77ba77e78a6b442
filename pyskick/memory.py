"""How much memory this process may still use (MemAvailable, capped by a cgroup limit), and glibc
``malloc`` settings that keep the memory it frees for reuse.

Work that would allocate a lot at once (writing a viewgrid file, reading many viewgrids, episodes
of a long ``T``) asks :func:`check_memory` first and is refused in one line, before anything is
allocated or written, instead of failing (or being killed) halfway.
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

from pyskick.errors import UserError

# Where the memory controller of this process's cgroup is mounted (v2, or v1 under memory/).
_CGROUP_ROOT = Path("/sys/fs/cgroup")


def _stat_value(path: Path, *keys: str) -> int:
    """The first of ``keys`` found in a cgroup ``memory.stat`` file (0 when none is)."""
    try:
        values = dict(line.split()[:2] for line in path.read_text().splitlines() if line.strip())
    except (OSError, ValueError):
        return 0
    for key in keys:
        try:
            return int(values[key])
        except (KeyError, ValueError):
            continue
    return 0


def _cgroup_available(root: Path = _CGROUP_ROOT) -> int | None:
    """Bytes a cgroup memory limit leaves to this process's group, or None without a limit.

    The usage counts the page cache, which the kernel reclaims on demand: what the limit leaves
    is measured against the working set, the usage minus the inactive file pages (as container
    runtimes do). cgroup v2 (``memory.max``) first, then v1 (``memory/memory.limit_in_bytes``,
    whose "no limit" is a huge number that the caller's ``min`` with MemAvailable absorbs).
    """
    for limit_file, usage_file, stat_file, keys in (
        ("memory.max", "memory.current", "memory.stat", ("inactive_file",)),
        (
            "memory/memory.limit_in_bytes",
            "memory/memory.usage_in_bytes",
            "memory/memory.stat",
            ("total_inactive_file", "inactive_file"),
        ),
    ):
        try:
            text = (root / limit_file).read_text().strip()
        except OSError:
            continue
        if text == "max":
            return None
        try:
            limit = int(text)
            used = int((root / usage_file).read_text())
        except (OSError, ValueError):
            return None
        working_set = max(used - _stat_value(root / stat_file, *keys), 0)
        return max(limit - working_set, 0)
    return None


def available_memory(cgroup: Path = _CGROUP_ROOT) -> int:
    """Bytes of memory available now (Linux: MemAvailable, capped by a cgroup limit).

    Args:
        cgroup: where this process's cgroup memory controller is mounted.

    Returns:
        MemAvailable (elsewhere: the free physical pages; ``sys.maxsize`` when neither is
        known), at most what the cgroup's limit leaves.
    """
    available: int | None = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    if available is None:
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, AttributeError):
            return sys.maxsize
    left = _cgroup_available(cgroup)
    return available if left is None else min(available, left)


def check_memory(need: int, what: str, hint: str) -> None:
    """Refuse work that would need ``need`` bytes of memory at once when less is available,
    before anything is allocated or written.

    Raises:
        UserError: one line: ``what`` needs about N GiB, M GiB are available; ``hint``.
    """
    available = available_memory()
    if need > available:
        raise UserError(
            f"{what} needs about {need / 2**30:.1f} GiB of memory, {available / 2**30:.1f} GiB "
            f"are available; {hint}"
        )


# ------------------------------------------------------------ keeping freed memory
# mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_MAX = -4

MMAP_MAX = 0
"""Blocks served by their own ``mmap``: none from the main thread's heap, whatever their size
(glibc caps the mmap threshold at 32 MiB, so a threshold alone cannot keep larger blocks).
Another thread's heap is capped at 64 MiB: its larger blocks are still mmapped."""
TRIM_THRESHOLD = -1
"""Free memory at the top of the heap before it is returned to the kernel: -1, never (mallopt's
documented value; the process keeps its high-water mark until it exits)."""
TOP_PAD = 64 * 1024**2
"""Extra heap obtained per growth, so growing is rare."""


def keep_freed_memory() -> bool:
    """Make glibc keep freed blocks for reuse instead of returning them to the kernel, for the
    rest of the process (the ``pyskick`` command calls it first).

    Training and evaluation on the CPU allocate and free tensors of a few MB to a few hundred
    MB at every step, on the main thread (CPU autograd runs on the calling thread). glibc's
    defaults hand such blocks back to the kernel on every ``free`` (``mmap`` threshold adapting
    from 128 KiB up to at most 32 MiB, heap trimmed above 128 KiB free), so the next step
    page-faults the same memory in again, zero-filled. With these settings the main thread's
    blocks all come from the heap and the heap is never trimmed: the process keeps the memory
    it freed and reuses it, as PyTorch's CUDA caching allocator does on a GPU, until it exits.
    Results are unchanged: only where memory comes from changes (docs/training.md, "CPU
    memory", has the measurements and the side effects).

    Memory the process keeps counts as used in MemAvailable: :func:`check_memory` stays on
    the safe side (it may refuse what reusing that memory would have allowed, never the
    reverse).

    Returns:
        Whether every setting was applied: False off Linux/glibc, or when the user set any
        ``MALLOC_*`` variable or ``GLIBC_TUNABLES`` (their choice wins; nothing is changed).
    """
    if not sys.platform.startswith("linux"):
        return False
    if "GLIBC_TUNABLES" in os.environ or any(key.startswith("MALLOC_") for key in os.environ):
        return False
    try:
        # The process's own symbols: libc is loaded already (find_library would run ldconfig).
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # no mallopt: not glibc
        return False
    settings = (
        (_M_MMAP_MAX, MMAP_MAX),
        (_M_TRIM_THRESHOLD, TRIM_THRESHOLD),
        (_M_TOP_PAD, TOP_PAD),
    )
    applied = [mallopt(param, value) == 1 for param, value in settings]
    return all(applied)
