"""Task rewards computed inside the Gymnasium environment (docs/environment.md, "Task rewards").

A :class:`TaskReward` sees the batched episode as it runs and pays one reward per move:

- :class:`MapsReward`: the sidekick reward maps the environment already collects (0 without
  maps).
- :class:`ReconstructionReward`: a frozen completion model aggregates the views the agent has
  seen and decodes the whole grid; the error of the decoded grid (observed views pasted, as at
  evaluation) to the start-relative target is the paper's task loss. ``"final"`` pays
  ``-1000 · MSE`` on the last move (the ``avg`` metric's scale, sign flipped) and 0 before;
  ``"improvement"`` pays ``1000 · (MSE_before - MSE_after)`` on every move, which sums to the
  final reward plus ``1000 · MSE`` after the first glimpse (a constant the agent cannot change).
- :class:`CoverageReward`: the demonstration sidekick's objective (docs/paper-reference.md
  §5.5) ``Cov(S) = sum_t min(sum_{s in unique(S)} U[s, t], 1) / V`` of the views seen, from
  coverage matrices ``U`` computed with full observability (privileged); each move pays the
  gain in ``Cov``.

These classes take models and matrices already built; loading or training them is
:mod:`pyskick.training.task_models`' job (a higher layer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol

import torch
from torch import Tensor

from pyskick.envs.lookaround import LookAroundEnv, Observation
from pyskick.envs.views import check_mean_given
from pyskick.errors import UserError

if TYPE_CHECKING:
    from pyskick.models import CompletionPolicy

ReconstructionMode = Literal["final", "improvement"]
RECONSTRUCTION_MODES: tuple[str, ...] = ("final", "improvement")

ERROR_SCALE = 1000.0
"""Reconstruction errors are reported ×1000 (the paper's tables and pyskick's metrics)."""


class TaskReward(Protocol):
    """What an in-environment reward does at reset and at each move."""

    name: str

    def reset(self, env: LookAroundEnv, indices: Tensor, obs: Observation) -> None:
        """A new batch of episodes started on viewgrid rows ``indices`` ``[B]``."""

    def step(self, env: LookAroundEnv, obs: Observation, env_reward: Tensor) -> Tensor:
        """``[B]`` float32 rewards of the move just made (``env_reward``: the map rewards)."""

    def reconstruction(self) -> Tensor | None:
        """``[B, N, M, C, H, W]`` the current reconstruction in the target's frame, or None."""


class MapsReward:
    """The sidekick reward maps given to the environment (``reward_maps``; 0 without them)."""

    name = "maps"

    def reset(self, env: LookAroundEnv, indices: Tensor, obs: Observation) -> None:
        """Nothing to prepare: the environment holds the maps."""

    def step(self, env: LookAroundEnv, obs: Observation, env_reward: Tensor) -> Tensor:
        """The raw map reward of the view reached."""
        return env_reward.to(torch.float32)

    def reconstruction(self) -> Tensor | None:
        """No model, no reconstruction."""
        return None


class ReconstructionReward:
    """Reward from a frozen completion model's reconstruction of the views seen.

    Args:
        policy: a :class:`~pyskick.models.CompletionPolicy` (its ``config`` must match the
            grids), used in eval mode without gradients on the environment's device.
        mode: ``"final"`` or ``"improvement"`` (module docstring).

    Raises:
        ValueError: an unknown mode.
    """

    name = "reconstruction"

    def __init__(self, policy: CompletionPolicy, mode: ReconstructionMode = "final") -> None:
        if mode not in RECONSTRUCTION_MODES:
            raise UserError(
                f"reward_mode must be one of {', '.join(RECONSTRUCTION_MODES)}, got {mode!r}"
            )
        self.policy = policy.eval()
        self.mode = mode
        self._env: LookAroundEnv | None = None
        self._state: tuple[Tensor, Tensor] | None = None
        self._hidden: Tensor | None = None  # [B, hidden] the aggregated glimpses
        self._decoded: Tensor | None = None  # the pasted reconstruction of _hidden, once decoded
        self._error_now: Tensor | None = None  # "improvement": the MSE before the next move

    def check_grids(
        self, shape: tuple[int, ...], known_azimuth: bool, *, mean_subtracted: bool
    ) -> None:
        """Refuse grids ``[n, N, M, C, H, W]``, a frame or a normalisation (``mean_subtracted``:
        the env subtracts a channel mean) the model was not built for."""
        cfg = self.policy.config
        expected = cfg.grid_shape
        if tuple(shape[1:]) != expected:
            raise UserError(
                f"the reward model reconstructs [N, M, C, H, W] = {list(expected)} but the "
                f"environment's viewgrids are {list(shape[1:])}"
            )
        if mean_subtracted and not cfg.mean_subtract:
            raise UserError(
                "the reward model was trained without mean subtraction but the environment "
                "subtracts a channel mean: pass channel_mean=[0.0, ...]"
            )
        check_mean_given(cfg.mean_subtract, mean_subtracted)
        if bool(cfg.known_azimuth) != bool(known_azimuth):
            raise UserError(
                f"the reward model has known_azimuth={cfg.known_azimuth} but the environment "
                f"has known_azimuth={known_azimuth}"
            )

    @torch.no_grad()
    def _glimpse(self, env: LookAroundEnv, obs: Observation) -> None:
        """Aggregate the current view (decoding is left until an error or picture is needed:
        the decoder costs most of a glimpse, and ``"final"`` needs it once per episode)."""
        M = env.grid.shape[2]
        out = self.policy(
            obs.view, obs.proprio, obs.time, self._state, azimuth=obs.position % M, decode=False
        )
        self._state = out.state
        self._hidden = out.hidden
        self._decoded = None

    @torch.no_grad()
    def _error(self, env: LookAroundEnv) -> Tensor:
        """``[B]`` MSE of the current pasted reconstruction to the target."""
        decoded = self._decode(env)
        return (decoded - env.target).pow(2).flatten(1).mean(1)

    def _decode(self, env: LookAroundEnv) -> Tensor:
        if self._decoded is None:
            assert self._hidden is not None  # reset ran first
            with torch.no_grad():
                self._decoded = env.paste_observed(self.policy.decode(self._hidden))
        return self._decoded

    def reset(self, env: LookAroundEnv, indices: Tensor, obs: Observation) -> None:
        """Forget the last episodes and take in the first glimpse."""
        self._env = env
        if next(self.policy.parameters()).device != env.device:
            self.policy.to(env.device)  # once: moving a module walks all its tensors
        self._state = None
        self._glimpse(env, obs)
        self._error_now = self._error(env) if self.mode == "improvement" else None

    def step(self, env: LookAroundEnv, obs: Observation, env_reward: Tensor) -> Tensor:
        """Take in the new glimpse; pay by :attr:`mode`."""
        self._glimpse(env, obs)
        if self.mode == "improvement":
            assert self._error_now is not None
            error = self._error(env)
            reward = ERROR_SCALE * (self._error_now - error)
            self._error_now = error
        elif env.done:
            reward = -ERROR_SCALE * self._error(env)
        else:
            reward = torch.zeros(obs.view.shape[0], device=env.device)
        return reward.to(torch.float32)

    def reconstruction(self) -> Tensor | None:
        """The current pasted reconstruction ``[B, N, M, C, H, W]`` (target frame), or None
        before the first reset."""
        if self._env is None or self._hidden is None:
            return None
        return self._decode(self._env)


class CoverageReward:
    """The demonstration sidekick's coverage objective of the views seen (privileged).

    Args:
        coverage: ``[n, V, V]`` utilities ``U[row, source, target]`` in [0, 1] of every viewgrid
            row of the environment (:func:`pyskick.sidekicks.coverage.one_view_coverage`),
            views indexed ``v = n * M + m`` in the absolute frame.

    Raises:
        ValueError: not a ``[n, V, V]`` finite floating tensor.
    """

    name = "coverage"

    def __init__(self, coverage: Tensor) -> None:
        coverage = torch.as_tensor(coverage)
        if (
            coverage.dim() != 3
            or coverage.shape[1] != coverage.shape[2]
            or not coverage.is_floating_point()
            or not bool(torch.isfinite(coverage).all())
        ):
            raise UserError(
                f"coverage must be a finite float [n, V, V] tensor, got {coverage.dtype} "
                f"{list(coverage.shape)}"
            )
        self.coverage = coverage.to(torch.float64).cpu()
        self._utilities: Tensor | None = None
        self._summed: Tensor | None = None
        self._seen: Tensor | None = None

    def check_grids(self, shape: tuple[int, ...]) -> None:
        """Refuse grids ``[n, N, M, ...]`` that the matrices do not describe."""
        n, N, M = shape[:3]
        if tuple(self.coverage.shape) != (n, N * M, N * M):
            raise UserError(
                f"coverage must be [{n}, {N * M}, {N * M}] for these grids, got "
                f"{list(self.coverage.shape)}"
            )

    def _value(self) -> Tensor:
        assert self._summed is not None
        return self._summed.clamp(max=1.0).sum(1) / self._summed.shape[1]

    def reset(self, env: LookAroundEnv, indices: Tensor, obs: Observation) -> None:
        """Start each episode's coverage with its start view."""
        self._utilities = self.coverage[indices.cpu()]  # [B, V, V]
        position = obs.position.cpu()
        rows = torch.arange(position.shape[0])
        self._summed = self._utilities[rows, position].clone()
        self._seen = torch.zeros(self._summed.shape, dtype=torch.bool)
        self._seen[rows, position] = True

    def step(self, env: LookAroundEnv, obs: Observation, env_reward: Tensor) -> Tensor:
        """The gain in coverage from the view reached (0 for a view seen before)."""
        assert self._utilities is not None
        assert self._summed is not None
        assert self._seen is not None
        before = self._value()
        position = obs.position.cpu()
        rows = torch.arange(position.shape[0])
        new = ~self._seen[rows, position]
        self._summed += self._utilities[rows, position] * new[:, None]
        self._seen[rows, position] = True
        return (self._value() - before).to(torch.float32).to(env_reward.device)

    def reconstruction(self) -> Tensor | None:
        """The coverage reward decodes nothing."""
        return None
