"""Input validation shared by the op wrappers.

Every wrapper validates once, with these checks, whose messages name the op, the argument and
what it got; then it picks a backend (:mod:`pyskick.ops._dispatch`). Kernels trust what reaches
them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from pyskick.errors import UserError, UserTypeError

# Every element count and byte offset must stay far from int64 overflow in the kernels.
MAX_NUMEL = 2**62


def describe(t: torch.Tensor) -> str:
    """One-line description of a tensor for error messages."""
    return f"{t.dtype} tensor of shape {tuple(t.shape)} on {t.device}"


def check_tensor(
    name: str,
    t: object,
    *,
    op: str,
    dtypes: Sequence[torch.dtype],
    ndim: int | None = None,
    detach: bool = True,
) -> torch.Tensor:
    """Check that ``t`` is a tensor of one of ``dtypes`` with ``ndim`` dimensions.

    Returns:
        ``t`` made contiguous (a copy only when it was not contiguous), and detached unless
        ``detach`` is False (an input the op differentiates).
    """
    if not isinstance(t, torch.Tensor):
        raise UserTypeError(f"{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        allowed = " or ".join(str(d) for d in dtypes)
        raise UserTypeError(f"{op}: {name} must have dtype {allowed}, got {describe(t)}")
    if ndim is not None and t.dim() != ndim:
        raise UserError(f"{op}: {name} must have {ndim} dimensions, got {describe(t)}")
    if t.numel() > MAX_NUMEL:
        raise UserError(f"{op}: {name} has too many elements ({t.numel()})")
    # Inputs the op does not differentiate are read as plain data.
    return (t.detach() if detach else t).contiguous()


def check_int(name: str, value: object, *, op: str, minimum: int = 0) -> int:
    """Check that ``value`` is an integer (not a bool) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserTypeError(f"{op}: {name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise UserError(f"{op}: {name} must be >= {minimum}, got {value}")
    return value


def check_bool(name: str, value: object, *, op: str) -> bool:
    """Check that a flag is a bool: a string such as ``"no"`` is truthy, and a backend that
    converts it and one that does not would disagree."""
    if not isinstance(value, bool):
        raise UserTypeError(f"{op}: {name} must be a bool, got {type(value).__name__} {value!r}")
    return value


def check_same_device(op: str, **tensors: torch.Tensor) -> torch.device:
    """Check that all tensors share one device and return it."""
    devices = {name: t.device for name, t in tensors.items()}
    first = next(iter(devices.values()))
    if any(d != first for d in devices.values()):
        listing = ", ".join(f"{n} on {d}" for n, d in devices.items())
        raise UserError(f"{op}: all tensors must be on one device, got {listing}")
    return first


def check_not_differentiated(op: str, **tensors: torch.Tensor) -> None:
    """Refuse an input that requires grad, grad mode on, to an operator without a gradient.

    Its output would silently carry no gradient. The public wrappers hand their operators
    detached inputs; this is for direct ``torch.ops.pyskick`` calls.

    Args:
        op: the operator's name, for the message.
        **tensors: its tensor inputs by name.

    Raises:
        RuntimeError: naming the first input that requires grad.
    """
    if torch.is_grad_enabled():
        for name, t in tensors.items():
            if t.requires_grad:
                raise RuntimeError(
                    f"{op}: is not differentiable, but {name} requires grad; detach it "
                    f"(pyskick.ops.{op} does) or call it under torch.no_grad()"
                )


def check_finite(name: str, t: torch.Tensor, *, op: str) -> None:
    """Reject NaN and infinite values (they would make the greedy choices meaningless)."""
    if t.numel() and not bool(torch.isfinite(t).all()):
        raise UserError(f"{op}: {name} contains NaN or infinite values")


def check_unit_range(name: str, t: torch.Tensor, *, op: str) -> None:
    """Reject values outside [0, 1] (NaN included)."""
    if t.numel() and not bool(((t >= 0) & (t <= 1)).all()):
        raise UserError(
            f"{op}: {name} must lie in [0, 1] (as coverage_matrix returns), got "
            f"values in [{float(t.min())}, {float(t.max())}] or NaN"
        )


def check_index_range(name: str, t: torch.Tensor, upper: int, *, op: str) -> None:
    """Check that every entry of an index tensor lies in [0, upper)."""
    if t.numel() == 0:
        return
    lo, hi = int(t.min()), int(t.max())
    if lo < 0 or hi >= upper:
        raise UserError(f"{op}: {name} must lie in [0, {upper}), got values in [{lo}, {hi}]")
