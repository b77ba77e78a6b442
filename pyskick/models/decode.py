"""Decode: from the LSTM hidden state to the whole viewgrid (docs/paper-reference.md §3.5)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from pyskick.models.config import ModelConfig

L1_EPS = 1e-12
"""Floor of the L1 norm in the per-sample normalisation of h (``F.normalize``'s default)."""


def _upsample(in_channels: int, out_channels: int) -> nn.ConvTranspose2d:
    # k5 s2 p2 with output_padding 1 exactly doubles the side.
    return nn.ConvTranspose2d(
        in_channels, out_channels, kernel_size=5, stride=2, padding=2, output_padding=1
    )


class ViewgridDecoder(nn.Sequential):
    """Decodes h into all N * M views (the authors' ``decode``).

    ``h / max(||h||_1, 1e-12)`` per sample -> BatchNorm1d -> Linear -> LeakyReLU(0.2) ->
    reshape ``[decode_start_channels, S/8, S/8]`` -> three transposed convolutions (x2 each,
    LeakyReLU(0.2) between) to ``V * C`` maps of ``S x S`` -> LeakyReLU(0.8) when views are
    mean-subtracted (outputs may be negative), ReLU otherwise. Output channel
    ``(n * M + m) * C + c`` is view (n, m), channel c. Layer indices match the authors'.

    Because of the L1 normalisation, scaling h by a positive constant leaves the output
    unchanged (up to the 1e-12 floor).
    """

    def __init__(self, config: ModelConfig) -> None:
        side = config.decode_start_size
        d1, d2 = config.deconv_channels
        super().__init__(
            nn.BatchNorm1d(config.hidden_size),
            nn.Linear(config.hidden_size, config.decode_linear_size),
            nn.LeakyReLU(0.2),
            nn.Unflatten(1, (config.decode_start_channels, side, side)),
            _upsample(config.decode_start_channels, d1),
            nn.LeakyReLU(0.2),
            _upsample(d1, d2),
            nn.LeakyReLU(0.2),
            _upsample(d2, config.decoded_channels),
            nn.LeakyReLU(0.8) if config.mean_subtract else nn.ReLU(),
        )
        self.grid_shape = (
            config.n_elevations,
            config.n_azimuths,
            config.channels,
            config.view_size,
            config.view_size,
        )

    def forward(self, hidden: Tensor) -> Tensor:
        """Decode a batch of hidden states.

        Args:
            hidden: ``[B, hidden_size]`` LSTM hidden states h (not yet normalised).

        Returns:
            ``[B, N, M, C, H, W]`` decoded viewgrid, in the start-relative azimuth frame.
        """
        # torch leaves Sequential.forward unannotated (for TorchScript).
        maps = super().forward(  # type: ignore[no-untyped-call]
            F.normalize(hidden, p=1, dim=1, eps=L1_EPS)
        )
        return maps.reshape(hidden.shape[0], *self.grid_shape)
