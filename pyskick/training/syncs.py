"""Find host synchronisations: every place where Python waits for a device's results.

On a GPU, a training step that reads a value back (``float(loss)``, ``if mask.any():``,
``tensor.tolist()``), asks for a shape that depends on values (``x[mask]``, ``nonzero``) or
copies between the host and the device stops the host until the device has caught up: the
queue of kernels drains, and the step runs at the speed of its launches instead of its
arithmetic. Each such point is also a graph break for ``torch.compile`` and forbids CUDA-graph
capture. :func:`no_host_syncs` turns them into errors, so that a test on the CPU finds them
before a GPU ever runs the code (docs/training.md, "The training step").

What counts (the call and the caller's file and line are named in the error):

- **value reads** anywhere: ``bool``/``int``/``float``/``complex``/``index`` of a tensor,
  ``item``, ``tolist``, ``numpy``, printing a tensor;
- **shapes that depend on values** anywhere: ``nonzero``, ``argwhere``, ``masked_select``,
  ``unique``, ``unique_consecutive``, ``bincount``, ``repeat_interleave`` with tensor repeats
  and no ``output_size``, and indexing with a boolean tensor (read or write);
- **transfers** requested by code outside torch itself: ``cpu()``, ``cuda()``, ``to()`` or
  ``copy_()`` between two devices, ``pin_memory()``, tensors built from Python data
  (``torch.tensor``, ``as_tensor``, ``new_tensor``), which a GPU receives by a blocking copy,
  and a Python number written at tensor indices (``x[rows, cols] = True``: torch makes the
  number a host tensor and copies it, which also fails inside a CUDA-graph capture; write
  ``x.index_put_(..., torch.ones((), device=...))`` or use ``scatter_``/``masked_fill_``).

Exempt: value reads made by ``torch.optim`` (its step counters stay on the host unless
``capturable``: host bookkeeping, no device wait). On the CPU a transfer between two devices
cannot happen, so of the transfers only numbers written at tensor indices are caught there;
on a GPU all of them are.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["HostSyncError", "no_host_syncs"]

_TORCH_DIR = Path(torch.__file__).resolve().parent
_OPTIM_DIR = _TORCH_DIR / "optim"
# Frames of the dispatch itself (this module, torch's __torch_function__ machinery and the
# Python-level Tensor methods that call it) are skipped to find the code that made the call.
_DISPATCH_FILES = frozenset(
    {
        Path(__file__).resolve(),
        _TORCH_DIR / "overrides.py",
        _TORCH_DIR / "_tensor.py",
        _TORCH_DIR / "functional.py",
    }
)

_T = torch.Tensor
_VALUE_READS: frozenset[Callable[..., Any]] = frozenset(
    {
        _T.__bool__,
        _T.__int__,
        _T.__float__,
        _T.__complex__,
        _T.__index__,
        _T.item,
        _T.tolist,
        _T.numpy,
        _T.__format__,
        _T.__repr__,
        _T.__array__,
    }
)
_DYNAMIC_SHAPES: frozenset[Callable[..., Any]] = frozenset(
    {
        _T.nonzero,
        torch.nonzero,
        _T.argwhere,
        torch.argwhere,
        _T.masked_select,
        torch.masked_select,
        torch.unique,
        _T.unique,
        torch.unique_consecutive,
        _T.unique_consecutive,
        torch.bincount,
        _T.bincount,
    }
)
_INDEXING: frozenset[Callable[..., Any]] = frozenset(
    {_T.__getitem__, _T.__setitem__, _T.index_put_, _T.index_put, torch.index_put}
)
_REPEATS: frozenset[Callable[..., Any]] = frozenset({torch.repeat_interleave, _T.repeat_interleave})
_MOVES: frozenset[Callable[..., Any]] = frozenset({_T.to, _T.cuda, _T.copy_})
_HOST_DATA: frozenset[Callable[..., Any]] = frozenset(
    {torch.tensor, torch.as_tensor, _T.new_tensor, _T.pin_memory, _T.cpu}
)


class HostSyncError(RuntimeError):
    """A host synchronisation inside a :func:`no_host_syncs` block."""


@contextlib.contextmanager
def no_host_syncs() -> Iterator[None]:
    """Raise :class:`HostSyncError` at every host synchronisation inside the block (see the
    module docstring for what counts).

    Usage::

        with no_host_syncs():
            trainer.train_step(batch)
    """
    with _Guard():
        yield


def _caller() -> Path:
    """The file of the code that made the call (the first frame outside the dispatch): torch's
    own code, or the code that called torch."""
    frame = sys._getframe(2)
    while frame is not None and Path(frame.f_code.co_filename).resolve() in _DISPATCH_FILES:
        frame = frame.f_back  # type: ignore[assignment]
    return Path("?") if frame is None else Path(frame.f_code.co_filename).resolve()


def _outside_torch() -> tuple[Path, int]:
    """The file and line of the first frame outside torch and this module: where to look."""
    frame = sys._getframe(2)
    while frame is not None:
        path = Path(frame.f_code.co_filename).resolve()
        if not (path in _DISPATCH_FILES or path.is_relative_to(_TORCH_DIR)):
            return path, frame.f_lineno
        frame = frame.f_back  # type: ignore[assignment]
    return Path("?"), 0  # pragma: no cover - there is always a caller


def _name(func: Callable[..., Any]) -> str:
    return getattr(func, "__qualname__", "") or getattr(func, "__name__", repr(func))


def _has_bool_index(value: object) -> bool:
    if isinstance(value, torch.Tensor):
        return value.dtype == torch.bool
    if isinstance(value, tuple | list):
        return any(_has_bool_index(item) for item in value)
    return False


def _has_tensor_index(value: object) -> bool:
    """Whether an index is advanced (a tensor or a list), which makes ``x[index] = v`` an
    ``index_put_`` whose value tensor a GPU receives from the host when ``v`` is a number."""
    if isinstance(value, torch.Tensor | list):
        return True
    return isinstance(value, tuple) and any(_has_tensor_index(item) for item in value)


def _is_number(value: object) -> bool:
    return isinstance(value, bool | int | float | complex)


def _target_device(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.device | None:
    """The device a ``Tensor.to``/``cuda``/``copy_`` call moves to, when it names one."""
    candidates = [kwargs.get("device"), *args[1:]]
    for value in candidates:
        if isinstance(value, torch.Tensor):  # to(other) / copy_(src): the other tensor's device
            return value.device
        if isinstance(value, torch.device):
            return value
        if isinstance(value, str):
            with contextlib.suppress(RuntimeError):
                return torch.device(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return torch.device("cuda", value)
    return None


class _Guard(TorchFunctionMode):
    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        why = self._why(func, args, kwargs)
        if why is not None:
            path, line = _outside_torch()
            raise HostSyncError(f"host synchronisation: {why} ({_name(func)}) at {path}:{line}")
        return func(*args, **kwargs)

    @staticmethod
    def _why(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        if func in _VALUE_READS:
            if _caller().is_relative_to(_OPTIM_DIR):
                return None
            return "a tensor's value read on the host"
        if func in _DYNAMIC_SHAPES:
            return "an output shape that depends on the values"
        if func in _INDEXING and (
            _has_bool_index(args[1:2]) or _has_bool_index(kwargs.get("indices"))
        ):
            return "indexing with a boolean mask (its shape depends on the values)"
        if func is _T.__setitem__ and _is_number(args[2]) and _has_tensor_index(args[1]):
            return "a Python number written at tensor indices (a GPU copies it from the host)"
        if func in _REPEATS and isinstance(
            args[1] if len(args) > 1 else kwargs.get("repeats"), torch.Tensor
        ):
            if kwargs.get("output_size") is None:
                return "repeat_interleave with tensor repeats and no output_size"
            return None
        if _caller().is_relative_to(_TORCH_DIR):
            return None
        if func in _HOST_DATA:
            return "a transfer between the host and a device"
        if func in _MOVES and isinstance(args[0], torch.Tensor):
            target = torch.device("cuda") if func is _T.cuda else _target_device(args, kwargs)
            if target is not None and target.type != args[0].device.type:
                return f"a copy from {args[0].device} to {target}"
        return None
