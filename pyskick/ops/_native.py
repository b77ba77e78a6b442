"""Lazy access to the compiled module :mod:`pyskick._C`.

Importing pyskick never fails because the extension is missing: ops fall back to their
pure-PyTorch twins (with one warning) until it is built.
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType
from typing import Any


@functools.cache
def native_module() -> ModuleType | None:
    """Return :mod:`pyskick._C`, or None when it was not built or fails to load."""
    try:
        return importlib.import_module("pyskick._C")
    except ImportError:
        return None


def has_native() -> bool:
    """True when the C++ kernels are built (CPU kernels are always part of a build)."""
    return native_module() is not None


def has_cuda() -> bool:
    """True when the CUDA kernels are built (independent of whether a GPU is present)."""
    module = native_module()
    return module is not None and bool(module.has_cuda())


def build_info() -> dict[str, Any]:
    """How the native module was built; ``{"native": False}`` when it is missing."""
    module = native_module()
    if module is None:
        return {"native": False, "cuda": False}
    return {"native": True, **module.build_info()}
