"""``pyskick bench``: time the kernels against their baselines and print a table.

The targets are in README.md, "Benchmarks".
"""

from __future__ import annotations

import json
from typing import Any

import click

DEVICES = ("cpu", "cuda", "all")


def _resolve_devices(device: str) -> list[str]:
    """Devices to time for ``--device``; a CUDA request without GPU or kernels is bad input."""
    import torch

    from pyskick.ops import has_cuda

    if device not in DEVICES:
        raise ValueError(f"bench: --device must be one of {', '.join(DEVICES)}, got {device!r}")
    cuda_ready = torch.cuda.is_available() and has_cuda()
    if device == "cuda" and not cuda_ready:
        missing = (
            "no GPU is visible to torch"
            if not torch.cuda.is_available()
            else ("pyskick was built without CUDA kernels (rebuild with PYSKICK_WITH_CUDA=ON)")
        )
        raise ValueError(f"bench: --device cuda, but {missing}")
    if device == "cpu" or (device == "all" and not cuda_ready):
        return ["cpu"]
    return ["cuda"] if device == "cuda" else ["cpu", "cuda"]


def _parse_ops(ops: str) -> list[str]:
    from pyskick.ops.benchmark import BENCH_OPS

    names = [name.strip() for name in ops.split(",") if name.strip()]
    unknown = [name for name in names if name not in BENCH_OPS]
    if not names or unknown:
        raise ValueError(
            f"bench: --ops must be a comma-separated list of {', '.join(BENCH_OPS)}, got {ops!r}"
        )
    return list(dict.fromkeys(names))  # drop duplicates, keep order


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
    header = (
        "op",
        "scale",
        "device",
        "backend",
        "median",
        "min",
        "vs reference",
        "GB/s",
        "vs bound",
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
                _times(row["speedup"]),
                "-" if row["gbps"] is None else f"{row['gbps']:.1f}",
                _times(row["bound_ratio"]),
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
    text += [
        "vs reference: median of the PyTorch twin / this median.",
        "vs bound: this median / the memory bound (rotate_viewgrid: grid.clone() of the same",
        "  bytes; coverage_matrix: recon bytes / copy bandwidth).",
        "GB/s: grid (rotate_viewgrid) or recon (coverage_matrix) bytes / median.",
    ]
    return "\n".join(text)


@click.command()
@click.option(
    "--quick",
    is_flag=True,
    help="Small suite for smoke runs (< 30 s on 2 cores): rotate at B=32, coverage at B=2.",
)
@click.option(
    "--device",
    default="all",
    show_default=True,
    metavar="[cpu|cuda|all]",
    help="Where to time: all = the CPU, plus CUDA when a GPU and the CUDA kernels are present.",
)
@click.option(
    "--ops",
    default="rotate_viewgrid,nms_rewards,greedy_coverage,coverage_matrix",
    show_default=True,
    help="Comma-separated ops to time.",
)
@click.option(
    "--repeats",
    type=int,
    default=5,
    show_default=True,
    help="Timed calls per backend after one warm-up call; the median is reported.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list of rows instead.")
def bench(quick: bool, device: str, ops: str, repeats: int, as_json: bool) -> None:
    """Time the native kernels against their PyTorch twins and the memory bound.

    SUN360 scale (4x8 views of 3x32x32). Loop-like ops (greedy_coverage, nms_rewards) report
    the speed-up over their vectorised PyTorch twins; memory-bound ops (rotate_viewgrid,
    coverage_matrix) also report how close they come to a plain memory copy. Native results
    are checked against the twins on the timed inputs. Progress goes to stderr.
    """
    from pyskick.ops import has_native
    from pyskick.ops.benchmark import run_suite

    if repeats < 1:
        raise ValueError(f"bench: --repeats must be >= 1, got {repeats}")
    names = _parse_ops(ops)
    devices = _resolve_devices(device)
    if not has_native():
        raise RuntimeError("bench: the native module pyskick._C is not built (run `make setup`)")
    rows = run_suite(
        names,
        devices,
        quick=quick,
        repeats=repeats,
        progress=lambda message: click.echo(f"bench: {message}", err=True),
    )
    click.echo(json.dumps(rows, indent=2) if as_json else _table(rows))
