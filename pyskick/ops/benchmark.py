"""Deterministic workloads, copy bandwidth and timing for the kernel benchmarks.

The targets are in README.md, "Benchmarks".

Shared by ``tests/benchmarks`` (pytest-benchmark) and ``pyskick bench`` (a printed table), so
both time the same inputs. The performance targets are ratios measured in one run:

- ``rotate_viewgrid`` against a plain copy of the same bytes (``grid.clone()``);
- ``coverage_matrix`` against reading ``recon`` once at the measured copy bandwidth;
- ``greedy_coverage`` and ``nms_rewards`` against their vectorised PyTorch twins in
  :mod:`pyskick.ops._reference` (what a user would write instead of a kernel).

**Copy bandwidth** is what :func:`measure_copy_bandwidth` reports: bytes of the source buffer
divided by the time of ``dst.copy_(src)`` between two preallocated buffers larger than any
cache. Every byte is read once and written once, so a pass that only reads (``coverage_matrix``
reads ``recon`` and writes ``B * V * V`` floats) can beat this figure by up to 2x on hardware
whose reads and writes share the bandwidth: "within 1.5x of reading recon once at copy
bandwidth" is therefore a bound that a fused kernel can meet, not an optimistic one.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from pyskick.ops import _reference
from pyskick.ops.coverage import coverage_matrix
from pyskick.ops.greedy import greedy_coverage
from pyskick.ops.nms import nms_rewards
from pyskick.ops.viewgrid import rotate_viewgrid

BENCH_OPS = ("rotate_viewgrid", "nms_rewards", "greedy_coverage", "coverage_matrix")
ROTATE_DTYPES = {"uint8": torch.uint8, "float32": torch.float32}
# coverage_matrix at B=1024 reads 12.9 GB of recon: it runs in chunks of this many samples.
COVERAGE_CHUNK = 8
COPY_BYTES = 256 * 2**20  # larger than the last-level cache of CPUs and GPUs alike


@dataclass(frozen=True)
class GridShape:
    """Viewgrid dimensions: N elevations x M azimuths of ``C x H x W`` views."""

    n_elevations: int
    n_azimuths: int
    channels: int
    height: int
    width: int

    @property
    def views(self) -> int:
        """V = N * M."""
        return self.n_elevations * self.n_azimuths

    @property
    def view_numel(self) -> int:
        """Elements of one view, ``C * H * W``."""
        return self.channels * self.height * self.width


# docs/paper-reference.md §1.3: SUN360 viewgrids are 4 elevations x 8 azimuths of 32x32 RGB views.
SUN360 = GridShape(n_elevations=4, n_azimuths=8, channels=3, height=32, width=32)


@dataclass(frozen=True)
class Workload:
    """Seeded inputs of one op at one scale, runnable on any backend.

    Attributes:
        op: name of the public op in :mod:`pyskick.ops`.
        scale: human label, e.g. ``"sun360 B=1024 uint8"``.
        batch: samples processed per :meth:`run` (``chunks`` x the batch of ``args``).
        args: positional tensors (and ints) of the op.
        kwargs: keyword arguments of the op, ``backend`` excluded.
        chunks: how many times :meth:`run` calls the op on ``args`` (the same chunk is reused:
            it is larger than any cache, so every pass reads memory again).
        bytes_read: bytes a memory-bound op must at least read per :meth:`run` (the grid for
            ``rotate_viewgrid``, ``recon`` for ``coverage_matrix``), else 0.
    """

    op: str
    scale: str
    batch: int
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    chunks: int = 1
    bytes_read: int = 0

    @property
    def device(self) -> torch.device:
        """Device of the input tensors."""
        return self.args[0].device

    def run(self, backend: str) -> Any:
        """Run the public op with ``backend`` ("reference" or "native"); the last chunk's result."""
        fn = _PUBLIC[self.op]
        result = None
        for _ in range(self.chunks):
            result = fn(*self.args, **self.kwargs, backend=backend)
        return result

    def run_twin(self) -> Any:
        """Run the pure-PyTorch twin directly (no validation): the reference for equality checks."""
        return getattr(_reference, self.op)(*self.args, **self.kwargs)

    def baseline(self) -> Callable[[], Any] | None:
        """The memory-bound baseline of this op on the same bytes, or None for loop-like ops.

        ``rotate_viewgrid``: ``grid.clone()`` (reads and writes the grid like the op does).
        ``coverage_matrix``: ``recon.sum()`` per chunk (reads ``recon`` once).
        """
        if self.op == "rotate_viewgrid":
            grid = self.args[0]
            return grid.clone
        if self.op == "coverage_matrix":
            recon = self.args[0]

            def read_once() -> Tensor:
                total = recon.new_zeros(())
                for _ in range(self.chunks):
                    total = total + recon.sum()
                return total

            return read_once
        return None


_PUBLIC: dict[str, Callable[..., Any]] = {
    "rotate_viewgrid": rotate_viewgrid,
    "coverage_matrix": coverage_matrix,
    "greedy_coverage": greedy_coverage,
    "nms_rewards": nms_rewards,
}


def _generator(seed: int) -> torch.Generator:
    # Inputs are drawn on the CPU and moved, so a seed gives the same data on every device.
    return torch.Generator().manual_seed(seed)


def _label(batch: int, extra: str = "", shape: GridShape = SUN360) -> str:
    name = "sun360" if shape == SUN360 else f"{shape.n_elevations}x{shape.n_azimuths}"
    return f"{name} B={batch}" + (f" {extra}" if extra else "")


def rotate_workload(
    batch: int,
    *,
    dtype: torch.dtype = torch.uint8,
    device: str | torch.device = "cpu",
    shape: GridShape = SUN360,
    seed: int = 0,
) -> Workload:
    """Random viewgrids ``[B, N, M, C, H, W]`` and azimuth shifts ``[B]`` (any integer).

    Args:
        batch: B.
        dtype: ``torch.uint8`` (stored pixels) or ``torch.float32`` (preprocessed).
        device: where the tensors live.
        shape: grid dimensions.
        seed: seed of the inputs.
    """
    gen = _generator(seed)
    size = (batch, shape.n_elevations, shape.n_azimuths, shape.channels, shape.height, shape.width)
    if dtype == torch.uint8:
        grid = torch.randint(0, 256, size, generator=gen, dtype=torch.uint8)
    elif dtype == torch.float32:
        grid = torch.rand(size, generator=gen)
    else:
        raise ValueError(
            f"rotate_workload: dtype must be torch.uint8 or torch.float32, got {dtype}"
        )
    shifts = torch.randint(-3 * shape.n_azimuths, 3 * shape.n_azimuths, (batch,), generator=gen)
    grid = grid.to(device)
    dtype_name = str(dtype).removeprefix("torch.")
    return Workload(
        op="rotate_viewgrid",
        scale=_label(batch, dtype_name, shape),
        batch=batch,
        args=(grid, shifts.to(device)),
        bytes_read=grid.numel() * grid.element_size(),
    )


def nms_workload(
    batch: int,
    *,
    k: int = 4,
    radius: int = 1,
    device: str | torch.device = "cpu",
    shape: GridShape = SUN360,
    seed: int = 0,
) -> Workload:
    """Random one-view score maps ``[B, N, M]`` in [0, 1); k peaks, suppression radius."""
    scores = torch.rand(batch, shape.n_elevations, shape.n_azimuths, generator=_generator(seed))
    return Workload(
        op="nms_rewards",
        scale=_label(batch, shape=shape),
        batch=batch,
        args=(scores.to(device), k, radius),
    )


def greedy_workload(
    batch: int,
    *,
    steps: int = 3,
    device: str | torch.device = "cpu",
    shape: GridShape = SUN360,
    seed: int = 0,
) -> Workload:
    """Utilities ``[B, V, V]`` shaped like ``coverage_matrix`` output, from all V start views.

    Each target's column is min-max normalised over the sources into [0, 1], as
    ``coverage_matrix`` returns it, so the trajectories saturate the way real ones do.

    Args:
        batch: B.
        steps: actions per trajectory (T - 1; the paper's T = 4 gives 3).
        device: where the tensors live.
        shape: grid dimensions.
        seed: seed of the inputs.
    """
    V = shape.views
    raw = torch.rand(batch, V, V, generator=_generator(seed))
    lo, hi = raw.amin(dim=1, keepdim=True), raw.amax(dim=1, keepdim=True)
    coverage = ((raw - lo) / (hi - lo)).clamp(0.0, 1.0)
    starts = torch.arange(V).expand(batch, V).contiguous()
    return Workload(
        op="greedy_coverage",
        scale=_label(batch, shape=shape),
        batch=batch,
        args=(coverage.to(device), starts.to(device), steps),
        kwargs={"n_elevations": shape.n_elevations, "n_azimuths": shape.n_azimuths},
    )


def coverage_workload(
    batch: int,
    *,
    chunk: int | None = None,
    device: str | torch.device = "cpu",
    shape: GridShape = SUN360,
    seed: int = 0,
) -> Workload:
    """Reconstructions ``[b, V, N, M, C, H, W]`` near a true grid ``[b, N, M, C, H, W]``.

    Each reconstruction is the truth plus seeded noise whose level differs per start view,
    so the utilities spread over [0, 1] as with a trained model.

    Args:
        batch: B, the samples one :meth:`Workload.run` processes.
        chunk: samples per op call (``batch`` must be a multiple); None processes all at once.
            Only one chunk is allocated and it is processed ``batch / chunk`` times.
        device: where the tensors live.
        shape: grid dimensions.
        seed: seed of the inputs.
    """
    chunk = batch if chunk is None else chunk
    if chunk < 1 or batch % chunk:
        raise ValueError(f"coverage_workload: batch {batch} is not a multiple of chunk {chunk}")
    gen = _generator(seed)
    N, M, V = shape.n_elevations, shape.n_azimuths, shape.views
    grid = torch.rand(chunk, N, M, shape.channels, shape.height, shape.width, generator=gen)
    noise_level = torch.rand(chunk, V, 1, 1, 1, 1, 1, generator=gen)
    recon = grid[:, None] + noise_level * torch.randn(chunk, V, *grid.shape[1:], generator=gen)
    recon = recon.to(device)
    chunks = batch // chunk
    extra = f"chunks of {chunk}" if chunks > 1 else ""
    return Workload(
        op="coverage_matrix",
        scale=_label(batch, extra, shape),
        batch=batch,
        args=(recon, grid.to(device)),
        chunks=chunks,
        bytes_read=recon.numel() * recon.element_size() * chunks,
    )


def build_workload(
    op: str,
    batch: int,
    *,
    device: str | torch.device = "cpu",
    dtype: str = "uint8",
    chunk: int | None = None,
    shape: GridShape = SUN360,
    seed: int = 0,
) -> Workload:
    """The workload of ``op`` at batch ``batch`` with the paper's settings.

    ``rotate_viewgrid`` uses ``dtype`` ("uint8" or "float32"), ``coverage_matrix`` uses
    ``chunk``; ``nms_rewards`` keeps k=4 peaks at radius 1 and ``greedy_coverage`` runs
    T=4 (3 steps) from all start views.
    """
    if op == "rotate_viewgrid":
        if dtype not in ROTATE_DTYPES:
            raise ValueError(f"build_workload: dtype must be uint8 or float32, got {dtype!r}")
        return rotate_workload(
            batch, dtype=ROTATE_DTYPES[dtype], device=device, shape=shape, seed=seed
        )
    if op == "nms_rewards":
        return nms_workload(batch, device=device, shape=shape, seed=seed)
    if op == "greedy_coverage":
        return greedy_workload(batch, device=device, shape=shape, seed=seed)
    if op == "coverage_matrix":
        return coverage_workload(batch, chunk=chunk, device=device, shape=shape, seed=seed)
    raise ValueError(f"build_workload: op must be one of {', '.join(BENCH_OPS)}, got {op!r}")


def synchronize(device: str | torch.device) -> None:
    """Wait for the queued kernels of ``device`` (no-op on the CPU)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass(frozen=True)
class Timing:
    """Wall-clock times of the repeats of a callable, in seconds."""

    times: tuple[float, ...]

    @property
    def median(self) -> float:
        """Median time in seconds."""
        return statistics.median(self.times)


def time_callable(
    fn: Callable[[], Any],
    *,
    repeats: int = 5,
    warmup: int = 1,
    device: str | torch.device = "cpu",
) -> Timing:
    """Time ``fn`` ``repeats`` times after ``warmup`` untimed calls.

    On a CUDA ``device`` every timed call is bracketed by ``torch.cuda.synchronize`` so the
    times include the kernels, not just their launches.

    Raises:
        ValueError: ``repeats < 1`` or ``warmup < 0``.
    """
    if repeats < 1:
        raise ValueError(f"time_callable: repeats must be >= 1, got {repeats}")
    if warmup < 0:
        raise ValueError(f"time_callable: warmup must be >= 0, got {warmup}")
    for _ in range(warmup):
        fn()
    synchronize(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return Timing(tuple(times))


def measure_copy_bandwidth(
    device: str | torch.device = "cpu", *, nbytes: int = COPY_BYTES, repeats: int = 5
) -> float:
    """Copy bandwidth of ``device`` in GB/s (1e9 bytes): ``nbytes / median time of dst.copy_(src)``.

    Both buffers are preallocated, so this is the memory system, not the allocator. See the
    module docstring for why it bounds a read-once pass.
    """
    src = torch.ones(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    timing = time_callable(lambda: dst.copy_(src), repeats=repeats, warmup=1, device=device)
    return nbytes / timing.median / 1e9


def results_equal(op: str, got: Any, expected: Any) -> bool:
    """Whether a native result matches the twin's: exact, except ``coverage_matrix``.

    ``coverage_matrix`` sums squared errors in float32 lanes where the twin uses float64, so
    it is compared to 1e-4 (absolute, on utilities in [0, 1]).
    """
    if isinstance(got, tuple):
        return all(results_equal(op, g, e) for g, e in zip(got, expected, strict=True))
    got, expected = got.cpu(), expected.cpu()
    if op == "coverage_matrix":
        return got.shape == expected.shape and torch.allclose(got, expected, rtol=0, atol=1e-4)
    return torch.equal(got, expected)


@dataclass(frozen=True)
class Case:
    """One row group of ``pyskick bench``: an op at a batch (and dtype/chunk).

    ``with_reference=False`` times the native kernel only (its result is still checked).
    """

    op: str
    batch: int
    dtype: str = "uint8"
    chunk: int | None = None
    with_reference: bool = True


def suite(ops: Iterable[str], *, quick: bool) -> list[Case]:
    """The cases ``pyskick bench`` runs for ``ops``.

    Full: SUN360 scale at B=32 and B=1024 (rotate in uint8 and float32), coverage at B=8 and
    at B=1024 in chunks of 8 (native only: its float64 twin would take minutes; the kernel's
    result on the chunk is still checked against the twin's). Quick: rotate at B=32 only, the
    loop-like ops at B=32 and B=1024 (their targets are set there and they are cheap),
    coverage at B=2.
    """
    cases: list[Case] = []
    for op in ops:
        if op == "rotate_viewgrid":
            batches = (32,) if quick else (32, 1024)
            cases += [Case(op, b, dtype=d) for b in batches for d in ROTATE_DTYPES]
        elif op in ("nms_rewards", "greedy_coverage"):
            cases += [Case(op, b) for b in (32, 1024)]
        elif op == "coverage_matrix":
            if quick:
                cases.append(Case(op, 2))
            else:
                cases.append(Case(op, 8))
                cases.append(Case(op, 1024, chunk=COVERAGE_CHUNK, with_reference=False))
        else:
            raise ValueError(f"suite: op must be one of {', '.join(BENCH_OPS)}, got {op!r}")
    return cases


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


def run_suite(
    ops: Sequence[str],
    devices: Sequence[str],
    *,
    quick: bool = False,
    repeats: int = 5,
    progress: Callable[[str], None] = lambda _message: None,
) -> list[dict[str, Any]]:
    """Time every case of :func:`suite` on every device; one row per (case, device, backend).

    Row fields: ``op``, ``scale``, ``device``, ``backend`` ("reference" or "native"),
    ``batch``, ``repeats``, ``median_s``, ``min_s`` (the fastest repeat: the least disturbed
    figure on a shared machine); ``speedup`` (reference median / this median, 1.0 for
    the reference itself, None where the twin is not timed); ``vs_native_cpu`` on CUDA native rows
    when the CPU ran too; for memory-bound ops ``gbps`` (``bytes_read`` / median),
    ``copy_gbps`` (:func:`measure_copy_bandwidth`), ``bound_s`` (rotate: median of
    ``grid.clone()``; coverage: ``bytes_read`` / copy bandwidth) and ``bound_ratio``
    (median / ``bound_s``; target <= 1.5, README.md "Benchmarks"). Native results are checked
    against the twin's on the timed inputs.

    Raises:
        ValueError: unknown op, ``repeats < 1``.
        RuntimeError: a native result differs from the twin's.
    """
    if repeats < 1:
        raise ValueError(f"run_suite: repeats must be >= 1, got {repeats}")
    cases = suite(ops, quick=quick)
    rows: list[dict[str, Any]] = []
    for device in devices:
        copy_gbps = None
        if any(case.op in ("rotate_viewgrid", "coverage_matrix") for case in cases):
            progress(f"measuring copy bandwidth on {device}")
            copy_gbps = measure_copy_bandwidth(device, repeats=repeats)
        for case in cases:
            work = build_workload(
                case.op, case.batch, device=device, dtype=case.dtype, chunk=case.chunk
            )
            rows += _time_case(work, device, repeats, copy_gbps, progress, case.with_reference)
    _add_cpu_comparison(rows)
    return rows


def _time_case(
    work: Workload,
    device: str,
    repeats: int,
    copy_gbps: float | None,
    progress: Callable[[str], None],
    with_reference: bool,
) -> list[dict[str, Any]]:
    bound_s = None
    baseline = work.baseline()
    if work.op == "rotate_viewgrid" and baseline is not None:
        progress(f"{work.op} {work.scale} on {device}: copy baseline")
        bound_s = time_callable(baseline, repeats=repeats, device=device).median
    elif work.op == "coverage_matrix" and copy_gbps:
        bound_s = work.bytes_read / (copy_gbps * 1e9)
    timings: dict[str, Timing] = {}
    results: dict[str, Any] = {}
    for backend in ("reference", "native") if with_reference else ("native",):
        progress(f"{work.op} {work.scale} on {device}: {backend}")

        def call(backend: str = backend) -> None:
            results[backend] = work.run(backend)

        timings[backend] = time_callable(call, repeats=repeats, device=device)
    expected = results["reference"] if with_reference else work.run_twin()
    if not results_equal(work.op, results["native"], expected):
        raise RuntimeError(f"{work.op} {work.scale} on {device}: native != reference")
    rows = []
    reference = timings["reference"].median if with_reference else None
    for backend, timing in timings.items():
        median = timing.median
        memory_bound = work.bytes_read > 0
        rows.append(
            {
                "op": work.op,
                "scale": work.scale,
                "device": device,
                "backend": backend,
                "batch": work.batch,
                "repeats": repeats,
                "median_s": median,
                "min_s": min(timing.times),
                "speedup": _ratio(reference, median),
                "gbps": work.bytes_read / median / 1e9 if memory_bound else None,
                "copy_gbps": copy_gbps if memory_bound else None,
                "bound_s": bound_s,
                "bound_ratio": _ratio(median, bound_s),
            }
        )
    return rows


def _add_cpu_comparison(rows: list[dict[str, Any]]) -> None:
    """Set ``vs_native_cpu`` (native CPU median / this median) on native CUDA rows."""
    cpu = {
        (r["op"], r["scale"]): r["median_s"]
        for r in rows
        if r["device"] == "cpu" and r["backend"] == "native"
    }
    for row in rows:
        on_cuda = row["device"].startswith("cuda") and row["backend"] == "native"
        row["vs_native_cpu"] = (
            _ratio(cpu.get((row["op"], row["scale"])), row["median_s"]) if on_cuda else None
        )
