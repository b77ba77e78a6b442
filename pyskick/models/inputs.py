"""Validation of the agent's inputs and assembly of the act/critic side inputs.

The authors' inputs are in docs/paper-reference.md §2.5 and §3.6.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from pyskick.models.config import ModelConfig

ELEVATION_COLUMN = 2
"""Column of the absolute elevation index in proprioception ``[B, P]``."""
AZIMUTH_COLUMN = 3
"""Column of the absolute azimuth index in proprioception, present when ``known_azimuth``."""


def check_float_tensor(name: str, tensor: object, shape: Sequence[int | None]) -> Tensor:
    """Check that ``tensor`` is a floating-point tensor of ``shape`` (None matches any size).

    Raises:
        TypeError: if it is not a floating-point tensor.
        ValueError: if its shape differs; the message names both shapes.
    """
    if not isinstance(tensor, Tensor) or not tensor.is_floating_point():
        got = tensor.dtype if isinstance(tensor, Tensor) else type(tensor).__name__
        raise TypeError(f"{name} must be a floating-point tensor, got {got}")
    if tensor.ndim != len(shape) or any(
        want is not None and got != want for got, want in zip(tensor.shape, shape, strict=True)
    ):
        expected = ", ".join("*" if s is None else str(s) for s in shape)
        raise ValueError(f"{name} must have shape [{expected}], got {list(tensor.shape)}")
    return tensor


def time_column(time: int | Tensor, batch_size: int, like: Tensor) -> Tensor:
    """The time step as a ``[B, 1]`` column of raw values, dtype and device of ``like``.

    Args:
        time: one step index t for the whole batch, or ``[B]`` per-sample steps.
        batch_size: B.
        like: a tensor giving the dtype and device.

    Raises:
        ValueError: if a tensor ``time`` is not of shape ``[B]``.
    """
    if isinstance(time, Tensor):
        if time.shape != (batch_size,):
            raise ValueError(
                f"time must be an int or have shape [{batch_size}], got {list(time.shape)}"
            )
        return time.to(dtype=like.dtype, device=like.device).unsqueeze(1)
    return torch.full((batch_size, 1), float(time), dtype=like.dtype, device=like.device)


def azimuth_column(
    config: ModelConfig, proprio: Tensor, azimuth: Tensor | None, *, needed_by: str
) -> Tensor:
    """The absolute azimuth index as a ``[B, 1]`` column.

    Taken from ``azimuth`` when given, else from proprioception when ``known_azimuth``.

    Raises:
        ValueError: if neither source has it, or ``azimuth`` is not of shape ``[B]``.
    """
    batch_size = proprio.shape[0]
    if azimuth is not None:
        if azimuth.shape != (batch_size,):
            raise ValueError(f"azimuth must have shape [{batch_size}], got {list(azimuth.shape)}")
        return azimuth.to(dtype=proprio.dtype, device=proprio.device).unsqueeze(1)
    if config.known_azimuth:
        return proprio[:, AZIMUTH_COLUMN : AZIMUTH_COLUMN + 1]
    raise ValueError(
        f"{needed_by} needs the absolute azimuth: pass azimuth=[B] (proprioception lacks it "
        "because known_azimuth is False)"
    )


def act_input(
    config: ModelConfig,
    hidden: Tensor,
    proprio: Tensor,
    time: int | Tensor,
    azimuth: Tensor | None = None,
) -> Tensor:
    """Input of the act head and of the partial-observability critic.

    concat(h, commanded deltas, [elevation], [azimuth], [t]) with the bracketed entries present
    when ``act_on_elevation``, ``act_on_azimuth`` and ``act_on_time`` are set; 260 wide for the
    paper's defaults.

    Args:
        config: the model config.
        hidden: ``[B, hidden_size]`` LSTM hidden states h.
        proprio: ``[B, P]`` proprioception (d_elev, d_azim, elevation[, azimuth]).
        time: step index t, an int or ``[B]``.
        azimuth: ``[B]`` absolute azimuth indices; only read when ``act_on_azimuth``, and then
            required unless ``known_azimuth``.

    Returns:
        ``[B, act_input_size]``.
    """
    batch_size = hidden.shape[0]
    check_float_tensor("hidden", hidden, (None, config.hidden_size))
    check_float_tensor("proprio", proprio, (batch_size, config.proprio_size))
    parts = [hidden, proprio[:, :2]]
    if config.act_on_elevation:
        parts.append(proprio[:, ELEVATION_COLUMN : ELEVATION_COLUMN + 1])
    if config.act_on_azimuth:
        parts.append(azimuth_column(config, proprio, azimuth, needed_by="act_on_azimuth"))
    if config.act_on_time:
        parts.append(time_column(time, batch_size, hidden))
    return torch.cat(parts, dim=1)
