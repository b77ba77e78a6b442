"""``pyskick info``: version, native/CUDA build and runtime devices."""

from __future__ import annotations

import json
import platform

import click


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
def info(as_json: bool) -> None:
    """Show the version, how the native kernels were built and which devices torch sees."""
    import torch

    from pyskick import __version__
    from pyskick.ops import build_info

    build = build_info()
    report = {
        "pyskick": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda_available": torch.cuda.is_available(),
        "torch_threads": torch.get_num_threads(),
        "build": build,
    }
    if as_json:
        click.echo(json.dumps(report, indent=2, sort_keys=True))
        return
    click.echo(f"pyskick {__version__} (python {report['python']}, torch {report['torch']})")
    if not build["native"]:
        click.echo("native kernels: not built (pure-PyTorch reference ops in use)")
    else:
        omp = f"OpenMP {build['openmp_version']}" if build["openmp"] else "no OpenMP"
        click.echo(f"native kernels: built with {build['compiler']}, {omp}")
        if build["cuda"]:
            click.echo(
                f"cuda kernels: built for CUDA {build['cuda_version']}, "
                f"architectures {build['cuda_architectures']}"
            )
        else:
            click.echo("cuda kernels: not built")
    gpu = "available" if report["torch_cuda_available"] else "not available"
    click.echo(f"torch devices: cpu ({report['torch_threads']} threads), cuda {gpu}")
