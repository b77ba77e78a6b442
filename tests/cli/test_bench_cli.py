"""``pyskick bench``: JSON rows, the table, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import click
import pytest
import torch

import pyskick.training.pack as pack_module
from pyskick.kernel_bench import BENCH_OPS
from pyskick.ops import has_cuda, has_native
from pyskick_cli.commands.bench import bench
from pyskick_cli.main import main

needs_native = pytest.mark.skipif(not has_native(), reason="pyskick._C is not built")


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run ``pyskick bench ARGS`` in-process through the real entry point."""
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", *args])
    out, err = capsys.readouterr()
    return int(exit_info.value.code), out, err


@needs_native
def test_quick_json_rows(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "--quick", "--ops", "nms_rewards", "--json", "--device", "cpu")
    assert code == 0, err
    rows = json.loads(out)  # stdout is the JSON alone: progress went to stderr
    assert "bench: nms_rewards" in err
    assert {(r["scale"], r["backend"]) for r in rows} == {
        (f"sun360 B={b}", backend) for b in (32, 1024) for backend in ("reference", "native")
    }
    for row in rows:
        assert row["op"] == "nms_rewards"
        assert row["device"] == "cpu"
        assert row["repeats"] == 5
        assert row["batch"] == int(row["scale"].split("=")[1])
        assert 0 < row["min_s"] <= row["median_s"]
        assert isinstance(row["speedup"], float)
        assert math.isfinite(row["speedup"])
        assert row["speedup"] > 0
        if row["backend"] == "reference":
            assert row["speedup"] == 1.0
        # Loop-like op: no memory bound.
        assert row["gbps"] is None
        assert row["bound_ratio"] is None
        assert row["vs_native_cpu"] is None


@needs_native
def test_memory_bound_rows_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(
        capsys, "--quick", "--ops", "coverage_matrix", "--repeats", "1", "--device", "cpu"
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == [
        "op",
        "scale",
        "device",
        "backend",
        "median",
        "min",
        "queued",
        "vs",
        "reference",
        "GB/s",
        "vs",
        "bound",
        "queued",
        "vs",
        "bound",
    ]
    body = [line.split() for line in lines[2:] if line.startswith("coverage_matrix")]
    assert [cells[4] for cells in body] == ["reference", "native"]
    assert any(line.startswith("copy bandwidth on cpu: ") for line in lines)

    code, out, _ = _run(capsys, "--quick", "--ops", "coverage_matrix", "--repeats", "1", "--json")
    assert code == 0
    for row in json.loads(out):
        assert row["gbps"] > 0
        assert row["copy_gbps"] > 0
        assert row["bound_s"] == pytest.approx(
            row["batch"] * 32 * 32 * 3072 * 4 / row["copy_gbps"] / 1e9
        )
        assert row["bound_ratio"] == pytest.approx(row["median_s"] / row["bound_s"])
        # A read bound is computed, not timed: the queued ratio divides by the same bound.
        assert row["queued_bound_s"] == row["bound_s"]
        assert row["queued_bound_ratio"] == pytest.approx(row["queued_s"] / row["bound_s"])


_CUDA_READY = torch.cuda.is_available() and has_cuda()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ops", "nms_rewards,warp"], "'--ops': got 'nms_rewards,warp' (unknown op 'warp')"),
        (["--ops", ","], "'--ops': got ','; expected a comma-separated list of rotate_viewgrid"),
        (["--repeats", "0"], "'--repeats': 0 is not in the range 1<=x<=10000"),
        (["--device", "tpu"], "'--device': 'tpu' is not one of 'cpu', 'cuda', 'all'"),
        pytest.param(
            ["--device", "cuda"],
            "bench: --device cuda, but",
            marks=pytest.mark.skipif(_CUDA_READY, reason="a GPU with CUDA kernels is present"),
        ),
    ],
)
def test_bad_values_exit_2(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, out, err = _run(capsys, "--quick", *args)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("Error: ")
    assert message in err


@pytest.mark.parametrize(
    ("option", "bound"),
    [
        ("--steps", "1<=x<=10000"),
        ("--validation-grids", "0<=x<=1000000"),
        ("--view-size", "16<=x<=1024"),
    ],
)
def test_a_huge_training_count_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], option: str, bound: str
) -> None:
    # Not an overflow inside torch (exit 1 with C++ frames in its line).
    code, out, err = _run(capsys, "--training", "--device", "cpu", option, "9" * 23)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert f"'{option}': {'9' * 23} is not in the range {bound}" in err


def test_ops_default_lists_every_op() -> None:
    ops_option = next(p for p in bench.params if p.name == "ops")
    with click.Context(bench) as ctx:
        assert ops_option.get_default(ctx) == BENCH_OPS
    assert ops_option.type.convert("nms_rewards, rotate_viewgrid,nms_rewards", None, None) == (
        "nms_rewards",
        "rotate_viewgrid",
    )


def test_training_bench_times_a_run_alone_and_a_pack(capsys: pytest.CaptureFixture[str]) -> None:
    torch.set_num_threads(1)
    code, out, err = _run(
        capsys, "--training", "--runs", "1,2", "--steps", "1", "--device", "cpu", "--json"
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["environment"]["torch"] == torch.__version__
    rows = report["rows"]
    assert [(r["runs"], r["precision"], r["data"]) for r in rows] == [
        (1, "fp32", "device"),
        (2, "fp32", "device"),
    ]
    assert rows[0]["speedup"] == 1.0
    for row in rows:
        assert row["episodes_per_s"] > 0
        assert row["episodes_per_s"] == pytest.approx(row["runs"] * 32 / row["step_seconds"])
        assert row["epoch_seconds_per_run"] == pytest.approx(
            6000 / 32 * row["step_seconds"] / row["runs"]
        )
    assert "2 runs:" in err  # one progress line per variant
    # The floating-point work: counted per step, a pack's twice a run alone's (its LSTM, written
    # with bmm, counts; a run alone's fused oneDNN LSTM does not: under 2 % here).
    solo, pack = (row["gflop_per_step"] for row in rows)
    assert 2 * solo <= pack <= 2 * solo * 1.02
    for row in rows:
        rate = row["gflop_per_step"] / row["step_seconds"] / 1e3
        assert row["tflop_per_s"] == pytest.approx(rate)
        assert row["matmul_share"] == pytest.approx(row["tflop_per_s"] / row["matmul_tflop_per_s"])
    assert rows[0]["matmul_tflop_per_s"] == rows[1]["matmul_tflop_per_s"] > 0  # measured once
    assert [row["matmul_size"] for row in rows] == [2048, 2048]
    assert [r["view_size"] for r in rows] == [32, 32]  # the preset's data: SUN360's views
    # The demo's 16-pixel views: a smaller model, so the same step is cheaper.
    code, out, err = _run(
        capsys, "--training", "--runs", "1", "--steps", "1", "--device", "cpu", "--view-size", "16"
    )
    assert code == 0, err
    assert "cpu-demo on cpu, 16-pixel views, batch 32 per run, T = 4" in out
    assert "FLOP rate over that of a square matrix product of side 2048" in out
    assert re.search(r"in the same precision \(fp32 \d+ GFLOP/s\)", out)
    code, _, err = _run(capsys, "--training", "--view-size", "20")
    assert code == 2
    assert "20 is not a multiple of 8" in err
    code, out, err = _run(capsys, "--training", "--runs", "0")
    assert code == 2
    assert "give positive integers" in err
    code, _, err = _run(capsys, "--training", "--precision", "fp16")
    assert code == 2
    assert "fp32, bf16" in err
    code, _, err = _run(capsys, "--training", "--layout", "nhwc")
    assert code == 2
    assert "contiguous, channels-last" in err


def test_training_bench_times_the_convolutions_channels_last(
    capsys: pytest.CaptureFixture[str],
) -> None:
    torch.set_num_threads(1)
    args = ("--training", "--runs", "1,2", "--steps", "1", "--device", "cpu", "--view-size", "16")
    code, out, err = _run(capsys, *args, "--layout", "contiguous,channels-last", "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [(r["runs"], r["layout"]) for r in rows] == [
        (1, "contiguous"),
        (2, "contiguous"),
        (1, "channels-last"),
        (2, "channels-last"),
    ]
    # Each pack against the run alone of its own layout.
    assert rows[3]["speedup"] == pytest.approx(
        rows[3]["episodes_per_s"] / rows[2]["episodes_per_s"]
    )
    assert "fp32, channels-last data on device, 2 runs:" in err
    # The same arithmetic in either layout.
    assert [r["gflop_per_step"] for r in rows[2:]] == [r["gflop_per_step"] for r in rows[:2]]


def test_training_bench_times_the_glimpses_decoded_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    torch.set_num_threads(1)
    args = ("--training", "--runs", "1,2", "--steps", "1", "--device", "cpu", "--view-size", "16")
    code, out, err = _run(capsys, *args, "--decode", "per-glimpse,once", "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [(r["runs"], r["decode"]) for r in rows] == [
        (1, "per-glimpse"),
        (2, "per-glimpse"),
        (1, "once"),
        (2, "once"),
    ]
    assert rows[3]["speedup"] == pytest.approx(
        rows[3]["episodes_per_s"] / rows[2]["episodes_per_s"]
    )
    assert "fp32, decoding once data on device, 2 runs:" in err
    # The same products and convolutions, in larger batches.
    assert [r["gflop_per_step"] for r in rows[2:]] == [r["gflop_per_step"] for r in rows[:2]]
    code, _, err = _run(capsys, "--training", "--decode", "late")
    assert code == 2
    assert "per-glimpse, once" in err


def test_training_bench_times_each_way_of_computing_a_packs_convolutions(
    capsys: pytest.CaptureFixture[str],
) -> None:
    torch.set_num_threads(1)
    args = ("--training", "--runs", "1,2", "--steps", "1", "--device", "cpu", "--view-size", "16")
    code, out, err = _run(capsys, *args, "--packed-convs", "grouped,per-run", "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [(r["runs"], r["convs"]) for r in rows] == [
        (1, "grouped"),
        (2, "grouped"),
        (1, "per-run"),
        (2, "per-run"),
    ]
    assert "fp32, packed convolutions per-run data on device, 2 runs:" in err
    # The same convolutions, in one call or R.
    assert [r["gflop_per_step"] for r in rows[2:]] == [r["gflop_per_step"] for r in rows[:2]]
    code, _, err = _run(capsys, "--training", "--packed-convs", "fused")
    assert code == 2
    assert "auto, grouped, per-run" in err


def test_training_bench_times_validation_at_once_and_one_by_one(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    torch.set_num_threads(1)
    packed_calls: list[int] = []
    at_once = pack_module.evaluate_pack

    def counted(policy: Any, *args: Any, **kwargs: Any) -> Any:
        packed_calls.append(policy.runs)
        return at_once(policy, *args, **kwargs)

    monkeypatch.setattr(pack_module, "evaluate_pack", counted)
    base = ("--training", "--steps", "1", "--device", "cpu", "--view-size", "16")
    code, out, err = _run(capsys, *base, "--runs", "1,2,9", "--validation-grids", "6", "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [r["validation_grids"] for r in rows] == [6, 6, 6]
    assert [r["validation_batch"] for r in rows] == [64, 64, 64]  # cpu-demo's eval batch
    assert packed_calls == [2, 2, 2, 2]  # the pack of 2 at once (one untimed call), not of 9
    alone, two, nine = rows
    assert alone["validation_seconds_packed"] is None  # a run alone has no pack
    # cpu-demo validates 64 episodes a pass: 8 starts of 2 runs fit, of 9 runs (72) do not.
    assert two["validation_seconds_packed"] > 0
    assert nine["validation_seconds_packed"] is None
    assert all(r["validation_seconds_one_by_one"] > 0 for r in rows)
    # The packed pass repeats the runs alone (bit for bit here: the CPU's convolutions run
    # run by run); none where nothing was packed.
    assert two["validation_max_rel_diff"] is not None
    assert 0 <= two["validation_max_rel_diff"] < 1e-5
    assert alone["validation_max_rel_diff"] is None
    assert nine["validation_max_rel_diff"] is None
    assert "validation of 6 grids: " in err
    assert " ms at once, " in err
    code, out, err = _run(capsys, *base, "--runs", "1", "--validation-grids", "4")
    assert code == 0, err
    table = out.splitlines()
    assert table[0].endswith("val at once  val one by one  val rel diff")
    assert re.search(r"\s-\s+\d+\.\d+ (s|ms|us)\s+-$", table[2]), table[2]
    # Untimed by default, and no columns for it.
    code, out, err = _run(capsys, *base, "--runs", "1", "--json")
    assert json.loads(out)["rows"][0]["validation_seconds_one_by_one"] is None
    code, out, err = _run(capsys, *base, "--runs", "1")
    assert code == 0, err
    assert "val at once" not in out
    code, _, err = _run(capsys, "--quick", "--validation-grids", "4")
    assert code == 2
    assert "--validation-grids is an option of --training" in err


def test_training_bench_times_cudnns_autotuner_and_restores_the_setting(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyskick.training.bench as module

    torch.set_num_threads(1)
    seen: list[object] = []
    timed = module._time_steps

    def spy(config: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append((config.cudnn_benchmark, torch.backends.cudnn.benchmark))
        result = timed(config, *args, **kwargs)
        seen.append(torch.backends.cudnn.benchmark)  # the trainer's setting, during the steps
        return result

    monkeypatch.setattr(module, "_time_steps", spy)
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", False)
    args = ("--training", "--runs", "1,2", "--steps", "1", "--device", "cpu", "--view-size", "16")
    code, out, err = _run(capsys, *args, "--cudnn", "benchmark", "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [(r["runs"], r["cudnn"]) for r in rows] == [(1, "benchmark"), (2, "benchmark")]
    # Each variant ran autotuned (the trainer left it on), and the process's setting was put
    # back after each.
    assert seen == [(True, True), True, (True, True), True]
    assert torch.backends.cudnn.benchmark is False
    assert "fp32, cuDNN autotuned data on device, 2 runs:" in err
    seen.clear()
    alone = ("--training", "--runs", "1", "--steps", "1", "--device", "cpu", "--view-size", "16")
    code, out, err = _run(capsys, *alone, "--json")
    assert code == 0, err
    assert json.loads(out)["rows"][0]["cudnn"] == "heuristic"  # the default
    assert seen == [(False, False), False]
    # One way per call: a process keeps what cuDNN picked for a shape, however it picked it.
    code, _, err = _run(capsys, "--training", "--cudnn", "heuristic,benchmark")
    assert code == 2
    assert "'heuristic,benchmark' is not one of 'heuristic', 'benchmark'" in err


@pytest.mark.filterwarnings(  # dynamo hides it through warnings.showwarning, not a filter
    "ignore:The .grad attribute of a Tensor that is not a leaf Tensor:UserWarning"
)
def test_training_bench_times_the_networks_compiled(capsys: pytest.CaptureFixture[str]) -> None:
    torch.set_num_threads(1)
    torch._dynamo.reset()  # compiled from nothing, whatever this process compiled before
    args = ("--training", "--runs", "1", "--steps", "1", "--device", "cpu", "--view-size", "16")
    try:
        code, out, err = _run(capsys, *args, "--mode", "eager,compiled", "--json")
    finally:
        torch._dynamo.reset()
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [(r["runs"], r["step"]) for r in rows] == [(1, "eager"), (1, "compiled")]
    assert "fp32, compiled data on device, 1 run:" in err
    # The work is counted on an eager step of the compiled variant too (a compiled kernel
    # dispatches nothing the counter sees): the same count.
    assert rows[1]["gflop_per_step"] == rows[0]["gflop_per_step"]
    for mode in ("graph", "compiled-graph"):  # a CUDA graph needs CUDA
        code, out, err = _run(capsys, "--training", "--device", "cpu", "--mode", mode)
        assert code == 2
        assert "a CUDA graph needs a CUDA device, not cpu" in err
    code, _, err = _run(capsys, "--training", "--mode", "jit")
    assert code == 2
    assert "eager, graph, compiled, compiled-graph" in err


def test_the_cli_offers_every_bench_mode_and_decode() -> None:
    from pyskick.training.bench import CONVS, CUDNN, DECODES, MODES

    mode_option = next(p for p in bench.params if p.name == "modes")
    assert tuple(mode_option.type.choices) == MODES
    decode_option = next(p for p in bench.params if p.name == "decodes")
    assert tuple(decode_option.type.choices) == DECODES
    cudnn_option = next(p for p in bench.params if p.name == "cudnn")
    assert tuple(cudnn_option.type.choices) == CUDNN
    convs_option = next(p for p in bench.params if p.name == "convs")
    assert tuple(convs_option.type.choices) == CONVS


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--quick", "--runs", "7"], "--runs is an option of --training"),
        (["--quick", "--precision", "bf16"], "--precision is an option of --training"),
        (
            ["--training", "--device", "cpu", "--ops", "nms_rewards"],
            "--ops is an option of the kernel benchmarks (without --training)",
        ),
        (["--training", "--device", "cpu", "--quick"], "--quick is an option of the kernel"),
    ],
)
def test_an_option_of_the_other_mode_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], args: list[str], line: str
) -> None:
    # Silently ignored before: the run timed something else than asked.
    code, out, err = _run(capsys, *args)
    assert (code, out) == (2, "")
    (only,) = err.strip().splitlines()
    assert only.startswith(f"Error: {line}")


def test_a_pack_larger_than_the_bench_builds_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = _run(capsys, "--training", "--device", "cpu", "--runs", "1,100000")
    assert code == 2
    assert "'1,100000': at most 256" in err


def test_pack_sizes_are_timed_once_each() -> None:
    runs = next(p for p in bench.params if p.name == "runs")
    assert runs.type.convert("4,1,4,,1", None, None) == (4, 1)
