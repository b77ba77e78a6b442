"""Lazy access to the compiled module :mod:`pyskick._C`.

Importing pyskick never fails because the extension is missing: ops fall back to their
pure-PyTorch twins (with one warning) until it is built.

``PYSKICK_NATIVE_LIBRARY=/path/to/_C.so`` loads the extension from that file instead of the
installed one (``make sanitize`` points it at its AddressSanitizer build, leaving the normal
install alone). It is loaded when this module is imported, which importing :mod:`pyskick.ops`
(or any op) does: an ``import pyskick._C`` after that finds it too, but one that runs before
gets the installed module. A file that does not load is an error, never a silent fallback.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

NATIVE_LIBRARY_ENV = "PYSKICK_NATIVE_LIBRARY"


def _load_native_library(path: str) -> ModuleType:
    """Load the extension module file ``path`` as :mod:`pyskick._C`.

    Raises:
        ImportError: the file is missing or does not load (a sanitizer build loaded without the
            sanitizer runtime preloaded, for instance).
    """
    spec = importlib.util.spec_from_file_location("pyskick._C", path)
    if not Path(path).is_file() or spec is None or spec.loader is None:
        raise ImportError(f"{NATIVE_LIBRARY_ENV}={path}: no such extension module file")
    try:  # an extension module is loaded (dlopen) by module_from_spec
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except ImportError as exc:
        raise ImportError(f"{NATIVE_LIBRARY_ENV}={path} does not load: {exc}") from None
    sys.modules["pyskick._C"] = module
    return module


if os.environ.get(NATIVE_LIBRARY_ENV):
    _load_native_library(os.environ[NATIVE_LIBRARY_ENV])


_UNSET = object()
_module: Any = _UNSET


def native_module() -> ModuleType | None:
    """Return :mod:`pyskick._C`, or None when it was not built or fails to load (looked up
    once; a plain module global rather than ``functools.cache``, so that ``torch.compile``
    traces the op wrappers that ask for it without a warning)."""
    global _module
    if _module is _UNSET:
        try:
            _module = importlib.import_module("pyskick._C")
        except ImportError:
            _module = None
    return _module


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
