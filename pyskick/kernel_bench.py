"""The benchmark table of the kernels, their seeded workloads and the timing (README.md,
"Benchmarks").

:data:`BENCHMARKS` has one row per op: how to build its inputs, the scales to time, how close
the native result must be to the twin's, and, for a memory-bound op, its memory bound. Both
``tests/benchmarks`` (pytest-benchmark) and ``pyskick bench`` (a printed table) read it, so
they time the same inputs, and ``pyskick bench --ops`` takes its names from it. The
performance targets are ratios measured in one run:

- a ``copy``-bound op (``rotate_viewgrid``) against an allocating copy of the same bytes
  (``grid.clone()``);
- a ``read``-bound op (``coverage_matrix``) against reading its input (``recon``) once at the
  measured copy bandwidth;
- every op against its vectorised PyTorch twin in :mod:`pyskick.ops._reference` (what a user
  would write instead of a kernel): the target of the loop-like ``greedy_coverage`` and
  ``nms_rewards``.

**Two timings of every row.** ``median_s`` waits for each call (:func:`time_callable`): its
latency, the host's work on the call (argument checks, the operator's dispatch, the launch)
followed by its kernels and the wait. ``queued_s`` queues the calls back to back and waits at
the end (:func:`time_queued`): what a pipeline pays per call, with the host's work hidden
behind the kernels wherever they take longer. Only where a call does not wait for the device
itself: on a GPU ``rotate_viewgrid`` does not, but ``coverage_matrix`` reads its 4-byte
finiteness flag back and ``greedy_coverage`` and ``nms_rewards`` check their inputs' values
(ranges, finiteness), so each of their calls waits and queuing hides nothing. On a GPU the
host's fixed share can dominate: on an H100 host a native call of ``rotate_viewgrid`` on 3 MB
took 0.14 ms waited for, against 0.03 ms for the copy baseline (docs/kernels.md, "On a GPU").
Both timings have their ratios to the twin and to the bound.

**Copy bandwidth** is what :func:`measure_copy_bandwidth` reports: bytes of the source buffer
divided by the time of ``dst.copy_(src)`` between two preallocated buffers larger than any
cache. Every byte is read once and written once, so a pass that only reads (``coverage_matrix``
reads ``recon`` and writes ``B * V * V`` floats) can beat this figure by up to 2x on hardware
whose reads and writes share the bandwidth: "within 1.5x of reading recon once at copy
bandwidth" is therefore a bound that a fused kernel can meet, not an optimistic one.
"""

from __future__ import annotations

import inspect
import math
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import torch
from torch import Tensor

import pyskick.ops
from pyskick.ops import _reference

COPY_BYTES = 256 * 2**20  # larger than the last-level cache of CPUs and GPUs alike
# Queued timing (time_queued) queues calls for about QUEUE_SECONDS, at least `repeats` and at
# most QUEUE_MAX of them: enough that the first call's host work, which nothing hides, is a
# small share of short calls.
QUEUE_SECONDS = 0.02
QUEUE_MAX = 100


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


class InputBuilder(Protocol):
    """Seeded CPU inputs of one op for ``batch`` samples: ``(args, kwargs)`` of the public op.

    ``variant`` is one of the row's ``variants`` (None for an op without variants).
    """

    def __call__(
        self, batch: int, *, gen: torch.Generator, shape: GridShape, variant: str | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]: ...


@dataclass(frozen=True)
class MemoryBound:
    """The memory bound of an op that moves more bytes than it computes.

    Attributes:
        kind: ``"copy"``: the op reads and writes ``input``'s bytes once, like ``clone()``; its
            bound is the measured time of ``input.clone()``. ``"read"``: the op reads ``input``
            once and writes little; its bound is ``input``'s bytes at the measured copy
            bandwidth, and its baseline benchmark is ``input.sum()``.
        input: name of the op's argument whose bytes bound it.
    """

    kind: Literal["copy", "read"]
    input: str

    def describe(self) -> str:
        """One phrase for the legend of ``pyskick bench``."""
        if self.kind == "copy":
            return f"{self.input}.clone() of the same bytes"
        return f"{self.input} bytes / copy bandwidth"


@dataclass(frozen=True)
class Scale:
    """One input size of an op's benchmark.

    Attributes:
        batch: samples per timed run.
        variant: the op's input variant (for ``rotate_viewgrid`` the dtype), or None.
        chunk: samples per op call (``batch`` must be a multiple); None processes the batch at
            once. Only one chunk is allocated and it is processed ``batch / chunk`` times.
        with_reference: False times the native kernel only (the twin would take minutes); its
            result on the chunk is still checked against the twin's.
    """

    batch: int
    variant: str | None = None
    chunk: int | None = None
    with_reference: bool = True


@dataclass(frozen=True)
class OpBenchmark:
    """One row of :data:`BENCHMARKS`: how an op is benchmarked.

    Attributes:
        inputs: builds the op's seeded inputs.
        scales: what the full suite (``pyskick bench``, ``make bench``) times.
        quick: what ``pyskick bench --quick`` times.
        atol: largest absolute difference allowed between the native result and the twin's
            (0: bit-identical).
        bound: the memory bound of a memory-bound op, else None.
        variants: the values ``Scale.variant`` may take (empty: the op has none).
    """

    inputs: InputBuilder
    scales: tuple[Scale, ...]
    quick: tuple[Scale, ...]
    atol: float = 0.0
    bound: MemoryBound | None = None
    variants: tuple[str, ...] = ()


def rotate_inputs(
    batch: int, *, gen: torch.Generator, shape: GridShape, variant: str | None
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Random viewgrids ``[B, N, M, C, H, W]`` of dtype ``variant`` and azimuth shifts ``[B]``.

    ``uint8`` grids are stored pixels, ``float32`` preprocessed ones; the shifts are any
    integers in ``[-3M, 3M)``.
    """
    size = (batch, shape.n_elevations, shape.n_azimuths, shape.channels, shape.height, shape.width)
    if variant == "uint8":
        grid = torch.randint(0, 256, size, generator=gen, dtype=torch.uint8)
    else:
        grid = torch.rand(size, generator=gen)
    shifts = torch.randint(-3 * shape.n_azimuths, 3 * shape.n_azimuths, (batch,), generator=gen)
    return (grid, shifts), {}


def nms_inputs(
    batch: int, *, gen: torch.Generator, shape: GridShape, variant: str | None
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Random one-view score maps ``[B, N, M]`` in [0, 1); the paper's k = 4 peaks, radius 1."""
    scores = torch.rand(batch, shape.n_elevations, shape.n_azimuths, generator=gen)
    return (scores, 4, 1), {}


def greedy_inputs(
    batch: int, *, gen: torch.Generator, shape: GridShape, variant: str | None
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Utilities ``[B, V, V]`` shaped like ``coverage_matrix`` output, from all V start views.

    Each target's column is min-max normalised over the sources into [0, 1], as
    ``coverage_matrix`` returns it, so the trajectories saturate the way real ones do. The
    paper's T = 4 glimpses give 3 steps.
    """
    V = shape.views
    raw = torch.rand(batch, V, V, generator=gen)
    lo, hi = raw.amin(dim=1, keepdim=True), raw.amax(dim=1, keepdim=True)
    coverage = ((raw - lo) / (hi - lo)).clamp(0.0, 1.0)
    starts = torch.arange(V).expand(batch, V).contiguous()
    kwargs = {"n_elevations": shape.n_elevations, "n_azimuths": shape.n_azimuths}
    return (coverage, starts, 3), kwargs


def coverage_inputs(
    batch: int, *, gen: torch.Generator, shape: GridShape, variant: str | None
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Reconstructions ``[B, V, N, M, C, H, W]`` near a true grid ``[B, N, M, C, H, W]``.

    Each reconstruction is the truth plus seeded noise whose level differs per start view, so
    the utilities spread over [0, 1] as with a trained model.
    """
    N, M, V = shape.n_elevations, shape.n_azimuths, shape.views
    grid = torch.rand(batch, N, M, shape.channels, shape.height, shape.width, generator=gen)
    noise_level = torch.rand(batch, V, 1, 1, 1, 1, 1, generator=gen)
    recon = grid[:, None] + noise_level * torch.randn(batch, V, *grid.shape[1:], generator=gen)
    return (recon, grid), {}


# The benchmark table: one row per op of pyskick.ops, in the order `pyskick bench` runs them;
# None for an op that is not benchmarked. Scales are SUN360 grids at the paper's batch sizes.
BENCHMARKS: dict[str, OpBenchmark | None] = {
    "rotate_viewgrid": OpBenchmark(
        inputs=rotate_inputs,
        scales=tuple(Scale(b, variant=d) for b in (32, 1024) for d in ("uint8", "float32")),
        quick=(Scale(32, variant="uint8"), Scale(32, variant="float32")),
        bound=MemoryBound("copy", "grid"),
        variants=("uint8", "float32"),
    ),
    "nms_rewards": OpBenchmark(
        inputs=nms_inputs,
        # Loop-like ops are cheap and their targets are set at B=1024: quick times it too.
        scales=(Scale(32), Scale(1024)),
        quick=(Scale(32), Scale(1024)),
    ),
    "greedy_coverage": OpBenchmark(
        inputs=greedy_inputs,
        scales=(Scale(32), Scale(1024)),
        quick=(Scale(32), Scale(1024)),
    ),
    "coverage_matrix": OpBenchmark(
        inputs=coverage_inputs,
        # B=1024 reads 12.9 GB of recon: chunks of 8, native only (the float64 twin would take
        # minutes; the kernel's result on the chunk is still checked against the twin's).
        scales=(Scale(8), Scale(1024, chunk=8, with_reference=False)),
        quick=(Scale(2),),
        # The kernel sums squared errors in float32 lanes where the twin uses float64.
        atol=1e-4,
        bound=MemoryBound("read", "recon"),
    ),
    # Data generation (`pyskick data make`), outside the performance targets of README.md,
    # "Benchmarks".
    "render_mesh_views": None,
}

# The ops `pyskick bench` can time; all of them by default.
BENCH_OPS = tuple(op for op, row in BENCHMARKS.items() if row is not None)


def benchmark_of(op: str) -> OpBenchmark:
    """The table row of ``op``.

    Raises:
        ValueError: ``op`` has no row (unknown or not benchmarked).
    """
    row = BENCHMARKS.get(op)
    if row is None:
        raise ValueError(f"benchmark: op must be one of {', '.join(BENCH_OPS)}, got {op!r}")
    return row


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
        bound: the op's memory bound (see :class:`MemoryBound`), or None.
    """

    op: str
    scale: str
    batch: int
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    chunks: int = 1
    bound: MemoryBound | None = None

    @property
    def device(self) -> torch.device:
        """Device of the input tensors."""
        return self.args[0].device

    @property
    def bound_input(self) -> Tensor | None:
        """The input named by the memory bound (one chunk), or None without a bound."""
        if self.bound is None:
            return None
        signature = inspect.signature(getattr(pyskick.ops, self.op))
        return signature.bind(*self.args, **self.kwargs).arguments[self.bound.input]

    @property
    def bytes_read(self) -> int:
        """Bytes of the bound input over all chunks: what a memory-bound op must read per
        :meth:`run`; 0 without a bound."""
        tensor = self.bound_input
        return 0 if tensor is None else tensor.numel() * tensor.element_size() * self.chunks

    def run(self, backend: str) -> Any:
        """Run the public op with ``backend`` ("reference" or "native"); the last chunk's result."""
        fn = getattr(pyskick.ops, self.op)
        result = None
        for _ in range(self.chunks):
            result = fn(*self.args, **self.kwargs, backend=backend)
        return result

    def run_twin(self) -> Any:
        """Run the pure-PyTorch twin directly (no validation): the reference for equality checks."""
        return getattr(_reference, self.op)(*self.args, **self.kwargs)

    def baseline(self) -> Callable[[], Tensor] | None:
        """The memory-bound baseline on the same bytes, per chunk, or None without a bound.

        ``copy``: ``input.clone()`` (the last copy is returned). ``read``: ``input.sum()``
        (the total over the chunks is returned).
        """
        tensor = self.bound_input
        if self.bound is None or tensor is None:
            return None
        if self.bound.kind == "copy":

            def copy() -> Tensor:
                for _ in range(self.chunks - 1):
                    tensor.clone()
                return tensor.clone()

            return copy

        def read_once() -> Tensor:
            total = tensor.new_zeros(())
            for _ in range(self.chunks):
                total = total + tensor.sum()
            return total

        return read_once


def build_workload(
    op: str,
    batch: int,
    *,
    variant: str | None = None,
    chunk: int | None = None,
    device: str | torch.device = "cpu",
    shape: GridShape = SUN360,
    seed: int = 0,
) -> Workload:
    """The seeded workload of ``op`` at batch ``batch`` (see :data:`BENCHMARKS`).

    Inputs are drawn on the CPU and moved, so a seed gives the same data on every device.

    Args:
        op: an op of :data:`BENCH_OPS`.
        batch: samples per :meth:`Workload.run`.
        variant: one of the row's ``variants`` (required when it has some).
        chunk: samples per op call (``batch`` must be a multiple); None: all at once.
        device: where the tensors live.
        shape: grid dimensions.
        seed: seed of the inputs.

    Raises:
        ValueError: unknown op, bad variant or chunk.
    """
    row = benchmark_of(op)
    if row.variants and variant not in row.variants:
        raise ValueError(
            f"build_workload: {op} variant must be one of {', '.join(row.variants)}, "
            f"got {variant!r}"
        )
    if not row.variants and variant is not None:
        raise ValueError(f"build_workload: {op} has no variants, got {variant!r}")
    chunk = batch if chunk is None else chunk
    if chunk < 1 or batch % chunk:
        raise ValueError(f"build_workload: batch {batch} is not a multiple of chunk {chunk}")
    gen = torch.Generator().manual_seed(seed)
    args, kwargs = row.inputs(chunk, gen=gen, shape=shape, variant=variant)
    args = tuple(a.to(device) if isinstance(a, Tensor) else a for a in args)
    chunks = batch // chunk
    name = "sun360" if shape == SUN360 else f"{shape.n_elevations}x{shape.n_azimuths}"
    extras = [variant] if variant else []
    extras += [f"chunks of {chunk}"] if chunks > 1 else []
    return Workload(
        op=op,
        scale=" ".join([name, f"B={batch}", *extras]),
        batch=batch,
        args=args,
        kwargs=kwargs,
        chunks=chunks,
        bound=row.bound,
    )


def results_equal(op: str, got: Any, expected: Any) -> bool:
    """Whether a native result matches the twin's within the row's ``atol`` (0: exactly)."""
    if isinstance(got, tuple):
        return all(results_equal(op, g, e) for g, e in zip(got, expected, strict=True))
    got, expected = got.cpu(), expected.cpu()
    atol = benchmark_of(op).atol
    if atol == 0:
        return torch.equal(got, expected)
    return got.shape == expected.shape and torch.allclose(got, expected, rtol=0, atol=atol)


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


def time_queued(
    fn: Callable[[], Any], *, calls: int = 5, device: str | torch.device = "cpu"
) -> float:
    """Seconds per call of ``fn`` called ``calls`` times back to back and waited for once.

    Where :func:`time_callable` waits for every call (its latency: the host's work on the call,
    then the kernels, one after the other), this is what a pipeline pays per call. On a GPU the
    host prepares the next call while the kernels of the last one run, so a call whose kernels
    take longer than its host work costs its kernels alone; a call that waits for the device
    itself (reading a flag back) gains nothing. On the CPU the two agree. Call it after a
    warm-up (:func:`time_callable` does one).

    Raises:
        ValueError: ``calls < 1``.
    """
    if calls < 1:
        raise ValueError(f"time_queued: calls must be >= 1, got {calls}")
    synchronize(device)
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    synchronize(device)
    return (time.perf_counter() - start) / calls


def queue_length(median_s: float, repeats: int) -> int:
    """How many calls :func:`time_queued` queues for a callable whose waited median is
    ``median_s``: about :data:`QUEUE_SECONDS` worth, at least ``repeats``, at most
    :data:`QUEUE_MAX`."""
    fit = math.ceil(QUEUE_SECONDS / median_s) if median_s > 0 else QUEUE_MAX
    return max(repeats, min(QUEUE_MAX, fit))


def measure_copy_bandwidth(
    device: str | torch.device = "cpu", *, nbytes: int = COPY_BYTES, repeats: int = 5
) -> float:
    """Copy bandwidth of ``device`` in GB/s (1e9 bytes): ``nbytes`` / the time of one
    ``dst.copy_(src)`` when ``repeats`` of them are queued back to back (:func:`time_queued`).

    Both buffers are preallocated and the copies are waited for once, so this is the memory
    system, not the allocator or the wait. See the module docstring for why it bounds a
    read-once pass.
    """
    src = torch.ones(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    time_callable(lambda: dst.copy_(src), repeats=1, warmup=1, device=device)
    return nbytes / time_queued(lambda: dst.copy_(src), calls=repeats, device=device) / 1e9


@dataclass(frozen=True)
class Case:
    """One row group of ``pyskick bench``: an op at one of its scales."""

    op: str
    scale: Scale


def suite(ops: Iterable[str], *, quick: bool) -> list[Case]:
    """The cases ``pyskick bench`` runs for ``ops``: each row's ``quick`` or full ``scales``.

    Raises:
        ValueError: an op without a row.
    """
    cases: list[Case] = []
    for op in ops:
        row = benchmark_of(op)
        cases += [Case(op, scale) for scale in (row.quick if quick else row.scales)]
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
    ``copy_gbps`` (:func:`measure_copy_bandwidth`), ``bound_s`` (``copy``: median of
    ``input.clone()``; ``read``: ``bytes_read`` / copy bandwidth) and ``bound_ratio``
    (median / ``bound_s``; target <= 1.5, README.md "Benchmarks"). ``queued_s`` is the
    seconds per call with ``queued_calls`` calls (:func:`queue_length`) queued back to back
    and waited for at the end (:func:`time_queued`: what a pipeline pays, the host's per-call
    work hidden behind the kernels where they take longer), with ``queued_speedup`` and
    ``queued_bound_ratio`` its ratios to the twin and to ``queued_bound_s`` (the copy baseline
    queued the same way; a read bound is ``bound_s``). Native results are checked against the
    twin's on the timed inputs.

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
        if any(benchmark_of(case.op).bound is not None for case in cases):
            progress(f"measuring copy bandwidth on {device}")
            copy_gbps = measure_copy_bandwidth(device, repeats=repeats)
        for case in cases:
            scale = case.scale
            work = build_workload(
                case.op, scale.batch, variant=scale.variant, chunk=scale.chunk, device=device
            )
            rows += _time_case(work, device, repeats, copy_gbps, progress, scale.with_reference)
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
    bound_s = queued_bound_s = None
    copy = work.baseline() if work.bound is not None and work.bound.kind == "copy" else None
    if copy is not None:
        progress(f"{work.op} {work.scale} on {device}: copy baseline")
        bound_s = time_callable(copy, repeats=repeats, device=device).median
        calls = queue_length(bound_s, repeats)
        queued_bound_s = time_queued(copy, calls=calls, device=device)
    elif work.bound is not None and copy_gbps:  # a "read" bound
        bound_s = queued_bound_s = work.bytes_read / (copy_gbps * 1e9)
    timings: dict[str, Timing] = {}
    queued: dict[str, tuple[float, int]] = {}  # backend -> (seconds per call, calls queued)
    results: dict[str, Any] = {}
    for backend in ("reference", "native") if with_reference else ("native",):
        progress(f"{work.op} {work.scale} on {device}: {backend}")

        def call(backend: str = backend) -> None:
            results[backend] = work.run(backend)

        timings[backend] = time_callable(call, repeats=repeats, device=device)
        calls = queue_length(timings[backend].median, repeats)
        queued[backend] = (time_queued(call, calls=calls, device=device), calls)
    expected = results["reference"] if with_reference else work.run_twin()
    if not results_equal(work.op, results["native"], expected):
        raise RuntimeError(f"{work.op} {work.scale} on {device}: native != reference")
    rows = []
    reference = timings["reference"].median if with_reference else None
    queued_reference = queued["reference"][0] if with_reference else None
    memory_bound = work.bound is not None
    for backend, timing in timings.items():
        median = timing.median
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
                "queued_s": queued[backend][0],
                "queued_calls": queued[backend][1],
                "queued_speedup": _ratio(queued_reference, queued[backend][0]),
                "queued_bound_s": queued_bound_s,
                "queued_bound_ratio": _ratio(queued[backend][0], queued_bound_s),
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
