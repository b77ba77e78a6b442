"""``pyskick info``: version, native/CUDA build and runtime devices."""

from __future__ import annotations

import json
import platform

import click

from pyskick_cli.shared_options import json_option


@click.command()
@json_option(help="Print one JSON object instead of text.")
def info(as_json: bool) -> None:
    """Show the version, the native build, the devices torch sees and the registered names."""
    import torch

    from pyskick import __version__
    from pyskick.ops import build_info
    from pyskick.plugins import get_host
    from pyskick.registry import KINDS

    build = build_info()
    host = get_host()
    registries = host.diagnose()
    plugins = sorted(name for name, p in host.plugins.items() if not p.builtin)
    failures = sorted(host.failures)
    registered = {kind: registries[kind].names() for kind in KINDS}
    report = {
        "pyskick": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda_available": torch.cuda.is_available(),
        "torch_threads": torch.get_num_threads(),
        "build": build,
        "plugins": plugins,
        "plugin_failures": failures,
        "registered": registered,
    }
    if as_json:
        click.echo(json.dumps(report, indent=2, sort_keys=True))
        return
    click.echo(f"pyskick {__version__} (python {report['python']}, torch {report['torch']})")
    if not build["native"]:
        click.echo("native kernels: not built (pure-PyTorch reference ops in use)")
    else:
        omp = f"OpenMP {build['openmp_version']}" if build["openmp"] else "no OpenMP"
        sanitized = f", sanitizers {build['sanitizers']}" if build.get("sanitizers") else ""
        click.echo(f"native kernels: built with {build['compiler']}, {omp}{sanitized}")
        if build["cuda"]:
            click.echo(
                f"cuda kernels: built for CUDA {build['cuda_version']}, "
                f"architectures {build['cuda_architectures']}"
            )
        else:
            click.echo("cuda kernels: not built")
    gpu = "available" if report["torch_cuda_available"] else "not available"
    click.echo(f"torch devices: cpu ({report['torch_threads']} threads), cuda {gpu}")
    click.echo(f"plugins: {', '.join(plugins) or 'none'} (see `pyskick plugins`)")
    for name in failures:
        click.echo(f"plugin {name}: failed to load (see `pyskick plugins`)")
    for kind, names in registered.items():
        click.echo(f"{kind}s: {', '.join(names) or '-'}")
