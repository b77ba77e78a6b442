"""Single-process or torchrun data-parallel execution (docs/training.md, "Distributed training").

Under ``torchrun`` (``WORLD_SIZE > 1``) the trainer joins the process group (gloo on the CPU;
on CUDA, each rank on its own GPU, ``cpu:gloo,cuda:nccl``: nccl for CUDA tensors, gloo for any
on the host), wraps its modules in DDP and gives each rank an equal slice of every global batch;
metrics are summed over ranks and only rank 0 writes files. Every tensor collective goes through
:func:`all_reduce_sum`, which refuses a tensor on a device the group cannot reduce.

Every "am I rank 0?" goes through :func:`is_main`, which also answers before the process
group exists (from torchrun's ``RANK``), so the command line can decide who locks and writes a
run folder before training starts. :func:`broadcast_from_main` and :func:`gather_from_ranks`
exchange results and failures between ranks, so that one rank's error is raised on all of
them instead of leaving the others blocked in a collective.

A bottom-layer module (no pyskick imports).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import torch
import torch.distributed as dist
from torch import Tensor

from pyskick.errors import UserError

_T = TypeVar("_T")


def in_process_group() -> bool:
    """True in a process that has joined a process group (under ``torchrun``)."""
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    """This process's global rank: the process group's once it is initialised, else
    torchrun's ``RANK`` (0 in a plain process)."""
    if in_process_group():
        return dist.get_rank()
    return int(os.environ.get("RANK", "0"))


def local_rank() -> int:
    """This process's rank on its node (torchrun's ``LOCAL_RANK``; 0 in a plain process): the
    CUDA device it uses."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def is_main() -> bool:
    """Rank 0 of a torchrun launch, or a plain process: the one that writes files and speaks."""
    return rank() == 0


def world() -> tuple[int, int]:
    """``(rank, world_size)`` of the initialised process group; ``(0, 1)`` outside one."""
    if in_process_group():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


@dataclass(frozen=True)
class DistContext:
    """Where this process stands in the job."""

    rank: int = 0
    """Global rank (0 in a single-process run)."""
    world_size: int = 1
    """Number of processes."""
    local_rank: int = 0
    """Rank on this node (picks the CUDA device)."""
    reducible: frozenset[str] = frozenset({"cpu", "cuda"})
    """Device types whose tensors the process group reduces (:func:`reducible_devices`)."""

    @property
    def distributed(self) -> bool:
        """True under a multi-process launch."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """True on the rank that writes files and logs."""
        return self.rank == 0


AUTO_DEVICE_ENV = "PYSKICK_AUTO_DEVICE"
"""Environment variable: what ``device="auto"`` means (``cpu`` or ``cuda``; unset: CUDA when
available). Explicit ``cpu``/``cuda`` settings are not affected."""


def resolve_device(device: str, index: int | None = None) -> torch.device:
    """``"auto"`` -> CUDA when available (``cuda:index``), else CPU; ``$PYSKICK_AUTO_DEVICE``
    (``cpu`` or ``cuda``) decides ``"auto"`` instead when set, e.g. to keep a test suite or a
    shared GPU machine's runs on the CPU.

    Args:
        device: ``"auto"``, ``"cpu"`` or ``"cuda"``.
        index: the CUDA device; default :func:`local_rank` (under torchrun each rank uses its
            own GPU).

    Raises:
        UserError: unknown name (or value of ``$PYSKICK_AUTO_DEVICE``), ``"cuda"`` without a
            CUDA device, or a CUDA index past the visible devices (under torchrun: more
            processes per node than GPUs).
    """
    if device not in ("auto", "cpu", "cuda"):
        raise UserError(f"device must be auto, cpu or cuda, got {device!r}")
    asked = f"device '{device}'"
    if device == "auto" and os.environ.get(AUTO_DEVICE_ENV):
        device = os.environ[AUTO_DEVICE_ENV]
        if device not in ("cpu", "cuda"):
            raise UserError(f"{AUTO_DEVICE_ENV} must be cpu or cuda, got {device!r}")
        asked = f"{AUTO_DEVICE_ENV}={device}"
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError(f"{asked} requested but no CUDA device is available")
    if device == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    rank_index = index is None
    index = local_rank() if index is None else index
    if index >= torch.cuda.device_count():
        advice = (  # torchrun with more ranks per node than GPUs
            ": start at most that many processes per node, or use --device cpu"
            if rank_index
            else ""
        )
        raise UserError(
            f"cuda:{index} requested but {torch.cuda.device_count()} CUDA device(s) visible"
            + advice
        )
    return torch.device("cuda", index)


def init_distributed(device: torch.device) -> DistContext:
    """Join the process group when launched with ``WORLD_SIZE > 1`` (idempotent).

    Args:
        device: the training device; CUDA selects nccl, CPU gloo.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return DistContext()
    if device.type == "cuda":
        # nccl and the object collectives stage on the current device: this rank's GPU.
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        backend = "cpu:gloo,cuda:nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend)
        # Left to the interpreter's exit, gloo's threads are torn down by C++ destructors, which
        # sometimes abort the process after its work is done ("terminate called without an
        # active exception", exit -6): the group this module made is destroyed before that.
        atexit.register(destroy_distributed)
    return DistContext(
        rank=dist.get_rank(),
        world_size=dist.get_world_size(),
        local_rank=local_rank(),
        reducible=reducible_devices(str(dist.get_backend())),
    )


def settle_collectives() -> None:
    """Wait for every rank at a barrier (nothing without a process group). Call it on every
    rank after the last collective of work that ended normally (never on an error path: a rank
    that raised alone would wait for peers that never come).

    gloo runs each collective on a worker thread, which frees the finished collective after
    its caller has the result; a tensor whose Python object was let go of meanwhile needs the
    GIL to be freed. Destroying the process group joins those threads while holding the GIL
    (at the latest when the interpreter exits and DDP's reducer, which holds the group, is
    freed): a worker still freeing a collective then waits for the GIL forever. Under CPU load
    a 2-rank CPU training hung so at exit in 3-6 of 20 tries (the torch 2.13 CPU wheel). The
    barrier's wait releases the GIL, and the workers finish first.
    """
    if in_process_group():
        dist.barrier()


def end_process(code: int) -> NoReturn:
    """End this process with exit status ``code`` without tearing its process group down: run
    the exit handlers (logging's flush and any a library registered, :func:`destroy_distributed`
    left out), flush stdout and stderr and leave with ``os._exit``.

    What a process that trained under ``torchrun`` calls once its work is written: the
    interpreter's teardown frees DDP's reducer, and with it the gloo group, while holding the
    GIL, and a gloo worker still freeing a finished collective's tensors waits for the GIL
    forever (:func:`settle_collectives` makes that rare, not impossible: 2 of 62 loaded 2-rank
    runs). Ending the process ends gloo's threads with it. After work that ended normally
    every rank has passed its last collective (:func:`settle_collectives`), so no peer waits
    for this one; after an error a peer blocked in a collective sees the connection close (and
    torchrun stops the launch). ``pyskick``'s command line ends so under ``torchrun``; a
    script of one's own may too. What is skipped: ``__del__`` methods, waiting for non-daemon
    threads, C++ destructors.
    """
    atexit.unregister(destroy_distributed)
    atexit._run_exitfuncs()  # the handlers os._exit would skip
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed or broken stream: nothing to flush
            stream.flush()
    os._exit(code)


def destroy_distributed() -> None:
    """Leave and destroy the default process group, if there is one (idempotent); registered
    to run at exit by :func:`init_distributed` when it made the group."""
    if in_process_group():
        dist.destroy_process_group()


def reducible_devices(backend: str) -> frozenset[str]:
    """The device types a process group with ``backend`` reduces: ``"gloo"`` the CPU's,
    ``"nccl"`` CUDA's, ``"cpu:gloo,cuda:nccl"`` both."""
    if ":" in backend:
        return frozenset(part.split(":")[0].strip() for part in backend.split(","))
    return frozenset({"cuda"}) if backend == "nccl" else frozenset({"cpu"})


def all_reduce_sum(values: Tensor, ctx: DistContext) -> Tensor:
    """Sum ``values`` over ranks (returns a new tensor; identity in a single process).

    Raises:
        ValueError: ``values`` lie on a device whose tensors the process group cannot reduce
            (an nccl group is handed a CPU tensor), in a single process too, so that the CPU
            tests find what a GPU launch would fail on.
    """
    if values.device.type not in ctx.reducible:
        raise ValueError(
            f"all_reduce_sum: a {values.device.type} tensor cannot be reduced by a process group "
            f"that reduces {', '.join(sorted(ctx.reducible))} tensors"
        )
    out = values.clone()
    if ctx.distributed:
        dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out


@contextlib.contextmanager
def collective_device(device: torch.device) -> Iterator[None]:
    """Object collectives over nccl stage their bytes on the current CUDA device: make it
    this rank's device (gloo stages on the CPU)."""
    if device.type == "cuda":
        with torch.cuda.device(device):
            yield
    else:
        yield


def _outcome(fn: Callable[[], _T]) -> tuple[bool, _T | str]:
    """``(True, fn())`` or ``(False, one-line error)``: ranks exchange failures instead of
    leaving the others blocked in a collective."""
    try:
        return True, fn()
    except Exception as exc:  # re-raised on every rank by _unwrap
        return False, f"{type(exc).__name__}: {exc}"


def _unwrap(outcomes: list[tuple[bool, Any]], what: str) -> list[Any]:
    for source, (ok, value) in enumerate(outcomes):
        if not ok:
            raise RuntimeError(f"{what} failed on rank {source}: {value}")
    return [value for _, value in outcomes]


def broadcast_from_main(fn: Callable[[], _T], device: torch.device, what: str) -> _T:
    """Run ``fn`` on rank 0 only and return its result on every rank (``fn()`` in a single
    process); an exception on rank 0 is raised on every rank as a RuntimeError (as itself in a
    single process).

    Args:
        fn: what rank 0 computes (its result must pickle).
        device: this rank's device (where nccl stages the bytes).
        what: named in the error, e.g. ``"writing the score file"``.
    """
    this, size = world()
    if size == 1:
        return fn()
    box = [_outcome(fn) if this == 0 else None]
    with collective_device(device):
        dist.broadcast_object_list(box, src=0)
    return _unwrap([box[0]], what)[0]  # type: ignore[list-item]


def gather_from_ranks(fn: Callable[[], _T], device: torch.device, what: str) -> list[_T]:
    """Run ``fn`` on every rank and return every rank's result, in rank order, on every rank
    (``[fn()]`` in a single process); an exception on any rank is raised on every rank as a
    RuntimeError naming that rank.

    Args:
        fn: what each rank computes (its result must pickle).
        device: this rank's device (where nccl stages the bytes).
        what: named in the error.
    """
    _, size = world()
    if size == 1:
        return [fn()]
    gathered: list[Any] = [None] * size
    with collective_device(device):
        dist.all_gather_object(gathered, _outcome(fn))
    return _unwrap(gathered, what)
