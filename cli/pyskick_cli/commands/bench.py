"""``pyskick bench``: time the kernels against their baselines and print a table.

The targets are in README.md, "Benchmarks".
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from pyskick.errors import UserError
from pyskick_cli.shared_options import view_size_option

if TYPE_CHECKING:
    # Click 8.4+ types a ParamType by the value it converts to; older Clicks cannot subscript
    # the class at run time, so only the type checker sees the type arguments.
    _NamesType = click.ParamType[tuple[str, ...]]
    _IntsType = click.ParamType[tuple[int, ...]]
else:
    _NamesType = _IntsType = click.ParamType

DEVICES = ("cpu", "cuda", "all")
MAX_PACK = 256
"""The largest pack ``--training`` builds (each run of a pack holds its folder's lock file)."""
# Bounds that keep a mistyped count a usage error (exit 2) rather than an overflow inside torch.
MAX_TIMED_CALLS = 10_000
MAX_VALIDATION_GRIDS = 1_000_000


class OpList(_NamesType):
    """Comma-separated names of ops in the benchmark table (``pyskick.kernel_bench``).

    The table is read when a value is converted or bench's help is shown, never when the
    command is imported: ``pyskick --help`` imports every command and must not import torch.
    """

    name = "ops"

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str:
        from pyskick.kernel_bench import BENCH_OPS

        return f"[{'|'.join(BENCH_OPS)}],..."

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, ...]:
        from pyskick.kernel_bench import BENCH_OPS

        if isinstance(value, tuple):  # the default
            return value
        names = [name.strip() for name in str(value).split(",") if name.strip()]
        unknown = [repr(name) for name in names if name not in BENCH_OPS]
        if not names or unknown:
            got = f"got {value!r}"
            if unknown:
                got += f" (unknown op{'s' if len(unknown) > 1 else ''} {', '.join(unknown)})"
            expected = f"expected a comma-separated list of {', '.join(BENCH_OPS)}"
            self.fail(f"{got}; {expected}", param, ctx)
        return tuple(dict.fromkeys(names))  # drop duplicates, keep order


class IntList(_IntsType):
    """Comma-separated positive integers, at most :attr:`most`, each once."""

    name = "N,..."

    def __init__(self, most: int) -> None:
        self.most = most

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[int, ...]:
        if isinstance(value, tuple):
            return value
        try:
            numbers = tuple(int(x) for x in str(value).split(",") if x.strip())
        except ValueError:
            self.fail(f"{value!r} is not a comma-separated list of integers", param, ctx)
        if not numbers or min(numbers) < 1:
            self.fail(f"{value!r}: give positive integers", param, ctx)
        if max(numbers) > self.most:
            self.fail(f"{value!r}: at most {self.most}", param, ctx)
        return tuple(dict.fromkeys(numbers))  # drop duplicates, keep order, as the names do


class ChoiceList(_NamesType):
    """Comma-separated names out of a fixed set."""

    def __init__(self, choices: tuple[str, ...]) -> None:
        self.choices = choices
        self.name = f"[{'|'.join(choices)}],..."

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, ...]:
        if isinstance(value, tuple):
            return value
        names = tuple(x.strip() for x in str(value).split(",") if x.strip())
        unknown = [name for name in names if name not in self.choices]
        if not names or unknown:
            self.fail(
                f"{value!r}: expected a comma-separated list of {', '.join(self.choices)}",
                param,
                ctx,
            )
        return tuple(dict.fromkeys(names))


def _bench_training(
    device: str,
    preset: str,
    runs: tuple[int, ...],
    precisions: tuple[str, ...],
    placements: tuple[str, ...],
    modes: tuple[str, ...],
    layouts: tuple[str, ...],
    decodes: tuple[str, ...],
    convs: tuple[str, ...],
    cudnn: str,
    steps: int,
    view_size: int | None,
    validation_grids: int,
    as_json: bool,
) -> None:
    """``bench --training``: print the variants' table (or JSON with the environment)."""
    import torch

    from pyskick.training.bench import as_dicts, bench_training, environment

    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("bench: --device cuda, but no GPU is visible to torch")
    target = "cuda" if device in ("cuda", "all") and torch.cuda.is_available() else "cpu"
    rows = bench_training(
        preset=preset,
        device=target,
        runs=runs,
        precisions=precisions,
        data=placements,
        modes=modes,
        layouts=layouts,
        decodes=decodes,
        convs=convs,
        cudnn=cudnn,
        steps=steps,
        view_size=view_size,
        validation_grids=validation_grids,
        progress=lambda line: click.echo(f"bench: {line}", err=True),
    )
    if as_json:
        click.echo(json.dumps({"environment": environment(), "rows": as_dicts(rows)}, indent=2))
        return
    header: tuple[str, ...] = (
        "runs", "precision", "data", "mode", "layout", "decode", "convs", "cudnn", "step",
        "episodes/s",
        "vs alone",
        "s per run-epoch", "GFLOP/s", "of matmul",
    )  # fmt: skip
    lines = [header]
    for row in rows:
        lines.append(
            (
                str(row.runs),
                row.precision,
                row.data,
                row.step,
                row.layout,
                row.decode,
                row.convs,
                row.cudnn,
                _duration(row.step_seconds),
                f"{row.episodes_per_s:.0f}",
                _times(row.speedup),
                f"{row.epoch_seconds_per_run:.2f}",
                f"{row.tflop_per_s * 1e3:.0f}",
                f"{row.matmul_share:.2f}",
            )
        )
    if validation_grids:
        lines[0] = (*header, "val at once", "val one by one", "val rel diff")
        for i, row in enumerate(rows, start=1):
            timed = (row.validation_seconds_packed, row.validation_seconds_one_by_one)
            differs = row.validation_max_rel_diff
            lines[i] = (
                *lines[i],
                *("-" if t is None else _duration(t) for t in timed),
                "-" if differs is None else f"{differs:.1e}",
            )
        header = lines[0]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = [
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    ]
    text.insert(1, "  ".join("-" * w for w in widths))
    first = rows[0]
    matmul = {row.precision: row.matmul_tflop_per_s for row in rows}
    text.append(
        f"{preset} on {first.device}, {first.view_size}-pixel views, batch {first.batch_size} "
        f"per run, T = {first.T}; "
        "s per run-epoch: a 6,000-grid epoch (the paper's 56 s on a GTX 1080), one run's share; "
        "of matmul: the step's FLOP rate over that of a square matrix product of side "
        f"{first.matmul_size} in the same precision ("
        + ", ".join(f"{p} {rate * 1e3:.0f} GFLOP/s" for p, rate in matmul.items())
        + ")."
    )
    click.echo("\n".join(text))


def all_ops() -> tuple[str, ...]:
    """Every op of the benchmark table, in its order: the default of ``--ops``."""
    from pyskick.kernel_bench import BENCH_OPS

    return BENCH_OPS


def _resolve_devices(device: str) -> list[str]:
    """Devices to time for ``--device``; a CUDA request without GPU or kernels is bad input."""
    import torch

    from pyskick.ops import has_cuda

    cuda_ready = torch.cuda.is_available() and has_cuda()
    if device == "cuda" and not cuda_ready:
        missing = (
            "no GPU is visible to torch"
            if not torch.cuda.is_available()
            else ("pyskick was built without CUDA kernels (rebuild with PYSKICK_WITH_CUDA=ON)")
        )
        raise UserError(f"bench: --device cuda, but {missing}")
    if device == "cpu" or (device == "all" and not cuda_ready):
        return ["cpu"]
    return ["cuda"] if device == "cuda" else ["cpu", "cuda"]


def _duration(seconds: float) -> str:
    if seconds >= 1.0:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} us"


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _table(rows: list[dict[str, Any]]) -> str:
    """Fixed-width table of the rows with a legend of the memory bounds."""
    from pyskick.kernel_bench import BENCHMARKS

    header = (
        "op",
        "scale",
        "device",
        "backend",
        "median",
        "min",
        "queued",
        "vs reference",
        "GB/s",
        "vs bound",
        "queued vs bound",
    )
    lines = [header]
    for row in rows:
        lines.append(
            (
                row["op"],
                row["scale"],
                row["device"],
                row["backend"],
                _duration(row["median_s"]),
                _duration(row["min_s"]),
                _duration(row["queued_s"]),
                _times(row["speedup"]),
                "-" if row["gbps"] is None else f"{row['gbps']:.1f}",
                _times(row["bound_ratio"]),
                _times(row["queued_bound_ratio"]),
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = [
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in lines
    ]
    text.insert(1, "  ".join("-" * w for w in widths))
    bandwidths = {row["device"]: row["copy_gbps"] for row in rows if row["copy_gbps"]}
    for device, gbps in bandwidths.items():
        text.append(f"copy bandwidth on {device}: {gbps:.1f} GB/s (dst.copy_(src), 256 MiB)")
    text.append(
        "median, min: each call waited for; queued: per call, calls queued back to back and "
        "waited for at the end (a call that reads a value back still waits)."
    )
    text.append("vs reference: median of the PyTorch twin / this median.")
    benchmarks = {row["op"]: BENCHMARKS[row["op"]] for row in rows}
    bounds = {op: row.bound for op, row in benchmarks.items() if row is not None and row.bound}
    if bounds:
        text.append("vs bound: this median / the memory bound (queued vs bound: both queued):")
        text += [f"  {op}: {bound.describe()}." for op, bound in bounds.items()]
        inputs = ", ".join(f"{bound.input} ({op})" for op, bound in bounds.items())
        text.append(f"GB/s: bytes of {inputs} / median.")
    return "\n".join(text)


# Options of one mode only (parameter names): given in the other, a usage error.
_KERNEL_ONLY = ("quick", "ops", "repeats")
_TRAINING_ONLY = (
    "preset", "runs", "precisions", "placements", "modes", "layouts", "decodes", "convs", "cudnn",
    "steps", "view_size", "validation_grids",
)  # fmt: skip


def _check_mode_options(training: bool) -> None:
    """Refuse options given on the command line that the chosen mode would ignore."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    other = _KERNEL_ONLY if training else _TRAINING_ONLY
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name or "")
        if param.name in other and source not in (None, ParameterSource.DEFAULT):
            mode = "the kernel benchmarks (without --training)" if training else "--training"
            raise click.UsageError(f"{param.opts[0]} is an option of {mode}")


@click.command()
@click.option(
    "--quick",
    is_flag=True,
    help="Small suite for smoke runs (< 30 s on 2 cores): each op's quick scales.",
)
@click.option(
    "--device",
    type=click.Choice(DEVICES),
    default="all",
    show_default=True,
    help="Where to time: all = the CPU, plus CUDA when a GPU and the CUDA kernels are present.",
)
@click.option(
    "--ops",
    type=OpList(),
    default=all_ops,
    show_default="all",
    help="Comma-separated ops to time, from the benchmark table (pyskick/kernel_bench.py).",
)
@click.option(
    "--repeats",
    type=click.IntRange(min=1, max=MAX_TIMED_CALLS),
    default=5,
    show_default=True,
    help="Timed calls per backend after one warm-up call, each waited for (the median is "
    "reported); the queued timing then queues at least this many.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list of rows instead.")
@click.option(
    "--training",
    is_flag=True,
    help="Time training steps instead of the kernels: a run alone against packs of runs, "
    "per precision and data placement, with each step's FLOP rate against the device's "
    "matrix-product rate (docs/training.md, 'Measuring training speed').",
)
@click.option(
    "--preset",
    type=click.Choice(["cpu-demo", "paper-sun360", "paper-modelnet"]),
    default="cpu-demo",
    show_default=True,
    help="--training: the model, batch size and T.",
)
@click.option(
    "--runs",
    type=IntList(most=MAX_PACK),
    default="1,4",
    show_default=True,
    help=f"--training: comma-separated pack sizes (1: a run alone), at most {MAX_PACK}.",
)
@click.option(
    "--precision",
    "precisions",
    type=ChoiceList(("fp32", "bf16")),
    default="fp32",
    show_default=True,
    help="--training: comma-separated precisions (fp32, bf16).",
)
@click.option(
    "--data",
    "placements",
    type=ChoiceList(("device", "host")),
    default="device",
    show_default=True,
    help="--training: comma-separated data placements (device, host; the same on the CPU).",
)
@click.option(
    "--mode",
    "modes",
    type=ChoiceList(("eager", "graph", "compiled", "compiled-graph")),  # bench.MODES
    default="eager",
    show_default=True,
    help="--training: comma-separated step modes: eager, graph (replayed as a CUDA graph; CUDA "
    "only), compiled (the networks compiled by torch.compile; compiling in the untimed steps), "
    "compiled-graph (both).",
)
@click.option(
    "--layout",
    "layouts",
    type=ChoiceList(("contiguous", "channels-last")),
    default="contiguous",
    show_default=True,
    help="--training: comma-separated memory formats of the convolutions: contiguous (NCHW), "
    "channels-last (NHWC).",
)
@click.option(
    "--decode",
    "decodes",
    type=ChoiceList(("per-glimpse", "once")),  # bench.DECODES
    default="per-glimpse",
    show_default=True,
    help="--training: comma-separated decodings of an episode's glimpses: per-glimpse (one "
    "batch each), once (one batch of all at the last; --decode-once).",
)
@click.option(
    "--packed-convs",
    "convs",
    type=ChoiceList(("auto", "grouped", "per-run")),  # bench.CONVS
    default="auto",
    show_default=True,
    help="--training: comma-separated ways a pack computes its convolutions: auto (run by run "
    "on the CPU, grouped on a GPU), grouped (one grouped call per layer), per-run (one call per "
    "run; TrainConfig.packed_convs).",
)
@click.option(
    "--cudnn",
    "cudnn",
    type=click.Choice(("heuristic", "benchmark")),  # bench.CUDNN
    default="heuristic",
    show_default=True,
    help="--training: how cuDNN picks its convolution algorithms: heuristic, or benchmark (its "
    "autotuner; --cudnn-benchmark). One per call: a process keeps the algorithms it picked for "
    "a shape. No effect on the CPU.",
)
@click.option(
    "--steps",
    type=click.IntRange(min=1, max=MAX_TIMED_CALLS),
    default=5,
    show_default=True,
    help="--training: timed steps per variant (after 3 untimed ones, the first counting the "
    "step's FLOPs); the median is reported.",
)
@view_size_option(
    help="--training: side of every view in pixels, a multiple of 8, 16 to 1024 (default: the "
    "preset's data, 32; the demo's scenes: 16)."
)
@click.option(
    "--validation-grids",
    type=click.IntRange(min=0, max=MAX_VALIDATION_GRIDS),
    default=0,
    show_default=True,
    help="--training: time each variant's validation too, on this many random viewgrids: a "
    "pack's runs at once and one by one (0: not timed).",
)
def bench(
    quick: bool,
    device: str,
    ops: tuple[str, ...],
    repeats: int,
    as_json: bool,
    training: bool,
    preset: str,
    runs: tuple[int, ...],
    precisions: tuple[str, ...],
    placements: tuple[str, ...],
    modes: tuple[str, ...],
    layouts: tuple[str, ...],
    decodes: tuple[str, ...],
    convs: tuple[str, ...],
    cudnn: str,
    steps: int,
    view_size: int | None,
    validation_grids: int,
) -> None:
    """Time the native kernels against their PyTorch twins and the memory bound, or
    (--training) training steps.

    SUN360 scale (4x8 views of 3x32x32). Every op reports the speed-up over its vectorised
    PyTorch twin; memory-bound ops also report how close they come to their memory bound (a
    copy of the bytes, or reading them once at the copy bandwidth). Native results are checked
    against the twins on the timed inputs. Progress goes to stderr.
    """
    _check_mode_options(training)
    if training:
        _bench_training(
            device,
            preset,
            runs,
            precisions,
            placements,
            modes,
            layouts,
            decodes,
            convs,
            cudnn,
            steps,
            view_size,
            validation_grids,
            as_json,
        )
        return
    from pyskick.kernel_bench import run_suite
    from pyskick.ops import has_native

    devices = _resolve_devices(device)
    if not has_native():
        raise RuntimeError("bench: the native module pyskick._C is not built (run `make setup`)")
    rows = run_suite(
        ops,
        devices,
        quick=quick,
        repeats=repeats,
        progress=lambda message: click.echo(f"bench: {message}", err=True),
    )
    click.echo(json.dumps(rows, indent=2) if as_json else _table(rows))
