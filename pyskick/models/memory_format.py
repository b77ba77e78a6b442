"""Channels-last convolutions (``TrainConfig.channels_last``; docs/training.md, "Channels-last").

cuDNN's tensor-core convolutions compute in NHWC. Given NCHW tensors, it wraps each convolution
in layout transforms (NCHW to NHWC and back): 19 % of a pack of 15's replayed step on an H100.
A convolution whose *weight* is channels-last returns a channels-last output (PyTorch asks the
input and the weight for the layout, on cuDNN and oneDNN alike), and the layers between
convolutions here (ReLU, pooling) keep it, so converting the weights once is enough: each view
batch is transformed once on its way in, and each flatten copies back to the NCHW order the
linear layers read. The arithmetic is the same, up to the order of float sums.

A packed convolution's weight ``[R, out, in, k, k]`` is stored so that the grouped weight its
forward takes, ``weight.reshape(R * out, in, k, k)``, is a channels-last view, not a copy.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from pyskick.models.packed import PackedConv2d, PackedConvTranspose2d

__all__ = ["is_channels_last", "use_channels_last"]

_CONVS = (nn.Conv2d, nn.ConvTranspose2d)
_PACKED_CONVS = (PackedConv2d, PackedConvTranspose2d)


def _packed_channels_last(weight: Tensor) -> Tensor:
    """``[R, a, b, k, k]`` with the ``b`` dimension innermost (a copy, same values)."""
    return weight.permute(0, 1, 3, 4, 2).contiguous().permute(0, 1, 4, 2, 3)


def use_channels_last(module: nn.Module) -> nn.Module:
    """Store every convolution weight of ``module`` channels-last, in place; returns it.

    Plain and packed (:mod:`pyskick.models.packed`) convolutions and transposed convolutions;
    the parameters stay the same objects (an optimizer made before keeps them), their values
    unchanged. Convert before an optimizer has state: its moments keep the layout they had.
    """
    with torch.no_grad():
        for layer in module.modules():
            if isinstance(layer, _CONVS):
                layer.weight.data = layer.weight.data.contiguous(memory_format=torch.channels_last)
            elif isinstance(layer, _PACKED_CONVS):
                layer.weight.data = _packed_channels_last(layer.weight.data)
    return module


def is_channels_last(module: nn.Module) -> bool:
    """Whether every convolution of ``module`` computes channels-last (True with none)."""
    for layer in module.modules():
        if isinstance(layer, _CONVS):
            if not layer.weight.is_contiguous(memory_format=torch.channels_last):
                return False
        elif isinstance(layer, _PACKED_CONVS):
            grouped = layer.weight.reshape(-1, *layer.weight.shape[2:])
            if grouped.data_ptr() != layer.weight.data_ptr() or not grouped.is_contiguous(
                memory_format=torch.channels_last
            ):
                return False
    return True
