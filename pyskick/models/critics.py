"""Learned critics (value heads) of the completion agent (docs/paper-reference.md §3.7).

Both predict the value of a step, ``[B]``, from the policy's hidden state h and side inputs.
They are separate modules from :class:`~pyskick.models.CompletionPolicy`, initialised with the
config's scheme like the authors' ``critic`` and ``critic_fuse``; inside each critic the
submodule names are the authors' (``critic``, ``critic_fuse``).
"""

from __future__ import annotations

from typing import cast

import torch
from torch import Tensor, nn

from pyskick.models.act import head_layers
from pyskick.models.config import ModelConfig
from pyskick.models.init import init_weights_
from pyskick.models.inputs import (
    ELEVATION_COLUMN,
    act_input,
    azimuth_column,
    check_float_tensor,
    time_column,
)


class ValueHead(nn.Module):
    """What the learned critics share: a value head whose output layer starts silent.

    The authors initialise the output layer like every other (xavier), so the first values
    spread over about ±1 while the returns are about −0.02 (minus a final MSE): in a short run
    the advantages are noise and the critic's large gradient degrades the LSTM it shares with
    the policy. pyskick zeroes the output layer's weights and bias at construction, so no
    gradient reaches the shared LSTM until its weights grow. By default the trainer adds the
    output to the average baseline (``TrainConfig.critic_residual``): the critic starts as that
    baseline. A critic of the return itself has its bias set to the mean return of the first
    batch with policy-gradient steps (:meth:`start_at`), so its initial loss is the returns'
    variance (docs/deviations.md K6).
    """

    critic: nn.Sequential

    def reset_output(self) -> None:
        """Zero the output layer: every value is 0, the earlier layers get no gradient."""
        layer = self.output_layer
        with torch.no_grad():
            layer.weight.zero_()
            layer.bias.zero_()

    def start_at(self, value: float) -> None:
        """Make every output ``value`` (the output weights zeroed, the bias set).

        Allowed between a forward pass and its backward while the weights are still zero
        (the trainer calibrates on the first batch): the parameters' ``.data`` is written,
        which autograd does not track, and backward does not read the bias.
        """
        layer = self.output_layer
        layer.weight.data.zero_()
        layer.bias.data.fill_(float(value))

    @property
    def output_layer(self) -> nn.Linear:
        """The last ``Linear`` of the value head (one output)."""
        layer = self.critic[-1]
        if not isinstance(layer, nn.Linear) or layer.out_features != 1:
            raise TypeError(f"{type(self).__name__}.critic must end with a Linear(..., 1)")
        return layer


class PartialObservabilityCritic(ValueHead):
    """Value from the act head's own input (ours(rew)+ac, ours(demo)+ac).

    act input (260 for the paper) -> Linear -> ReLU -> Linear -> ReLU -> BatchNorm1d -> Linear
    -> 1, the output layer zeroed (:class:`ValueHead`).

    Args:
        config: the policy's model config.
    """

    full_observability: bool = False
    """Called as ``critic(hidden, proprio, t, azimuth=...)`` (no grid)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.critic = nn.Sequential(*head_layers(config.act_input_size, config.act_size, 1))
        init_weights_(self.critic, config.init)
        self.reset_output()

    def forward(
        self,
        hidden: Tensor,
        proprio: Tensor,
        time: int | Tensor,
        *,
        azimuth: Tensor | None = None,
    ) -> Tensor:
        """Value ``[B]`` of each sample's current step.

        Args:
            hidden: ``[B, hidden_size]`` policy hidden state h.
            proprio: ``[B, P]`` proprioception, as given to the policy.
            time: step index t, an int or ``[B]``.
            azimuth: ``[B]`` absolute azimuth; needed only when ``act_on_azimuth`` and not
                ``known_azimuth``.
        """
        return self.critic(act_input(self.config, hidden, proprio, time, azimuth)).squeeze(1)


class GroupViews(nn.Module):
    """Regroups per-view rows ``[B * V, F]`` into one row per grid ``[B, V * F]``."""

    def __init__(self, n_views: int) -> None:
        super().__init__()
        self.n_views = n_views

    def forward(self, x: Tensor) -> Tensor:
        """``[B * V, F]`` -> ``[B, V * F]``, views in order v = n * M + m."""
        return x.reshape(-1, self.n_views * x.shape[1])


class GridEncoder(nn.Sequential):
    """Fuses the encodings of all V views of a grid into one vector (the authors' ``critic_fuse``).

    ``[B * V, sense_size]`` -> Linear(-> grid_view_size) -> ReLU -> ``[B, V * grid_view_size]``
    -> Linear(-> grid_size) -> BatchNorm1d -> ``[B, grid_size]``. The flattened width is 4096
    for the paper's SUN360 model and 5760 for ModelNet.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(
            nn.Linear(config.sense_size, config.grid_view_size),
            nn.ReLU(),
            GroupViews(config.n_views),
            nn.Linear(config.n_views * config.grid_view_size, config.grid_size),
            nn.BatchNorm1d(config.grid_size),
        )


class FullObservabilityCritic(ValueHead):
    """Value from h plus the whole, unshifted viewgrid (the asymm-ac baseline).

    Every view of the grid is encoded with the policy's image encoder (shared, as in the
    authors' code), fused by :class:`GridEncoder`, and concatenated with h, the commanded
    deltas, the absolute elevation and azimuth and t: 517 wide for the paper, then
    Linear -> ReLU -> Linear -> ReLU -> BatchNorm1d -> Linear -> 1.

    The shared encoder belongs to the policy and is deliberately not a submodule here: it is
    absent from this critic's ``parameters()`` and ``state_dict()`` (no duplicate in the
    optimiser or the checkpoint) and moves with the policy. Gradients of the critic loss still
    flow into it, as in the authors' single-optimiser code; a frozen encoder receives none.

    Args:
        config: the policy's model config.
        image_encoder: the policy's ``sense_im``, mapping ``[B, C, H, W]`` to
            ``[B, sense_size]``.
    """

    full_observability: bool = True
    """Called as ``critic(hidden, proprio, t, grid, azimuth=...)`` with the whole grid."""

    image_encoder: nn.Module

    def __init__(self, config: ModelConfig, image_encoder: nn.Module) -> None:
        super().__init__()
        self.config = config
        self.critic_fuse = GridEncoder(config)
        self.critic = nn.Sequential(*head_layers(config.full_critic_input_size, config.act_size, 1))
        init_weights_(self.critic_fuse, config.init)
        init_weights_(self.critic, config.init)
        self.reset_output()
        # object.__setattr__ bypasses nn.Module registration: the encoder stays the policy's.
        object.__setattr__(self, "image_encoder", image_encoder)

    def encode_views(self, grid: Tensor) -> Tensor:
        """Every view of whole viewgrids through the shared image encoder, ``[B, V,
        sense_size]`` (:func:`encode_views`). The same at every glimpse of an episode (the grid
        and the encoder do not change within one): a rollout encodes them once and hands
        them to each call (``views=``), which then skips this, the critic's costliest part.
        """
        return encode_views(self.config, self.image_encoder, grid)

    def encode_grid(self, grid: Tensor) -> Tensor:
        """Encode whole viewgrids.

        Args:
            grid: ``[B, N, M, C, H, W]`` normalised views in the absolute (unshifted) frame.

        Returns:
            ``[B, grid_size]``.
        """
        return self.fuse_views(self.encode_views(grid))

    def fuse_views(self, views: Tensor) -> Tensor:
        """``[B, V, sense_size]`` encoded views (:meth:`encode_views`) -> ``[B, grid_size]``."""
        return cast(Tensor, self.critic_fuse(views.flatten(0, 1)))

    def forward(
        self,
        hidden: Tensor,
        proprio: Tensor,
        time: int | Tensor,
        grid: Tensor,
        *,
        azimuth: Tensor | None = None,
        views: Tensor | None = None,
    ) -> Tensor:
        """Value ``[B]`` of each sample's current step.

        Args:
            hidden: ``[B, hidden_size]`` policy hidden state h.
            proprio: ``[B, P]`` proprioception, as given to the policy.
            time: step index t, an int or ``[B]``.
            grid: ``[B, N, M, C, H, W]`` the full grid, absolute frame (not start-shifted).
            azimuth: ``[B]`` absolute azimuth index; required unless ``known_azimuth``.
            views: ``[B, V, sense_size]``, the grid's :meth:`encode_views`, when the caller
                computed them once for the episode; None encodes the grid here.
        """
        cfg = self.config
        batch_size = hidden.shape[0]
        check_float_tensor("hidden", hidden, (None, cfg.hidden_size))
        check_float_tensor("proprio", proprio, (batch_size, cfg.proprio_size))
        if views is None:
            fused_grid = self.encode_grid(grid)
        else:
            check_float_tensor("grid", grid, (batch_size, *cfg.grid_shape))
            check_float_tensor("views", views, (batch_size, cfg.n_views, cfg.sense_size))
            fused_grid = self.fuse_views(views)
        if fused_grid.shape[0] != batch_size:
            raise ValueError(
                f"grid must hold {batch_size} viewgrids to match hidden, got {fused_grid.shape[0]}"
            )
        critic_input = torch.cat(
            [full_critic_inputs(cfg, hidden, proprio, time, azimuth), fused_grid], 1
        )
        return self.critic(critic_input).squeeze(1)


def full_critic_inputs(
    config: ModelConfig,
    hidden: Tensor,
    proprio: Tensor,
    time: int | Tensor,
    azimuth: Tensor | None,
    *,
    needed_by: str = "FullObservabilityCritic",
) -> Tensor:
    """The input of a head with full observability before the grid's encoding (the critic's,
    and a full-observability actor's, as the expert-clone plugin's): h, the commanded deltas,
    the absolute elevation and azimuth and t, ``[B, hidden_size + 5]``; ``needed_by`` names
    the head when the azimuth is missing."""
    return torch.cat(
        [
            hidden,
            proprio[:, :2],
            proprio[:, ELEVATION_COLUMN : ELEVATION_COLUMN + 1],
            azimuth_column(config, proprio, azimuth, needed_by=needed_by),
            time_column(time, hidden.shape[0], hidden),
        ],
        dim=1,
    )


def encode_views(config: ModelConfig, image_encoder: nn.Module, grid: Tensor) -> Tensor:
    """Every view of whole viewgrids through an image encoder (the policy's ``sense_im``).

    Args:
        config: the model config.
        image_encoder: ``[B, C, H, W]`` -> ``[B, sense_size]``.
        grid: ``[B, N, M, C, H, W]`` normalised views in the absolute (unshifted) frame.

    Returns:
        ``[B, V, sense_size]``, views in order v = n * M + m.
    """
    grid = check_float_tensor("grid", grid, (None, *config.grid_shape))
    views = grid.reshape(-1, config.channels, config.view_size, config.view_size)
    return image_encoder(views).view(grid.shape[0], config.n_views, -1)
