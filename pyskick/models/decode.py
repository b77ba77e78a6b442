"""Decode: from the LSTM hidden state to the whole viewgrid (docs/paper-reference.md §3.5)."""

from __future__ import annotations

from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pyskick.models.config import ModelConfig

L1_EPS = 1e-12
"""Floor of the L1 norm in the per-sample normalisation of h (``F.normalize``'s default)."""


def glimpse_batch_norm(layer: nn.Module, x: Tensor) -> Tensor:
    """A BatchNorm layer applied to each glimpse's batch of ``x`` on its own, as one call per
    glimpse would: in train mode each glimpse's samples are normalised by their own statistics
    and the running statistics take one update per glimpse, in glimpse order.

    Args:
        layer: an ``nn.BatchNorm1d`` (parameters ``[F]``), or a packed one
            (:class:`~pyskick.models.packed.PackedBatchNorm1d`, parameters ``[R, F]``), with a
            momentum (not a cumulative average) and running statistics.
        x: ``[T, B, F]`` (``[T, R, B, F]`` for a packed layer): T glimpses' batches.

    Returns:
        ``[T, B, F]`` (``[T, R, B, F]``), what ``layer`` returns for each ``x[t]``, up to the
        rounding of the running statistics' updates (summed in another order).
    """
    # Both layer types hold these; nn.Module's attributes are typed loosely.
    momentum = cast("float | None", layer.momentum)
    eps = cast(float, layer.eps)
    running_mean = cast("Tensor | None", layer.running_mean)
    running_var = cast(Tensor, layer.running_var)
    if momentum is None or running_mean is None:
        raise ValueError("glimpse_batch_norm needs a momentum and running statistics")
    T, B = x.shape[0], x.shape[-2]
    # [B, T * (R *) F]: one column per glimpse (and run) and feature, statistics over B.
    flat = x.movedim(-2, 0).reshape(B, -1)
    weight = cast(Tensor, layer.weight).reshape(-1).repeat(T)
    bias = cast(Tensor, layer.bias).reshape(-1).repeat(T)
    if layer.training:
        out = F.batch_norm(flat, None, None, weight, bias, True, 0.0, eps)
        with torch.no_grad():
            stats = x.detach().to(torch.promote_types(x.dtype, torch.float32))
            var, mean = torch.var_mean(stats, dim=-2, correction=1)
            var, mean = var.to(running_var.dtype), mean.to(running_mean.dtype)
            for t in range(T):  # T small updates: a closed form would take as many kernels
                running_mean.lerp_(mean[t], momentum)
                running_var.lerp_(var[t], momentum)
            cast(Tensor, layer.num_batches_tracked).add_(T)
    else:
        mean = running_mean.reshape(-1).repeat(T)
        var = running_var.reshape(-1).repeat(T)
        out = F.batch_norm(flat, mean, var, weight, bias, False, 0.0, eps)
    return out.view(B, *x.shape[:-2], x.shape[-1]).movedim(0, -2)


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

    def decode_glimpses(self, hidden: Tensor) -> Tensor:
        """Decode the hidden states of T glimpses in one batch, as T calls would: the
        BatchNorm normalises each glimpse's batch on its own (:func:`glimpse_batch_norm`),
        every later layer acts on each sample alone.

        Args:
            hidden: ``[T, B, hidden_size]`` LSTM hidden states h (not yet normalised).

        Returns:
            ``[T, B, N, M, C, H, W]`` decoded viewgrids, start-relative azimuth frame.
        """
        T, B, features = hidden.shape
        x = glimpse_batch_norm(self[0], F.normalize(hidden, p=1, dim=2, eps=L1_EPS))
        maps: Tensor = x.reshape(T * B, features)
        for layer in list(self)[1:]:
            maps = layer(maps)
        return maps.reshape(T, B, *self.grid_shape)
