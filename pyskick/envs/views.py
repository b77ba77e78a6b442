"""Preprocessing of raw views: ``(x - channel_mean) / 255`` per channel.

The authors' preprocessing is in docs/paper-reference.md §1.4.

There is no division by the standard deviation, as in the authors' code: it would change the
scale of the reconstruction error. Values of raw 0–255 views land in ``[-1, 1]``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from pyskick.errors import UserError


def parse_channel_mean(channel_mean: Sequence[float] | Tensor) -> Tensor:
    """Validate a per-channel mean on the 0–255 scale as a ``[C]`` float32 CPU tensor."""
    mean = torch.as_tensor(channel_mean, dtype=torch.float32).detach().cpu()
    if mean.dim() != 1 or mean.numel() == 0:
        raise UserError(
            f"channel_mean must be a non-empty sequence, one value per channel, "
            f"got shape {list(mean.shape)}"
        )
    if not bool(((mean >= 0) & (mean <= 255)).all()):
        raise UserError(f"channel_mean must lie in [0, 255], got {mean.tolist()}")
    return mean


def channel_mean_for(mean: Tensor | None, channels: int, device: torch.device | str) -> Tensor:
    """The ``[C]`` mean to subtract, on ``device``: ``mean`` checked against C, or zeros if None."""
    if mean is None:
        return torch.zeros(channels, dtype=torch.float32, device=device)
    if mean.numel() != channels:
        raise UserError(
            f"the grids have {channels} channels but channel_mean has {mean.numel()} values"
        )
    return mean.to(device)


def normalize_views(views: Tensor, channel_mean: Tensor) -> Tensor:
    """``(views - mean_c) / 255`` as float32.

    Args:
        views: ``[..., C, H, W]`` raw intensities on the 0–255 scale (uint8 or float).
        channel_mean: ``[C]`` float32 on the device of ``views``.

    Returns:
        ``[..., C, H, W]`` float32.
    """
    # One converted copy, then in place: the float32 grid is the largest tensor of an episode.
    out = views.to(torch.float32, copy=True)
    # Divided by a tensor on the device, not by the number 255: CUDA turns division by a host
    # scalar into a multiplication by its reciprocal (one bit off), and the views must be the
    # same bits on every device (the CPU divides exactly).
    scale = torch.full_like(channel_mean, 255.0)[:, None, None]
    return out.sub_(channel_mean[:, None, None]).div_(scale)


def denormalize_views(views: Tensor, channel_mean: Tensor) -> Tensor:
    """Inverse of :func:`normalize_views`: ``views * 255 + mean_c``, float32, for display."""
    return views.to(torch.float32) * 255.0 + channel_mean.to(views.device)[:, None, None]


def check_mean_given(model_subtracts: bool, mean_subtracted: bool) -> None:
    """Refuse to feed a model that subtracts its data's channel mean (``model_subtracts``)
    views from which no mean is subtracted (``mean_subtracted`` False: no channel mean, or one
    of zeros): every view would be off by the mean (≈ 100 of 255), and every reward or
    coverage computed from them wrong.

    Raises:
        ValueError: the model subtracts a mean and none is given (one line: what to pass).
    """
    if model_subtracts and not mean_subtracted:
        raise UserError(
            "the reward model was trained with mean subtraction but no channel mean is "
            "subtracted from the views: pass the channel_mean of its training data (e.g. the "
            "dataset's spec.channel_mean)"
        )
