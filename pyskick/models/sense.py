"""Sense: the image encoder and the proprioception embedding (docs/paper-reference.md §3.1-3.2)."""

from __future__ import annotations

from torch import nn

from pyskick.models.config import ModelConfig


class ImageEncoder(nn.Sequential):
    """Encodes one view into a ``sense_size`` vector (the authors' ``sense_im``).

    Conv5 -> MaxPool3/2 -> ReLU -> Conv5 -> ReLU -> AvgPool3/2 -> Conv5 -> ReLU -> AvgPool3/2
    -> flatten -> Linear -> ReLU. Block 1 pools before its ReLU, blocks 2 and 3 after, as in the
    authors' code. Layer indices match theirs (the flatten sits at index 9), so state-dict
    keys are the same (``sense_im.10.weight`` is the Linear).

    Input ``[B, C, H, W]`` float; output ``[B, sense_size]``.
    """

    def __init__(self, config: ModelConfig) -> None:
        c1, c2, c3 = config.conv_channels
        super().__init__(
            nn.Conv2d(config.channels, c1, kernel_size=5, stride=1, padding=2),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.ReLU(),
            nn.Conv2d(c1, c2, kernel_size=5, stride=1, padding=2),
            nn.ReLU(),
            nn.AvgPool2d(kernel_size=3, stride=2),
            nn.Conv2d(c2, c3, kernel_size=5, stride=1, padding=2),
            nn.ReLU(),
            nn.AvgPool2d(kernel_size=3, stride=2),
            nn.Flatten(),
            nn.Linear(config.encoder_flat_size, config.sense_size),
            nn.ReLU(),
        )


class ProprioEncoder(nn.Sequential):
    """Embeds proprioception with Linear(P -> proprio_embed_size) + ReLU (``sense_pro``).

    Input ``[B, P]`` float (raw integer deltas and indices); output ``[B, proprio_embed_size]``.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(nn.Linear(config.proprio_size, config.proprio_embed_size), nn.ReLU())
