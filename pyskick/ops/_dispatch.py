"""Backend choice and native launch shared by the op wrappers.

A wrapper validates its inputs (:mod:`pyskick.ops._checks`), asks :func:`use_native` which
backend runs, and either calls its twin in :mod:`pyskick.ops._reference` or allocates the
outputs and calls :func:`launch`, which picks the ``<op>_cpu`` or ``<op>_cuda`` entry point of
:mod:`pyskick._C` for the device.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

import torch

from pyskick.errors import UserError
from pyskick.ops._native import has_cuda, native_module

Backend = Literal["auto", "native", "reference"]
BACKENDS = ("auto", "native", "reference")

_warned_fallback: set[str] = set()


def use_native(op: str, backend: str, device: torch.device) -> bool:
    """Resolve ``backend`` for ``device``: True to run the native kernel, False for the twin.

    Raises:
        ValueError: unknown backend name.
        RuntimeError: ``backend="native"`` but no native kernel was built for ``device``.
    """
    if backend not in BACKENDS:
        raise UserError(f"{op}: backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend == "reference":
        return False
    if device.type == "cpu":
        available, missing = native_module() is not None, "the native module pyskick._C"
    elif device.type == "cuda":
        available, missing = has_cuda(), "CUDA kernels (rebuild with PYSKICK_WITH_CUDA=ON)"
    else:
        available, missing = False, f"kernels for device type {device.type!r}"
    if available:
        return True
    if backend == "native":
        raise RuntimeError(
            f"{op}: backend='native' needs {missing}, which this build of pyskick lacks "
            "(see `pyskick info`); use backend='reference'"
        )
    if device.type not in _warned_fallback:
        _warned_fallback.add(device.type)
        warnings.warn(
            f"pyskick: no native kernels for {device.type} tensors ({missing} missing); "
            "using the pure-PyTorch reference ops",
            RuntimeWarning,
            stacklevel=3,
        )
    return False


def launch(op: str, device: torch.device, *args: Any) -> Any:
    """Run the native kernel of ``op`` on ``device`` and return what the binding returns.

    CPU: ``pyskick._C.<op>_cpu(*args)``. CUDA: ``pyskick._C.<op>_cuda(*args, stream)`` with
    ``device`` made current and ``stream`` its current stream, so the kernel is ordered with
    the torch work queued there. Call it only after :func:`use_native` said True for ``device``.

    Args:
        op: the op's name, the prefix of its entry points in :mod:`pyskick._C`.
        device: the device of the tensors whose addresses are in ``args``.
        *args: the entry point's arguments (``Tensor.data_ptr()`` addresses and sizes).

    Raises:
        UserError: a kernel's check of the caller's values failed (``pyskick._C.InputError``:
            NaN scores, out-of-range coverage, a grid too large for a CUDA kernel). A failed
            last-guard check of the binding (sizes, null pointers: a wrapper's bug) stays a
            plain ``ValueError``.
    """
    lib = native_module()
    # A module built before InputError existed has none to catch (an empty tuple catches nothing).
    input_error = getattr(lib, "InputError", ())
    try:
        if device.type == "cuda":
            with torch.cuda.device(device):
                stream = torch.cuda.current_stream(device).cuda_stream
                return getattr(lib, f"{op}_cuda")(*args, int(stream))
        return getattr(lib, f"{op}_cpu")(*args)
    except input_error as exc:
        raise UserError(str(exc)) from None
