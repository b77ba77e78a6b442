"""pytest-benchmark suite of the kernels at SUN360 scale (README.md, "Benchmarks").

Each op's group holds the PyTorch twin ("reference"), the native CPU kernel and, where a GPU
and the CUDA kernels exist, the native CUDA kernel; the memory-bound groups also hold their
baseline (a copy of the grid for rotate_viewgrid, one read of recon for coverage_matrix), so
the ratios can be read off one run:

    pytest tests/benchmarks --benchmark-enable --benchmark-only --benchmark-autosave

With the default ``--benchmark-disable`` every benchmark runs once as a smoke test, with the
memory-bound inputs shrunk to a few samples so the whole file stays fast; native results are
always checked against the twin on the benchmarked input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from pyskick.ops import has_cuda, has_native
from pyskick.ops.benchmark import (
    COVERAGE_CHUNK,
    Workload,
    build_workload,
    measure_copy_bandwidth,
    results_equal,
    run_suite,
    suite,
    synchronize,
    time_callable,
)

if not has_native():
    pytest.skip("the native module pyskick._C is not built", allow_module_level=True)

CUDA = torch.cuda.is_available() and has_cuda()
BACKENDS = [
    "reference",
    "native-cpu",
    *([pytest.param("native-cuda", marks=pytest.mark.cuda)] if CUDA else []),
]
DEVICES = ["cpu", *([pytest.param("cuda", marks=pytest.mark.cuda)] if CUDA else [])]

# scale id -> (batch, rotate dtype or coverage chunk)
ROTATE_SCALES = {
    f"sun360-B{b}-{dtype}": (b, dtype) for b in (32, 1024) for dtype in ("uint8", "float32")
}
LOOP_SCALES = {"sun360-B32": 32, "sun360-B1024": 1024}
COVERAGE_SCALES = {"sun360-B8": (8, None), "sun360-B1024-chunked": (1024, COVERAGE_CHUNK)}
# The float64 twin would take minutes per chunked B=1024 pass: that scale times native only.
NATIVE_BACKENDS = [b for b in BACKENDS if b != "reference"]
# With benchmarking disabled the memory-bound ops run on this few samples (chunks of one).
SMOKE_BATCH = 2


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


def _bench_op(benchmark: Any, work: Workload, backend: str, *, rounds: int | None = None) -> None:
    """Benchmark ``work`` on ``backend`` and check a native result against the twin."""
    benchmark.group = work.op
    benchmark.extra_info["scale"] = work.scale
    call = _timed(lambda: work.run(_op_backend(backend)), str(work.device))
    if rounds is None:
        result = benchmark(call)
    else:
        result = benchmark.pedantic(call, rounds=rounds, iterations=1)
    if backend != "reference":
        assert results_equal(work.op, result, work.run_twin())


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("scale", list(ROTATE_SCALES))
def test_bench_rotate_viewgrid(benchmark: Any, scale: str, backend: str) -> None:
    batch, dtype = ROTATE_SCALES[scale]
    batch = min(batch, SMOKE_BATCH) if benchmark.disabled else batch
    work = build_workload("rotate_viewgrid", batch, dtype=dtype, device=_device(backend))
    _bench_op(benchmark, work, backend)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("scale", list(ROTATE_SCALES))
def test_bench_rotate_viewgrid_copy(benchmark: Any, scale: str, device: str) -> None:
    """Baseline: ``grid.clone()`` reads and writes the same bytes as the rotation."""
    batch, dtype = ROTATE_SCALES[scale]
    batch = min(batch, SMOKE_BATCH) if benchmark.disabled else batch
    work = build_workload("rotate_viewgrid", batch, dtype=dtype, device=device)
    copy = work.baseline()
    assert copy is not None
    benchmark.group = work.op
    benchmark.extra_info["scale"] = work.scale
    result = benchmark(_timed(copy, device))
    grid = work.args[0]
    assert torch.equal(result, grid)
    assert result.data_ptr() != grid.data_ptr()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("scale", list(LOOP_SCALES))
def test_bench_nms_rewards(benchmark: Any, scale: str, backend: str) -> None:
    work = build_workload("nms_rewards", LOOP_SCALES[scale], device=_device(backend))
    _bench_op(benchmark, work, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("scale", list(LOOP_SCALES))
def test_bench_greedy_coverage(benchmark: Any, scale: str, backend: str) -> None:
    work = build_workload("greedy_coverage", LOOP_SCALES[scale], device=_device(backend))
    _bench_op(benchmark, work, backend)


def _coverage_workload(benchmark: Any, scale: str, device: str) -> Workload:
    batch, chunk = COVERAGE_SCALES[scale]
    if benchmark.disabled:
        batch, chunk = SMOKE_BATCH, (None if chunk is None else 1)
    return build_workload("coverage_matrix", batch, chunk=chunk, device=device)


# Every test takes a ``scale`` parameter: the benchmark tables group by it.
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("scale", ["sun360-B8"])
def test_bench_coverage_matrix(benchmark: Any, scale: str, backend: str) -> None:
    work = _coverage_workload(benchmark, scale, _device(backend))
    _bench_op(benchmark, work, backend)


@pytest.mark.parametrize("backend", NATIVE_BACKENDS)
@pytest.mark.parametrize("scale", ["sun360-B1024-chunked"])
def test_bench_coverage_matrix_chunked(benchmark: Any, scale: str, backend: str) -> None:
    work = _coverage_workload(benchmark, scale, _device(backend))
    # It reads 12.9 GB per pass: a few rounds, not pytest-benchmark's calibration.
    _bench_op(benchmark, work, backend, rounds=3)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("scale", list(COVERAGE_SCALES))
def test_bench_coverage_matrix_read_once(benchmark: Any, scale: str, device: str) -> None:
    """Baseline: ``recon.sum()`` per chunk reads the reconstructions once."""
    work = _coverage_workload(benchmark, scale, device)
    read_once = work.baseline()
    assert read_once is not None
    benchmark.group = work.op
    benchmark.extra_info["scale"] = work.scale
    rounds = 3 if work.chunks > 1 else None
    call = _timed(read_once, device)
    total = benchmark(call) if rounds is None else benchmark.pedantic(call, rounds=rounds)
    expected = work.args[0].double().sum() * work.chunks
    assert torch.isclose(total.double().cpu(), expected.cpu(), rtol=1e-4)


# The helpers shared with ``pyskick bench``.


def test_workloads_are_seeded() -> None:
    for op in ("rotate_viewgrid", "nms_rewards", "greedy_coverage", "coverage_matrix"):
        a, b = build_workload(op, 2, seed=3), build_workload(op, 2, seed=3)
        c = build_workload(op, 2, seed=4)
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


def test_bad_workload_names() -> None:
    with pytest.raises(ValueError, match="op must be one of"):
        build_workload("warp", 2)
    with pytest.raises(ValueError, match="dtype must be uint8 or float32"):
        build_workload("rotate_viewgrid", 2, dtype="float16")
    with pytest.raises(ValueError, match="op must be one of"):
        suite(["warp"], quick=True)


def test_results_equal_detects_differences() -> None:
    work = build_workload("nms_rewards", 4)
    result = work.run("native")
    assert results_equal("nms_rewards", result, work.run_twin())
    changed = result.clone()
    changed[0, 0, 0] += 1e-3
    assert not results_equal("nms_rewards", changed, result)
    # coverage_matrix: float32 accumulation is allowed 1e-4, not more.
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
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        run_suite(["nms_rewards"], ["cpu"], repeats=0)
