"""Fuse: joins the image and proprioception encodings into the LSTM input.

The authors' layers are in docs/paper-reference.md §3.3.
"""

from __future__ import annotations

from torch import nn

from pyskick.models.config import ModelConfig


class Fuse(nn.Sequential):
    """Linear -> ReLU -> Linear -> BatchNorm1d, with no activation after the BatchNorm.

    Input ``[B, sense_size + proprio_embed_size]`` (272 for the paper); output
    ``[B, fuse_size]``. Layer indices match the authors' ``fuse``.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(
            nn.Linear(config.fuse_input_size, config.fuse_size),
            nn.ReLU(),
            nn.Linear(config.fuse_size, config.fuse_size),
            nn.BatchNorm1d(config.fuse_size),
        )
