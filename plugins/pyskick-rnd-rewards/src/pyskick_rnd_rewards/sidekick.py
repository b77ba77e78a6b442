"""Random reward maps shaped like the rew sidekick's: the paper's rnd-rewards baseline.

The authors' version is in docs/paper-reference.md §5.3.

The rew sidekick pays rewards at k NMS peaks of one-view informativeness. This baseline keeps
everything but the information: per training viewgrid it draws k centres uniformly over the
N×M grid (independently, so two may coincide) and spreads ``1 / 4^d`` around each one over
Chebyshev distance ``d <= radius``, azimuth wrapping and elevation clipping as the camera moves.
The sum is clipped at 1, giving ``[0, 1]`` maps like the rew sidekick's, with the same reward
scale and decay schedule: both sidekicks subclass :class:`pyskick.sidekicks.RewardMaps`, which
pays the maps out and decays the scale.

Each viewgrid's centres come from a ``torch.Generator`` seeded by the run's seed and a hash of
that viewgrid's pixels, so a map depends on nothing else: not on the sample's position, the
order of the data or which rank scores which slice (the sidekick stays ``shardable``).
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch
from torch import Tensor

from pyskick.sidekicks import RewardMaps


def _grid_seed(grid: Tensor, seed: int) -> int:
    """A 63-bit generator seed from ``seed`` and the bytes of one viewgrid."""
    key = seed.to_bytes(8, "little", signed=True)
    digest = hashlib.blake2b(grid.contiguous().numpy(), digest_size=8, key=key).digest()
    return int.from_bytes(digest, "little") >> 1


def draw_centres(grids: Tensor, *, seed: int, k: int) -> Tensor:
    """k uniform reward centres per viewgrid.

    Args:
        grids: ``[n, N, M, C, H, W]`` viewgrids (CPU); only their bytes and N, M are used.
        seed: the run's seed.
        k: centres per viewgrid.

    Returns:
        ``[n, k, 2]`` int64 ``(elevation, azimuth)`` indices; row i depends only on ``seed``
        and ``grids[i]``.
    """
    if grids.ndim != 6:
        raise ValueError(f"grids must be [n, N, M, C, H, W], got shape {tuple(grids.shape)}")
    N, M = grids.shape[1:3]
    centres = torch.empty(len(grids), k, dtype=torch.int64)
    for i, grid in enumerate(grids.cpu()):
        generator = torch.Generator().manual_seed(_grid_seed(grid, seed))
        centres[i] = torch.randint(N * M, (k,), generator=generator)
    return torch.stack((centres // M, centres % M), dim=-1)


def spread_maps(centres: Tensor, *, N: int, M: int, radius: int) -> Tensor:
    """Reward maps with ``1 / 4^d`` around every centre, summed and clipped at 1.

    ``d`` is the Chebyshev distance on the camera's grid: azimuth wraps (the shorter way round),
    elevation does not. Cells farther than ``radius`` from every centre get 0.

    Args:
        centres: ``[n, k, 2]`` int64 ``(elevation, azimuth)`` indices.
        N: elevations of the grid.
        M: azimuths of the grid.
        radius: spread radius (the rew sidekick's NMS radius).

    Returns:
        ``[n, N, M]`` float32 in ``[0, 1]``.
    """
    elevation = (torch.arange(N) - centres[..., 0:1]).abs()  # [n, k, N]
    azimuth = (torch.arange(M) - centres[..., 1:2]).abs()  # [n, k, M]
    azimuth = torch.minimum(azimuth, M - azimuth)
    d = torch.maximum(elevation[..., :, None], azimuth[..., None, :])  # [n, k, N, M]
    bonus = torch.where(d <= radius, 0.25 ** d.float(), 0.0)
    return bonus.sum(1).clamp_max(1.0)


def random_reward_maps(grids: Tensor, *, seed: int, k: int, radius: int) -> Tensor:
    """``[n, N, M]`` float32 rnd-rewards maps of ``grids`` ``[n, N, M, C, H, W]``."""
    N, M = grids.shape[1:3]
    return spread_maps(draw_centres(grids, seed=seed, k=k), N=N, M=M, radius=radius)


class RandomRewardSidekick(RewardMaps):
    """rnd-rewards: random maps with the rew sidekick's peaks, spread and schedule.

    Only the maps differ from the rew sidekick's: loading them, the reward scale, its decay and
    the checkpointed state come from :class:`~pyskick.sidekicks.RewardMaps`, so both
    sidekicks pay rewards on the same schedule. No model is needed.

    Args:
        seed: seeds the maps (with each viewgrid's content).
        k: centres per viewgrid (the rew sidekick's NMS peaks).
        radius: spread radius; also the environment's reward-zeroing radius.
        **schedule: ``scale``, ``decay_every``, ``decay_factor`` of the reward scale
            (:class:`~pyskick.sidekicks.RewardMaps`' defaults when omitted).
    """

    def __init__(self, *, seed: int, k: int = 4, radius: int = 1, **schedule: Any) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
            raise ValueError(f"rnd-rewards needs a seed in [0, 2**63), got {seed!r}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"rnd-rewards needs k >= 1 centres, got {k!r}")
        super().__init__(radius=radius, **schedule)
        self.seed, self.k = seed, k
        self.options = {**self.options, "k": k}

    def score_options(self, T: int) -> dict[str, Any]:
        """The seed and the map shape: the maps depend on nothing else (not on T)."""
        return {"seed": self.seed, "k": self.k, "radius": self.radius}

    def compute_scores(self, grids: Tensor, *, T: int, device: torch.device) -> dict[str, Tensor]:
        """``maps``: the ``[n, N, M]`` random reward maps."""
        return {"maps": random_reward_maps(grids, seed=self.seed, k=self.k, radius=self.radius)}
