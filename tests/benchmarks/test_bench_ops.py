"""pytest-benchmark suite of the kernels at SUN360 scale (README.md, "Benchmarks"), from the
benchmark table.

Every row of ``pyskick.kernel_bench.BENCHMARKS`` gives one group per op: at each of its full
scales the PyTorch twin ("reference"), the native CPU kernel and, where a GPU and the CUDA
kernels exist, the native CUDA kernel; a memory-bound op's group also holds its baseline (a
copy of the bytes for a ``copy`` bound, one read of them for a ``read`` bound), so the ratios
can be read off one run:

    pytest tests/benchmarks --benchmark-enable --benchmark-only --benchmark-autosave

With the default ``--benchmark-disable`` every benchmark runs once as a smoke test, with the
memory-bound inputs shrunk to a few samples so the whole file stays fast; native results are
always checked against the twin on the benchmarked input.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
import torch

from pyskick import kernel_bench, ops
from pyskick.kernel_bench import (
    BENCH_OPS,
    BENCHMARKS,
    MemoryBound,
    Scale,
    Workload,
    benchmark_of,
    build_workload,
    measure_copy_bandwidth,
    queue_length,
    results_equal,
    run_suite,
    suite,
    synchronize,
    time_callable,
    time_queued,
)
from pyskick.ops import has_cuda, has_native

if not has_native():
    pytest.skip("the native module pyskick._C is not built", allow_module_level=True)

CUDA = torch.cuda.is_available() and has_cuda()
BACKENDS = ["reference", "native-cpu", *(["native-cuda"] if CUDA else [])]
DEVICES = ["cpu", *(["cuda"] if CUDA else [])]
# With benchmarking disabled the memory-bound ops run on this few samples (chunks of one).
SMOKE_BATCH = 2


def scale_id(scale: Scale) -> str:
    """``sun360-B1024-uint8``, ``sun360-B1024-chunked``: the ``scale`` the tables group by."""
    parts = ["sun360", f"B{scale.batch}"]
    parts += [scale.variant] if scale.variant else []
    parts += ["chunked"] if scale.chunk else []
    return "-".join(parts)


def _marks(backend_or_device: str) -> list[pytest.MarkDecorator]:
    return [pytest.mark.cuda] if backend_or_device.endswith("cuda") else []


# Every test takes a ``scale`` parameter: the benchmark tables group by it.
OP_CASES = [
    pytest.param(
        op,
        scale_id(scale),
        scale,
        backend,
        marks=_marks(backend),
        id=f"{op}-{scale_id(scale)}-{backend}",
    )
    for op, row in BENCHMARKS.items()
    if row is not None
    for scale in row.scales
    for backend in BACKENDS
    # A scale without reference is too slow for the twin: native only.
    if scale.with_reference or backend != "reference"
]
BASELINE_CASES = [
    pytest.param(
        op,
        scale_id(scale),
        scale,
        device,
        marks=_marks(device),
        id=f"{op}-{scale_id(scale)}-{row.bound.kind}-{device}",
    )
    for op, row in BENCHMARKS.items()
    if row is not None and row.bound is not None
    for scale in row.scales
    for device in DEVICES
]


def _device(backend: str) -> str:
    return "cuda" if backend.endswith("cuda") else "cpu"


def _op_backend(backend: str) -> str:
    return "reference" if backend == "reference" else "native"


def _timed(fn: Callable[[], Any], device: str) -> Callable[[], Any]:
    """``fn`` followed by a device synchronisation, so CUDA times include the kernels."""

    def call() -> Any:
        result = fn()
        synchronize(device)
        return result

    return call


def _workload(benchmark: Any, op: str, scale: Scale, device: str) -> Workload:
    """The workload of ``op`` at ``scale``, shrunk for a memory-bound op when not timing."""
    if benchmark.disabled and benchmark_of(op).bound is not None:
        chunk = None if scale.chunk is None else 1
        scale = replace(scale, batch=min(scale.batch, SMOKE_BATCH), chunk=chunk)
    return build_workload(op, scale.batch, variant=scale.variant, chunk=scale.chunk, device=device)


def _pedantic_rounds(work: Workload) -> int | None:
    # A chunked pass reads gigabytes: a few rounds, not pytest-benchmark's calibration.
    return 3 if work.chunks > 1 else None


@pytest.mark.parametrize(("op", "scale", "case", "backend"), OP_CASES)
def test_bench_op(benchmark: Any, op: str, scale: str, case: Scale, backend: str) -> None:
    """Time ``op`` on ``backend`` and check a native result against the twin."""
    work = _workload(benchmark, op, case, _device(backend))
    benchmark.group = op
    benchmark.extra_info["scale"] = work.scale
    call = _timed(lambda: work.run(_op_backend(backend)), _device(backend))
    rounds = _pedantic_rounds(work)
    if rounds is None:
        result = benchmark(call)
    else:
        result = benchmark.pedantic(call, rounds=rounds, iterations=1)
    if backend != "reference":
        assert results_equal(op, result, work.run_twin())


@pytest.mark.parametrize(("op", "scale", "case", "device"), BASELINE_CASES)
def test_bench_memory_bound(benchmark: Any, op: str, scale: str, case: Scale, device: str) -> None:
    """Baseline: a copy (``copy`` bound) or one read (``read`` bound) of the same bytes."""
    work = _workload(benchmark, op, case, device)
    baseline = work.baseline()
    tensor = work.bound_input
    assert baseline is not None
    assert tensor is not None
    benchmark.group = op
    benchmark.extra_info["scale"] = work.scale
    call = _timed(baseline, device)
    rounds = _pedantic_rounds(work)
    result = benchmark(call) if rounds is None else benchmark.pedantic(call, rounds=rounds)
    if work.bound is not None and work.bound.kind == "copy":
        assert torch.equal(result, tensor)
        assert result.data_ptr() != tensor.data_ptr()
    else:
        expected = tensor.double().sum() * work.chunks
        assert torch.isclose(result.double().cpu(), expected.cpu(), rtol=1e-4)


# The table and the helpers shared with ``pyskick bench``.


def test_the_table_has_a_row_for_every_op() -> None:
    """A new op gets a row (None when it is not benchmarked), and the order of the rows is the
    order ``pyskick bench`` runs them in."""
    assert sorted(BENCHMARKS) == sorted(ops.OPS)
    for op in BENCH_OPS:
        row = benchmark_of(op)
        assert row.scales
        assert row.quick
        assert row.atol >= 0
        for scale in (*row.scales, *row.quick):
            assert scale.variant in (row.variants or (None,)), (op, scale)
            assert scale.chunk is None or scale.batch % scale.chunk == 0, (op, scale)
        if row.bound is not None:
            work = build_workload(op, 1, variant=row.scales[0].variant)
            assert work.bound_input is not None, f"{op}: no argument named {row.bound.input!r}"


def test_workloads_are_seeded() -> None:
    for op in BENCH_OPS:
        variant = benchmark_of(op).scales[0].variant
        a = build_workload(op, 2, variant=variant, seed=3)
        b = build_workload(op, 2, variant=variant, seed=3)
        c = build_workload(op, 2, variant=variant, seed=4)
        assert torch.equal(a.args[0], b.args[0])
        assert not torch.equal(a.args[0], c.args[0])


def test_greedy_workload_is_a_valid_coverage_matrix() -> None:
    work = build_workload("greedy_coverage", 3)
    coverage, starts, steps = work.args
    assert coverage.shape == (3, 32, 32)
    assert float(coverage.min()) == 0.0
    assert torch.equal(coverage.amax(dim=1), torch.ones(3, 32))
    assert torch.equal(starts[1], torch.arange(32))
    assert steps == 3


def test_chunked_coverage_workload_reads_every_chunk() -> None:
    work = build_workload("coverage_matrix", 4, chunk=2)
    assert work.chunks == 2
    assert work.args[0].shape == (2, 32, 4, 8, 3, 32, 32)
    assert work.bytes_read == 2 * work.args[0].numel() * 4
    assert work.scale == "sun360 B=4 chunks of 2"
    with pytest.raises(ValueError, match="not a multiple of chunk 3"):
        build_workload("coverage_matrix", 4, chunk=3)


def test_memory_bounds_name_the_bytes() -> None:
    rotate = build_workload("rotate_viewgrid", 2, variant="float32")
    assert rotate.bound == MemoryBound("copy", "grid")
    assert rotate.bound_input is rotate.args[0]
    assert rotate.bytes_read == 2 * 32 * 3072 * 4
    assert rotate.scale == "sun360 B=2 float32"
    nms = build_workload("nms_rewards", 2)
    assert nms.bound is None
    assert nms.bytes_read == 0
    assert nms.baseline() is None


def test_bad_workload_names() -> None:
    with pytest.raises(ValueError, match="op must be one of rotate_viewgrid, nms_rewards"):
        build_workload("warp", 2)
    with pytest.raises(ValueError, match="op must be one of"):
        build_workload("render_mesh_views", 2)  # in the table, not benchmarked
    with pytest.raises(ValueError, match="variant must be one of uint8, float32, got 'float16'"):
        build_workload("rotate_viewgrid", 2, variant="float16")
    with pytest.raises(ValueError, match="nms_rewards has no variants, got 'uint8'"):
        build_workload("nms_rewards", 2, variant="uint8")
    with pytest.raises(ValueError, match="op must be one of"):
        suite(["warp"], quick=True)


def test_suite_reads_the_table() -> None:
    quick = suite(["rotate_viewgrid", "coverage_matrix"], quick=True)
    assert [(c.op, c.scale) for c in quick] == [
        *[("rotate_viewgrid", s) for s in benchmark_of("rotate_viewgrid").quick],
        *[("coverage_matrix", s) for s in benchmark_of("coverage_matrix").quick],
    ]
    full = suite(["coverage_matrix"], quick=False)
    assert [c.scale for c in full] == list(benchmark_of("coverage_matrix").scales)


def test_results_equal_detects_differences() -> None:
    work = build_workload("nms_rewards", 4)
    result = work.run("native")
    assert results_equal("nms_rewards", result, work.run_twin())
    changed = result.clone()
    changed[0, 0, 0] += 1e-3
    assert not results_equal("nms_rewards", changed, result)
    # coverage_matrix: float32 accumulation is allowed its row's atol (1e-4), not more.
    assert benchmark_of("coverage_matrix").atol == 1e-4
    utilities = torch.rand(2, 4, 4)
    assert results_equal("coverage_matrix", utilities + 5e-5, utilities)
    assert not results_equal("coverage_matrix", utilities + 2e-4, utilities)


def test_time_callable_and_copy_bandwidth() -> None:
    calls = []
    timing = time_callable(lambda: calls.append(1), repeats=3, warmup=2)
    assert len(calls) == 5
    assert len(timing.times) == 3
    assert min(timing.times) <= timing.median <= max(timing.times)
    with pytest.raises(ValueError, match="repeats must be >= 1, got 0"):
        time_callable(lambda: None, repeats=0)
    with pytest.raises(ValueError, match="warmup must be >= 0"):
        time_callable(lambda: None, warmup=-1)
    assert measure_copy_bandwidth(nbytes=2**20, repeats=2) > 0


def test_time_queued_is_per_call_of_one_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    # A clock that only the calls advance: 4 calls of 0.5 s each are 0.5 s per call, with the
    # device waited for before the first call and after the last only.
    clock = [0.0]
    events: list[str] = []
    monkeypatch.setattr(kernel_bench.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(kernel_bench, "synchronize", lambda device: events.append("wait"))

    def call() -> None:
        events.append("call")
        clock[0] += 0.5

    assert time_queued(call, calls=4, device="cuda") == 0.5
    assert events == ["wait", "call", "call", "call", "call", "wait"]
    with pytest.raises(ValueError, match="calls must be >= 1, got 0"):
        time_queued(lambda: None, calls=0)


def test_queue_length_queues_about_twenty_milliseconds_within_its_limits() -> None:
    assert kernel_bench.QUEUE_SECONDS == 0.02
    assert queue_length(0.001, 5) == 20
    assert queue_length(0.0003, 5) == 67  # ceil(0.02 / 0.0003)
    assert queue_length(1.0, 5) == 5  # at least the repeats
    assert queue_length(0.001, 50) == 50
    assert queue_length(1e-6, 5) == kernel_bench.QUEUE_MAX == 100  # at most QUEUE_MAX
    assert queue_length(0.0, 3) == 100


def test_run_suite_rows() -> None:
    rows = run_suite(["rotate_viewgrid"], ["cpu"], quick=True, repeats=1)
    assert [(r["scale"], r["backend"]) for r in rows] == [
        (f"sun360 B=32 {dtype}", backend)
        for dtype in ("uint8", "float32")
        for backend in ("reference", "native")
    ]
    for row in rows:
        assert row["gbps"] == pytest.approx(
            row["batch"] * 32 * 3072 * (1 if "uint8" in row["scale"] else 4) / row["median_s"] / 1e9
        )
        assert row["bound_ratio"] == pytest.approx(row["median_s"] / row["bound_s"])
        assert row["queued_s"] > 0
        assert row["queued_calls"] == queue_length(row["median_s"], 1)
        # The copy baseline queued too: its own figure, not the waited one.
        assert row["queued_bound_s"] > 0
        assert row["queued_bound_ratio"] == pytest.approx(row["queued_s"] / row["queued_bound_s"])
        if row["backend"] == "reference":
            assert row["queued_speedup"] == 1.0
    native = {r["scale"]: r for r in rows if r["backend"] == "native"}
    reference = {r["scale"]: r for r in rows if r["backend"] == "reference"}
    for scale, row in native.items():
        assert row["queued_speedup"] == pytest.approx(
            reference[scale]["queued_s"] / row["queued_s"]
        )
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        run_suite(["nms_rewards"], ["cpu"], repeats=0)
