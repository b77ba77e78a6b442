"""The expert's network: an act head with full observability (docs/paper-reference.md §3.7).

The authors' ``--act_full_obs True`` actor: ``act_fuse`` encodes all N·M views of the absolute,
preprocessed viewgrid exactly like the full-observability critic's ``critic_fuse``
(:class:`pyskick.models.GridEncoder`, fed by the agent's shared, frozen ``sense_im``), and
``act`` maps concat(h_t, commanded deltas, absolute elevation, absolute azimuth, t, fused grid)
(517 wide for the paper) through Linear -> ReLU -> Linear -> ReLU -> BatchNorm1d -> Linear to
A logits.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from pyskick.models import GridEncoder, ModelConfig, init_weights_
from pyskick.models.act import head_layers
from pyskick.models.critics import encode_views, full_critic_inputs
from pyskick.models.inputs import check_float_tensor


class FullObservabilityActor(nn.Module):
    """Action logits from h plus the whole viewgrid and the true pose (the expert).

    The image encoder belongs to the agent and is deliberately not a submodule (as in
    :class:`pyskick.models.FullObservabilityCritic`): it is absent from ``parameters()`` and
    ``state_dict()``, so the expert's optimiser and checkpoint hold only ``act_fuse`` and
    ``act``.

    Args:
        config: the agent's model config.
        image_encoder: the agent's ``sense_im``, mapping ``[B, C, H, W]`` to
            ``[B, sense_size]``; frozen, so it receives no gradient.
    """

    def __init__(self, config: ModelConfig, image_encoder: nn.Module) -> None:
        super().__init__()
        self.config = config
        self.act_fuse = GridEncoder(config)
        self.act = nn.Sequential(
            *head_layers(config.full_critic_input_size, config.act_size, config.n_actions)
        )
        init_weights_(self.act_fuse, config.init)
        init_weights_(self.act, config.init)
        # object.__setattr__ bypasses nn.Module registration: the encoder stays the agent's.
        object.__setattr__(self, "image_encoder", image_encoder)

    def encode_views(self, grid: Tensor) -> Tensor:
        """Encode every view of whole viewgrids with the agent's image encoder.

        The encoder is frozen, so training encodes each training grid once and reuses the
        result every epoch (:meth:`fuse_views`).

        Args:
            grid: ``[B, N, M, C, H, W]`` normalised views in the absolute (unshifted) frame,
                e.g. :attr:`pyskick.envs.LookAroundEnv.grid`.

        Returns:
            ``[B, V, sense_size]``, views in order v = n * M + m.
        """
        return encode_views(self.config, self.image_encoder, grid)

    def fuse_views(self, features: Tensor) -> Tensor:
        """Fuse per-view encodings ``[B, V, sense_size]`` into grid codes ``[B, grid_size]``."""
        cfg = self.config
        features = check_float_tensor("features", features, (None, cfg.n_views, cfg.sense_size))
        return self.act_fuse(features.reshape(-1, cfg.sense_size))

    def encode_grid(self, grid: Tensor) -> Tensor:
        """Grid codes ``[B, grid_size]`` of whole viewgrids ``[B, N, M, C, H, W]``.

        The grid does not change during an episode, so callers encode it once per episode and
        pass the code to every step's :meth:`forward`.
        """
        return self.fuse_views(self.encode_views(grid))

    def forward(
        self,
        hidden: Tensor,
        proprio: Tensor,
        time: int | Tensor,
        grid_code: Tensor,
        *,
        azimuth: Tensor | None = None,
    ) -> Tensor:
        """Action logits ``[B, A]`` of each sample's current step.

        Args:
            hidden: ``[B, hidden_size]`` the agent's hidden state h.
            proprio: ``[B, P]`` proprioception, as given to the agent.
            time: step index t, an int or ``[B]``.
            grid_code: ``[B, grid_size]`` from :meth:`encode_grid`.
            azimuth: ``[B]`` absolute azimuth index; required unless ``known_azimuth``.

        Raises:
            TypeError: an input is not a floating-point tensor.
            ValueError: an input has the wrong shape or the azimuth is missing.
        """
        cfg = self.config
        batch_size = hidden.shape[0]
        check_float_tensor("hidden", hidden, (None, cfg.hidden_size))
        check_float_tensor("proprio", proprio, (batch_size, cfg.proprio_size))
        check_float_tensor("grid_code", grid_code, (batch_size, cfg.grid_size))
        sides = full_critic_inputs(
            cfg, hidden, proprio, time, azimuth, needed_by="FullObservabilityActor"
        )
        return self.act(torch.cat([sides, grid_code], dim=1))
