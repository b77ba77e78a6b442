"""The batched look-around environment (docs/paper-reference.md §2).

``B`` agents each look at one viewgrid ``[N, M, C, H, W]``: they see one view at a time, move
among neighbouring viewpoints, and after ``T`` glimpses must reconstruct the whole grid. All state
lives in tensors on the grids' device; nothing loops over the batch.

Conventions: view index ``v = n * M + m`` with elevation index ``n`` (0 = highest elevation) and
azimuth index ``m``; time ``t`` counts glimpses from 0, so an episode is ``T`` glimpses and
``T - 1`` actions. Azimuth wraps and elevation clips by default.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple, get_args

import torch
from torch import Tensor

from pyskick.envs.actions import ActionGrid
from pyskick.envs.topology import move_axis, neighbourhood
from pyskick.envs.views import channel_mean_for, normalize_views, parse_channel_mean
from pyskick.errors import UserError, UserTypeError
from pyskick.ops import rotate_viewgrid

StartZeroing = Literal["view", "neighbourhood", "none"]
"""What a sidekick's reward map loses at reset, because the agent already sees the start view:
``"view"`` (the start view only; pyskick's default), ``"neighbourhood"`` (the start's whole
reward-radius neighbourhood, as a visit would) or ``"none"`` (nothing: the authors' rule, under
which returning to the start pays its reward, docs/paper-reference.md §2.8). The default was
chosen on validation (docs/reproduce.md, "The study")."""
START_ZEROING: tuple[str, ...] = get_args(StartZeroing)


class Observation(NamedTuple):
    """What the agent senses at glimpse ``time``.

    Attributes:
        view: ``[B, C, H, W]`` float32, the current view normalised as ``(x - mean_c) / 255``.
        proprio: ``[B, P]`` float32, ``[d_elev, d_azim, elevation]`` plus ``azimuth`` when the
            azimuth is known (``P = 4``). The deltas are the move *commanded* at the last step
            ((0, 0) at t = 0), also when a clipped border kept the camera in place.
        time: the glimpse index t in ``[0, T)``.
        position: ``[B]`` int64 view index ``n * M + m`` of the current view.
    """

    view: Tensor
    proprio: Tensor
    time: int
    position: Tensor


class Step(NamedTuple):
    """Result of :meth:`LookAroundEnv.step`.

    Attributes:
        observation: the observation at the new glimpse.
        reward: ``[B]`` float32 intrinsic (sidekick) reward collected at the new view, raw and
            unscaled (0 without reward maps).
        done: True when the new glimpse is the last one (``time == T - 1``).
    """

    observation: Observation
    reward: Tensor
    done: bool


@dataclass
class _Episode:
    """Tensor state of the current episodes (every tensor on the grids' device)."""

    grid: Tensor  # [B, N, M, C, H, W] float32, normalised, absolute frame
    target: Tensor  # [B, N, M, C, H, W] float32, normalised, start-relative frame
    starts: Tensor  # [B] int64
    positions: Tensor  # [B] int64
    deltas: Tensor  # [B, 2] int64, last commanded (d_elev, d_azim)
    visited: Tensor  # [B, V] bool
    views: Tensor  # [B, T] int64, views[:, :t + 1] visited in order
    actions: Tensor  # [B, T - 1] int64, actions[:, :t] taken
    reward_map: Tensor | None  # [B, V] float32, rewards still to collect
    t: int = 0


class LookAroundEnv:
    """Batched, tensor-native look-around environment.

    Usage::

        env = LookAroundEnv(T=4, channel_mean=[119.16, 107.68, 95.12])
        obs = env.reset(grids, generator=torch.Generator().manual_seed(0))
        while not env.done:
            obs, reward, done = env.step(actions)      # actions [B] int64 in [0, A)
        loss = mse(env.paste_observed(decoded), env.target)

    Args:
        T: the glimpse budget (>= 1); an episode has ``T - 1`` actions.
        action_grid: ``(dN, dM)``, both odd: moves ``|d_elev| <= dN // 2``,
            ``|d_azim| <= dM // 2``, action ``(d_elev + dN // 2) * dM + (d_azim + dM // 2)``.
        wrap_azimuth: azimuth moves wrap around the ring (else they clip).
        wrap_elevation: elevation moves wrap (else they clip, the default).
        known_azimuth: the agent knows its absolute azimuth: the proprioception gets the azimuth
            index and the target stays in the absolute frame.
        reward_radius: Chebyshev radius of the neighbourhood zeroed in the reward map around each
            visited view; use the sidekick's NMS radius (1 for SUN360, 2 for ModelNet).
        start_zeroing: what the reward map loses at reset (:data:`StartZeroing`).
        channel_mean: per-channel mean on the 0–255 scale subtracted before dividing by 255;
            None subtracts nothing (the authors' ``--mean_subtract False``).
    """

    def __init__(
        self,
        T: int = 4,
        *,
        action_grid: ActionGrid | tuple[int, int] = (3, 5),
        wrap_azimuth: bool = True,
        wrap_elevation: bool = False,
        known_azimuth: bool = False,
        reward_radius: int = 1,
        start_zeroing: StartZeroing = "view",
        channel_mean: Sequence[float] | Tensor | None = None,
    ) -> None:
        if start_zeroing not in START_ZEROING:
            raise UserError(
                f"start_zeroing must be one of {', '.join(START_ZEROING)}, got {start_zeroing!r}"
            )
        for name, value in (("T", T), ("reward_radius", reward_radius)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise UserTypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
        flags = (
            ("wrap_azimuth", wrap_azimuth), ("wrap_elevation", wrap_elevation),
            ("known_azimuth", known_azimuth),
        )  # fmt: skip
        for name, value in flags:
            # "false" is truthy: a flag that is not a bool is refused, not converted.
            if not isinstance(value, bool):
                raise UserTypeError(f"{name} must be a bool, got {type(value).__name__} {value!r}")
        if T < 1:
            raise UserError(f"T must be >= 1 (the number of glimpses), got {T}")
        if reward_radius < 0:
            raise UserError(f"reward_radius must be >= 0, got {reward_radius}")
        self.T = T
        self.action_grid = ActionGrid.of(action_grid)
        self.wrap_azimuth = bool(wrap_azimuth)
        self.wrap_elevation = bool(wrap_elevation)
        self.known_azimuth = bool(known_azimuth)
        self.reward_radius = reward_radius
        self.start_zeroing: StartZeroing = start_zeroing
        self.channel_mean = None if channel_mean is None else parse_channel_mean(channel_mean)
        self._episode: _Episode | None = None
        self._deltas_cache: dict[torch.device, Tensor] = {}
        self._near_cache: dict[tuple[int, int, torch.device], Tensor] = {}
        self._moves_cache: dict[tuple[int, int, torch.device], Tensor] = {}
        self._mean_cache: dict[tuple[int, torch.device], Tensor] = {}

    # ----------------------------------------------------------------- sizes
    @property
    def n_actions(self) -> int:
        """A = dN * dM."""
        return self.action_grid.n_actions

    @property
    def proprio_dim(self) -> int:
        """P: 3, or 4 when the azimuth is known."""
        return 4 if self.known_azimuth else 3

    # --------------------------------------------------------------- episode
    def reset(
        self,
        grids: Tensor,
        *,
        starts: Tensor | None = None,
        generator: torch.Generator | None = None,
        reward_maps: Tensor | None = None,
        check_values: bool = True,
    ) -> Observation:
        """Start ``B`` episodes, one per viewgrid.

        Args:
            grids: ``[B, N, M, C, H, W]`` uint8 or float32 raw views on the 0–255 scale; the
                episodes run on its device.
            starts: ``[B]`` integer start view indices in ``[0, N * M)``; None draws them
                uniformly with ``generator`` (on the generator's device, then moved).
            generator: random source of the starts; None uses torch's default generator.
            reward_maps: ``[B, N, M]`` float32 per-view sidekick rewards (copied); the start
                view's neighbourhood (or the start view, or nothing: ``start_zeroing``) is
                zeroed at once.
            check_values: check the values of ``starts`` (range) and ``reward_maps``
                (finite). False trusts them (their shapes, dtypes and devices are still
                checked): reading values waits for a GPU, so the training loop, whose starts
                are drawn in range and whose maps were checked when loaded, skips it.

        Returns:
            The observation at t = 0.
        """
        grids = _check_grids(grids)
        B, N, M, C = grids.shape[:4]
        device = grids.device
        mean = self._mean(C, device)
        V = N * M
        if starts is None:
            gen_device = generator.device if generator is not None else torch.device("cpu")
            starts = torch.randint(V, (B,), generator=generator, device=gen_device)
            if starts.device != device:
                starts = starts.to(device)
        else:
            starts = _check_indices("starts", starts, B, V, device, check_values=check_values)
        grid = normalize_views(grids, mean).contiguous()
        # Target slot k holds absolute azimuth (start + k) when the azimuth is unknown (Δ0 of the
        # paper). With it known (and elevation always known) the target is the absolute grid, not
        # the authors' all-zeros target (docs/paper-reference.md §8.23).
        target = grid if self.known_azimuth else rotate_viewgrid(grid, starts % M)
        reward_map = None
        if reward_maps is not None:
            reward_map = checked_reward_maps(
                reward_maps, B, N, M, device, check_values=check_values
            ).clone()
            # The start view is seen, so its reward is spent (the authors never zero it,
            # docs/paper-reference.md §8.12: start_zeroing="none").
            if self.start_zeroing == "neighbourhood":
                reward_map.masked_fill_(self._near(N, M, device)[starts], 0.0)
            elif self.start_zeroing == "view":
                reward_map.scatter_(1, starts[:, None], 0.0)
        # scatter_, not visited[rows, starts] = True: a number written at tensor indices is
        # copied from the host, which a CUDA-graph capture forbids (pyskick.training.syncs).
        visited = torch.zeros(B, V, dtype=torch.bool, device=device)
        visited.scatter_(1, starts[:, None], True)
        views = torch.zeros(B, self.T, dtype=torch.int64, device=device)
        views[:, 0] = starts
        self._episode = _Episode(
            grid=grid,
            target=target,
            starts=starts,
            positions=starts.clone(),
            deltas=torch.zeros(B, 2, dtype=torch.int64, device=device),
            visited=visited,
            views=views,
            actions=torch.zeros(B, self.T - 1, dtype=torch.int64, device=device),
            reward_map=reward_map,
        )
        return self.observe()

    def step(self, actions: Tensor, *, check_values: bool = True) -> Step:
        """Move every camera by its action and collect the intrinsic rewards.

        Args:
            actions: ``[B]`` integer tensor on the episodes' device, values in ``[0, A)``.
            check_values: check that the actions lie in ``[0, A)``; False trusts them (see
                :meth:`reset`).

        Returns:
            The new observation, the ``[B]`` float32 rewards collected and whether the budget
            of ``T`` glimpses is now spent.

        Raises:
            RuntimeError: before :meth:`reset`, or when the episode already had ``T`` glimpses.
            ValueError: actions of the wrong shape, dtype, device or range.
        """
        ep = self._require_episode()
        if ep.t >= self.T - 1:
            raise RuntimeError(
                f"the episode has used its budget of T={self.T} glimpses; call reset() first"
            )
        B, N, M = ep.grid.shape[:3]
        actions = self._check_actions(actions, B, ep.grid.device, check_values=check_values)
        deltas = self._deltas(ep.grid.device)[actions]  # [B, 2]
        positions = self._moves(N, M, ep.grid.device)[ep.positions, actions]
        if ep.reward_map is None:
            reward = torch.zeros(B, dtype=torch.float32, device=ep.grid.device)
        else:
            reward = ep.reward_map.gather(1, positions[:, None]).squeeze(1)
            ep.reward_map.masked_fill_(self._near(N, M, ep.grid.device)[positions], 0.0)
        ep.visited.scatter_(1, positions[:, None], True)
        ep.t += 1
        ep.views[:, ep.t] = positions
        ep.actions[:, ep.t - 1] = actions
        ep.positions = positions
        ep.deltas = deltas
        return Step(self.observe(), reward, self.done)

    def observe(self) -> Observation:
        """The observation at the current glimpse (the same as the last reset/step returned)."""
        ep = self._require_episode()
        B, N, M = ep.grid.shape[:3]
        # One gather, not an arange and an index: a GPU's step is bound by its kernels' count.
        views = ep.grid.view(B, N * M, -1)
        index = ep.positions[:, None, None].expand(B, 1, views.shape[2])
        view = views.gather(1, index).view(B, *ep.grid.shape[3:])
        parts = [ep.deltas, (ep.positions // M)[:, None]]
        if self.known_azimuth:
            parts.append((ep.positions % M)[:, None])
        proprio = torch.cat(parts, dim=1).to(torch.float32)
        return Observation(view, proprio, ep.t, ep.positions.clone())

    # ------------------------------------------------------------ evaluation
    def paste_observed(self, decoded: Tensor) -> Tensor:
        """Overwrite every view visited so far with its true normalised view.

        The authors paste at evaluation (docs/paper-reference.md §2.7).

        Args:
            decoded: ``[B, N, M, C, H, W]`` floating reconstruction in the target's frame
                (start-relative: slot ``(n, (m - start_m) mod M)`` holds view ``(n, m)``, unless
                the azimuth is known).

        Returns:
            A new tensor of ``decoded``'s dtype; gradients flow to the slots left unpasted.
        """
        ep = self._require_episode()
        if not isinstance(decoded, Tensor):
            raise UserTypeError(f"decoded must be a torch.Tensor, got {type(decoded).__name__}")
        if not decoded.is_floating_point():
            raise UserTypeError(f"decoded must be a floating tensor, got {decoded.dtype}")
        if decoded.shape != ep.target.shape:
            raise UserError(
                f"decoded must have shape {list(ep.target.shape)} (the target's), "
                f"got {list(decoded.shape)}"
            )
        if decoded.device != ep.target.device:
            raise UserError(
                f"decoded must be on {ep.target.device} (the episodes' device), "
                f"got {decoded.device}"
            )
        return paste(decoded, ep.target, self.observed_slots())

    def observed_slots(self) -> Tensor:
        """``[B, N, M]`` bool: the target's slots visited so far, those
        :meth:`paste_observed` overwrites now (what a caller that pastes later keeps: a new
        tensor, which the episode's next steps leave alone)."""
        ep = self._require_episode()
        slots = self._relative(ep.visited.view(ep.grid.shape[:3]), ep)
        # With a known azimuth the frames agree and ``_relative`` returns the episode's own
        # visits, which every step updates in place.
        return slots.clone() if self.known_azimuth else slots

    def to_absolute(self, grid_rel: Tensor) -> Tensor:
        """Take a grid from the target's frame back to the absolute frame (for display).

        Args:
            grid_rel: ``[B, N, M, C, H, W]`` uint8 or float32 in the target's frame.

        Returns:
            A new tensor where ``out[b, n, m]`` is view ``(n, m)``; detached.
        """
        ep = self._require_episode()
        if not isinstance(grid_rel, Tensor):
            raise UserTypeError(f"grid_rel must be a torch.Tensor, got {type(grid_rel).__name__}")
        if grid_rel.shape[:3] != ep.grid.shape[:3] or grid_rel.dim() != 6:
            raise UserError(
                f"grid_rel must have shape [{', '.join(map(str, ep.grid.shape[:3]))}, C, H, W], "
                f"got {list(grid_rel.shape)}"
            )
        if self.known_azimuth:
            return grid_rel.detach().clone()
        M = ep.grid.shape[2]
        starts = (ep.starts % M).to(grid_rel.device)
        return rotate_viewgrid(grid_rel.detach(), starts, inverse=True)

    # ----------------------------------------------------------------- state
    @property
    def done(self) -> bool:
        """True once the episode has had its ``T`` glimpses."""
        return self._require_episode().t >= self.T - 1

    @property
    def t(self) -> int:
        """The current glimpse index."""
        return self._require_episode().t

    @property
    def device(self) -> torch.device:
        """The episodes' device (the device of the grids given to :meth:`reset`)."""
        return self._require_episode().grid.device

    @property
    def grid(self) -> Tensor:
        """``[B, N, M, C, H, W]`` float32 normalised grids, absolute frame (full observability)."""
        return self._require_episode().grid

    @property
    def target(self) -> Tensor:
        """``[B, N, M, C, H, W]`` float32 target (start-relative unless the azimuth is known)."""
        return self._require_episode().target

    @property
    def starts(self) -> Tensor:
        """``[B]`` int64 start view indices."""
        return self._require_episode().starts

    @property
    def positions(self) -> Tensor:
        """``[B]`` int64 current view indices."""
        return self._require_episode().positions

    @property
    def visited(self) -> Tensor:
        """``[B, V]`` bool, views seen so far (absolute view indices)."""
        return self._require_episode().visited

    @property
    def visited_views(self) -> Tensor:
        """``[B, t + 1]`` int64 view indices in the order they were seen (repeats included)."""
        ep = self._require_episode()
        return ep.views[:, : ep.t + 1]

    @property
    def actions_taken(self) -> Tensor:
        """``[B, t]`` int64 actions taken so far."""
        ep = self._require_episode()
        return ep.actions[:, : ep.t]

    @property
    def reward_map(self) -> Tensor | None:
        """``[B, N, M]`` float32 rewards still collectable, or None without reward maps."""
        ep = self._require_episode()
        if ep.reward_map is None:
            return None
        return ep.reward_map.view(ep.grid.shape[:3])

    # --------------------------------------------------------------- helpers
    def _require_episode(self) -> _Episode:
        if self._episode is None:
            raise RuntimeError("no episode: call reset() first")
        return self._episode

    def _relative(self, per_view: Tensor, ep: _Episode) -> Tensor:
        """``[B, N, M]`` per-view values in the target's frame (slot k = azimuth start + k)."""
        if self.known_azimuth:
            return per_view
        B, N, M = per_view.shape
        slots = torch.arange(M, device=per_view.device)
        azimuth = (slots[None, :] + (ep.starts % M)[:, None]).remainder(M)  # [B, M]
        return per_view.gather(2, azimuth[:, None, :].expand(B, N, M))

    def _deltas(self, device: torch.device) -> Tensor:
        if device not in self._deltas_cache:
            self._deltas_cache[device] = self.action_grid.deltas(device)
        return self._deltas_cache[device]

    def _moves(self, N: int, M: int, device: torch.device) -> Tensor:
        """``[V, A]`` int64: the view each action leads to from each view (:func:`move_axis`
        on both axes), so that a step moves every camera with one lookup."""
        key = (N, M, device)
        if key not in self._moves_cache:
            deltas = self._deltas(device)  # [A, 2]
            views = torch.arange(N * M, device=device)[:, None]
            n = move_axis(views // M, deltas[None, :, 0], N, wrap=self.wrap_elevation)
            m = move_axis(views % M, deltas[None, :, 1], M, wrap=self.wrap_azimuth)
            self._moves_cache[key] = n * M + m
        return self._moves_cache[key]

    def _near(self, N: int, M: int, device: torch.device) -> Tensor:
        key = (N, M, device)
        if key not in self._near_cache:
            self._near_cache[key] = neighbourhood(
                N,
                M,
                self.reward_radius,
                wrap_elevation=self.wrap_elevation,
                wrap_azimuth=self.wrap_azimuth,
                device=device,
            )
        return self._near_cache[key]

    def _mean(self, channels: int, device: torch.device) -> Tensor:
        """The ``[C]`` channel mean on ``device``, copied there once."""
        key = (channels, device)
        if key not in self._mean_cache:
            self._mean_cache[key] = channel_mean_for(self.channel_mean, channels, device)
        return self._mean_cache[key]

    def _check_actions(
        self, actions: object, B: int, device: torch.device, *, check_values: bool = True
    ) -> Tensor:
        if not isinstance(actions, Tensor):
            raise UserError(
                f"actions must be a [{B}] integer torch.Tensor, got {type(actions).__name__}"
            )
        if actions.dtype == torch.bool or actions.is_floating_point() or actions.is_complex():
            raise UserError(f"actions must have an integer dtype, got {actions.dtype}")
        if actions.shape != (B,):
            raise UserError(f"actions must have shape [{B}], got {list(actions.shape)}")
        if actions.device != device:
            raise UserError(
                f"actions must be on {device} (the episodes' device), got {actions.device}"
            )
        if actions.dtype != torch.int64:
            actions = actions.to(torch.int64)
        if not check_values:
            return actions
        bad = (actions < 0) | (actions >= self.n_actions)
        if bool(bad.any()):
            where = bad.nonzero().flatten()[:5].tolist()
            values = actions[bad][:5].tolist()
            raise UserError(
                f"actions must lie in [0, {self.n_actions}), got {values} at batch index {where}"
            )
        return actions


def paste(decoded: Tensor, target: Tensor, slots: Tensor) -> Tensor:
    """``decoded`` with the ``slots`` taken from ``target`` (:meth:`LookAroundEnv.paste_observed`).

    Args:
        decoded: ``[..., B, N, M, C, H, W]`` floating reconstructions (T glimpses' with a
            leading T).
        target: ``[B, N, M, C, H, W]`` the target.
        slots: ``[..., B, N, M]`` bool, the slots to paste (``[T, B, N, M]``: each glimpse's).

    Returns:
        A new tensor of ``decoded``'s dtype; gradients flow to the slots left unpasted.
    """
    return torch.where(slots[..., None, None, None], target.to(decoded.dtype), decoded)


def _check_grids(grids: object) -> Tensor:
    if not isinstance(grids, Tensor):
        raise UserTypeError(f"grids must be a torch.Tensor, got {type(grids).__name__}")
    if grids.dtype not in (torch.uint8, torch.float32):
        raise UserTypeError(f"grids must be uint8 or float32 (0–255 scale), got {grids.dtype}")
    if grids.dim() != 6 or 0 in grids.shape:
        raise UserError(
            f"grids must have shape [B, N, M, C, H, W] with no empty axis, got {list(grids.shape)}"
        )
    return grids.detach()


def _check_indices(
    name: str, t: object, B: int, upper: int, device: torch.device, *, check_values: bool = True
) -> Tensor:
    if not isinstance(t, Tensor):
        raise UserTypeError(f"{name} must be a [{B}] integer torch.Tensor, got {type(t).__name__}")
    if t.dtype == torch.bool or t.is_floating_point() or t.is_complex():
        raise UserTypeError(f"{name} must have an integer dtype, got {t.dtype}")
    if t.shape != (B,):
        raise UserError(f"{name} must have shape [{B}], got {list(t.shape)}")
    if t.device != device or t.dtype != torch.int64:
        t = t.to(device=device, dtype=torch.int64)
    if check_values and B and not bool(((t >= 0) & (t < upper)).all()):
        raise UserError(
            f"{name} must lie in [0, {upper}) (view index n * M + m), "
            f"got values in [{int(t.min())}, {int(t.max())}]"
        )
    return t


def checked_reward_maps(
    maps: object, B: int, N: int, M: int, device: torch.device, *, check_values: bool = True
) -> Tensor:
    """A sidekick's ``[B, N, M]`` float32 reward maps on ``device``, checked (their values
    too with ``check_values``: a read of the device), as ``[B, N * M]``."""
    if not isinstance(maps, Tensor):
        raise UserTypeError(f"reward_maps must be a torch.Tensor, got {type(maps).__name__}")
    if maps.dtype != torch.float32:
        raise UserTypeError(f"reward_maps must be float32, got {maps.dtype}")
    if maps.shape != (B, N, M):
        raise UserError(f"reward_maps must have shape [{B}, {N}, {M}], got {list(maps.shape)}")
    if maps.device != device:
        raise UserError(f"reward_maps must be on {device} (the grids' device), got {maps.device}")
    if check_values and not bool(torch.isfinite(maps).all()):
        raise UserError("reward_maps contains NaN or infinite values")
    return maps.detach().reshape(B, N * M)
