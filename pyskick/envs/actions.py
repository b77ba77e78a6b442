"""The discrete action set: a ``dN x dM`` neighbourhood of camera moves.

The authors' action indices are in docs/paper-reference.md §2.3.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from pyskick.errors import UserError, UserTypeError


@dataclass(frozen=True)
class ActionGrid:
    """Camera moves ``(d_elev, d_azim)``, ``|d_elev| <= dN // 2`` and ``|d_azim| <= dM // 2``.

    Action index ``(d_elev + elevation // 2) * azimuth + (d_azim + azimuth // 2)``: elevation outer,
    azimuth inner. With the paper's ``(3, 5)`` there are 15 actions, 0 = (-1, -2), 7 = (0, 0)
    ("stay", always legal) and 14 = (+1, +2).

    Attributes:
        elevation: dN, the number of elevation moves (odd, >= 1).
        azimuth: dM, the number of azimuth moves (odd, >= 1).
    """

    elevation: int = 3
    azimuth: int = 5

    def __post_init__(self) -> None:
        for name, value in (("elevation", self.elevation), ("azimuth", self.azimuth)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise UserTypeError(
                    f"ActionGrid: {name} must be an int, got {type(value).__name__} {value!r}"
                )
            if value < 1 or value % 2 == 0:
                raise UserError(f"ActionGrid: {name} must be odd and >= 1, got {value}")

    @classmethod
    def of(cls, grid: ActionGrid | tuple[int, int] | list[int]) -> ActionGrid:
        """Build from an ``ActionGrid`` or a pair ``(dN, dM)``."""
        if isinstance(grid, ActionGrid):
            return grid
        if not (isinstance(grid, tuple | list) and len(grid) == 2):
            raise UserTypeError(f"action_grid must be a pair (dN, dM), got {grid!r}")
        return cls(grid[0], grid[1])

    @property
    def n_actions(self) -> int:
        """A = dN * dM."""
        return self.elevation * self.azimuth

    @property
    def stay(self) -> int:
        """Index of the move (0, 0)."""
        return self.n_actions // 2

    def index(self, d_elev: int, d_azim: int) -> int:
        """Action index of the move ``(d_elev, d_azim)``."""
        he, ha = self.elevation // 2, self.azimuth // 2
        if not (-he <= d_elev <= he and -ha <= d_azim <= ha):
            raise UserError(
                f"move ({d_elev}, {d_azim}) is outside the action grid "
                f"[-{he}, {he}] x [-{ha}, {ha}]"
            )
        return (d_elev + he) * self.azimuth + (d_azim + ha)

    def delta(self, action: int) -> tuple[int, int]:
        """The move ``(d_elev, d_azim)`` of an action index."""
        if not 0 <= action < self.n_actions:
            raise UserError(f"action must lie in [0, {self.n_actions}), got {action}")
        return (
            action // self.azimuth - self.elevation // 2,
            action % self.azimuth - self.azimuth // 2,
        )

    def deltas(self, device: torch.device | str = "cpu") -> Tensor:
        """Every action's move as an ``[A, 2]`` int64 table of ``(d_elev, d_azim)`` rows."""
        actions = torch.arange(self.n_actions, device=device)
        return torch.stack(
            (
                actions // self.azimuth - self.elevation // 2,
                actions % self.azimuth - self.azimuth // 2,
            ),
            dim=1,
        )
