"""Training the expert by REINFORCE and dumping its greedy trajectories.

The authors' procedure is in docs/paper-reference.md §5.7.

The expert drives the one-view agent: at every glimpse the agent (frozen Sense, Fuse, Aggregate
and Decode, BatchNorm in eval mode) observes the current view and updates its hidden state h;
the expert (:class:`~pyskick_expert_clone.expert.FullObservabilityActor`) picks the next motion
from h, the true pose, t and the whole viewgrid. After ``T`` glimpses the agent's
reconstruction, observed views pasted as at evaluation, is scored: the episode's only reward is
``-MSE``. The expert learns by REINFORCE with the authors' cumulative average baseline and
entropy bonus; nothing of the agent changes.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import Tensor

from pyskick.envs import LookAroundEnv, make_env
from pyskick.errors import UserError
from pyskick.models import ActionMode, CompletionPolicy, LSTMState, select_actions
from pyskick.run_dir import load_policy
from pyskick.training import AverageBaseline, TrainConfig
from pyskick_expert_clone.expert import FullObservabilityActor

logger = logging.getLogger("pyskick_expert_clone")

_EPS = 1e-7  # the authors' log(p + 1e-7)


@dataclass(frozen=True)
class ExpertSettings:
    """How the expert is trained; by default the agent's own budget and optimiser settings."""

    epochs: int
    """Passes over the training viewgrids."""
    batch_size: int
    """Episodes per optimiser step."""
    lr: float
    """Adam learning rate."""
    weight_decay: float
    """Adam weight decay."""
    grad_clip: float
    """Maximum total L2 norm of the expert's gradients."""
    lambda_entropy: float
    """Weight of the entropy bonus."""
    seed: int
    """Seed of the expert's initialisation, its data order, starts and sampled actions."""

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"expert {name} must be an int, got {value!r}")
        if self.epochs < 1 or self.batch_size < 2 or self.seed < 0:
            raise ValueError(
                f"expert settings need epochs >= 1, batch_size >= 2 (BatchNorm) and seed >= 0; "
                f"got epochs={self.epochs}, batch_size={self.batch_size}, seed={self.seed}"
            )
        for name in ("lr", "weight_decay", "grad_clip", "lambda_entropy"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"expert {name} must be a number, got {value!r}")
            if (
                not math.isfinite(value)
                or value < 0
                or (value == 0 and name in ("lr", "grad_clip"))
            ):
                raise ValueError(
                    f"expert {name} must be finite and >= 0 (lr and grad_clip > 0), got {value}"
                )

    @classmethod
    def from_config(cls, config: TrainConfig, *, epochs: int | None = None) -> ExpertSettings:
        """The agent's run settings; ``epochs`` overrides ``config.epochs``."""
        return cls(
            epochs=config.epochs if epochs is None else epochs,
            batch_size=config.batch_size,
            lr=float(config.lr),
            weight_decay=float(config.weight_decay),
            grad_clip=float(config.grad_clip),
            lambda_entropy=float(config.lambda_entropy),
            seed=config.seed,
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain-typed fields (for score cache keys)."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ExpertEpoch:
    """One epoch of expert training."""

    epoch: int
    """0-based epoch index."""
    train_error: float
    """Mean final MSE (pasted) of the epoch's sampled episodes."""
    entropy: float
    """Mean entropy of the expert's action distributions."""
    seconds: float
    """Wall time of the epoch."""


class ExpertEpisodes(NamedTuple):
    """What one batch of expert-driven episodes produced."""

    actions: Tensor
    """``[T-1, B]`` int64 actions taken."""
    log_probs: Tensor
    """``[T-1, B]`` ``log(p[a_t] + 1e-7)`` (differentiable w.r.t. the expert)."""
    entropies: Tensor
    """``[T-1, B]`` ``-sum_a p log(p + 1e-7)`` (differentiable w.r.t. the expert)."""
    final_errors: Tensor
    """``[B]`` MSE of the agent's last reconstruction, observed views pasted (detached)."""


def load_one_view(one_view: str | os.PathLike[str], device: torch.device) -> CompletionPolicy:
    """The one-view agent of a run folder (its ``best.pt``) or checkpoint, frozen, in eval mode.

    Torch's global RNG is left as it was.

    Raises:
        FileNotFoundError: no such run or checkpoint.
        ValueError: not a pyskick training checkpoint.
    """
    return load_policy(one_view, device).policy.requires_grad_(False)


@torch.no_grad()
def agent_memory(
    policy: CompletionPolicy, view: Tensor, proprio: Tensor, state: LSTMState | None
) -> LSTMState:
    """The agent's new recurrent state after one glimpse
    (:meth:`CompletionPolicy.memory <pyskick.models.CompletionPolicy.memory>`: Sense -> Fuse ->
    Aggregate, without Decode and Act). Only the last glimpse's reconstruction is scored, and
    decoding the whole grid is most of a step's cost.

    Args:
        policy: the frozen one-view agent.
        view: ``[B, C, H, W]`` current view.
        proprio: ``[B, P]`` proprioception.
        state: (h, c) from the previous glimpse, or None at t = 0.

    Returns:
        (h, c), each ``[B, hidden_size]``: what ``policy.step(...).state`` returns.
    """
    if state is None:
        state = policy.initial_state(view.shape[0], view.device)
    return policy.memory(view, proprio, state)


def run_expert_episodes(
    policy: CompletionPolicy,
    expert: FullObservabilityActor,
    env: LookAroundEnv,
    grids: Tensor,
    starts: Tensor,
    *,
    mode: ActionMode,
    generator: torch.Generator | None = None,
    grid_code: Tensor | None = None,
) -> ExpertEpisodes:
    """``env.T`` glimpses of one episode per viewgrid, the expert choosing every motion.

    Per glimpse t, in the order of :func:`pyskick.training.collect_rollout`: observe, step the
    agent with its previous LSTM state; then, if t < T - 1, the expert scores the motions from
    h, the proprioception, the absolute azimuth, t and the grid code, one is chosen and taken.
    Only the last glimpse is decoded (:func:`agent_memory`), with observed views pasted. The
    agent runs without gradients; the expert's log-probabilities and entropies keep theirs.

    Args:
        policy: the frozen one-view agent (eval mode).
        expert: the expert, on the grids' device.
        env: the environment; its ``T`` is the episode length.
        grids: ``[B, N, M, C, H, W]`` uint8 viewgrids on the device to run on.
        starts: ``[B]`` int64 start views.
        mode: ``"sample"`` (training), ``"greedy"`` (demonstrations) or ``"random"``
            (uniform motions, the baseline).
        generator: random source of sampled and random actions.
        grid_code: ``[B, grid_size]`` the grids' codes when already computed; None encodes
            :attr:`env.grid <pyskick.envs.LookAroundEnv.grid>` with the expert.
    """
    T = env.T
    B, _, M = grids.shape[:3]
    device = grids.device
    actions = torch.zeros(T - 1, B, dtype=torch.int64, device=device)
    log_probs = torch.zeros(T - 1, B, device=device)
    entropies = torch.zeros(T - 1, B, device=device)
    obs = env.reset(grids, starts=starts)
    if grid_code is None:
        grid_code = expert.encode_grid(env.grid)
    state: LSTMState | None = None
    for t in range(T):
        azimuth = obs.position % M
        if t == T - 1:
            with torch.no_grad():
                decoded = policy.step(obs.view, obs.proprio, t, state, azimuth=azimuth).decoded
            break
        state = agent_memory(policy, obs.view, obs.proprio, state)
        probs = torch.softmax(expert(state[0], obs.proprio, t, grid_code, azimuth=azimuth), 1)
        chosen = select_actions(probs, mode, generator=generator)
        actions[t] = chosen
        log_probs[t] = torch.log(probs.gather(1, chosen[:, None]).squeeze(1) + _EPS)
        entropies[t] = -(probs * torch.log(probs + _EPS)).sum(1)
        obs, _, _ = env.step(chosen)
    with torch.no_grad():
        final_errors = (env.target - env.paste_observed(decoded)).pow(2).flatten(1).mean(1)
    return ExpertEpisodes(actions, log_probs, entropies, final_errors)


def train_expert(
    policy: CompletionPolicy,
    grids: Tensor,
    *,
    T: int,
    channel_mean: Sequence[float] | None,
    settings: ExpertSettings,
    device: torch.device,
    log: Callable[[ExpertEpoch], None] | None = None,
) -> tuple[FullObservabilityActor, list[ExpertEpoch]]:
    """Train an expert on ``grids`` with the one-view agent ``policy`` frozen.

    Every epoch reshuffles the grids and draws new starts (``n // batch_size`` full batches);
    each batch runs sampled episodes, updates the cumulative average of the final reward
    ``-MSE``, and takes one Adam step on
    ``sum_t -mean_b(log pi(a_t) * (R - R_avg)) - lambda_entropy * sum_t mean_b(H_t)``
    with the gradient norm clipped. Torch's global RNG is left as it was.

    Args:
        policy: the frozen one-view agent (see :func:`load_one_view`), on ``device``.
        grids: ``[n, N, M, C, H, W]`` uint8 training viewgrids (any device).
        T: glimpses per episode (>= 2).
        channel_mean: the dataset's per-channel mean (0–255).
        settings: epochs, batch size, optimiser, entropy weight and seed.
        device: where to train.
        log: called with each finished epoch's summary.

    Returns:
        The trained expert (eval mode) and one :class:`ExpertEpoch` per epoch.

    Raises:
        ValueError: ``T`` < 2, or fewer grids than ``settings.batch_size``.
    """
    if isinstance(T, bool) or not isinstance(T, int) or T < 2:
        raise UserError(f"the expert needs episodes with T >= 2 glimpses, got T={T!r}")
    n = grids.shape[0]
    if n < settings.batch_size:
        raise UserError(
            f"the expert's batch_size {settings.batch_size} exceeds the {n} training viewgrids"
        )
    cfg = policy.config
    env = make_env(cfg, T, channel_mean)
    forked = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=forked):
        torch.manual_seed(settings.seed)
        expert = FullObservabilityActor(cfg, policy.sense_im).to(device)
    optimizer = torch.optim.Adam(
        expert.parameters(), lr=settings.lr, weight_decay=settings.weight_decay
    )
    baseline = AverageBaseline()
    features = _view_features(expert, env, grids, device, settings.batch_size)
    order_generator = torch.Generator().manual_seed(settings.seed)
    action_generator = torch.Generator(device).manual_seed(settings.seed + 1)
    n_batches = n // settings.batch_size
    history: list[ExpertEpoch] = []
    policy.eval()
    expert.train()
    for epoch in range(settings.epochs):
        tick = time.perf_counter()
        shape = (n_batches, settings.batch_size)
        order = torch.randperm(n, generator=order_generator)[: shape[0] * shape[1]].view(shape)
        starts = torch.randint(cfg.n_views, shape, generator=order_generator)
        error_sum = entropy_sum = 0.0
        for rows, batch_starts in zip(order, starts, strict=True):
            episodes = run_expert_episodes(
                policy,
                expert,
                env,
                grids[rows].to(device),
                batch_starts.to(device),
                mode="sample",
                generator=action_generator,
                grid_code=expert.fuse_views(features[rows.to(device)]),
            )
            reward = -episodes.final_errors
            baseline.update(float(reward.sum()), reward.numel(), 0.0, 0)
            advantage = reward - baseline.final_mean
            policy_loss = -(episodes.log_probs * advantage).mean(1).sum()
            entropy = episodes.entropies.mean(1).sum()
            loss = policy_loss - settings.lambda_entropy * entropy
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(expert.parameters(), settings.grad_clip)
            optimizer.step()
            error_sum += float(episodes.final_errors.sum())
            entropy_sum += float(episodes.entropies.detach().mean())
        summary = ExpertEpoch(
            epoch=epoch,
            train_error=error_sum / order.numel(),
            entropy=entropy_sum / n_batches,
            seconds=time.perf_counter() - tick,
        )
        history.append(summary)
        if log is not None:
            log(summary)
    return expert.eval(), history


@torch.no_grad()
def _view_features(
    expert: FullObservabilityActor,
    env: LookAroundEnv,
    grids: Tensor,
    device: torch.device,
    chunk: int,
) -> Tensor:
    """``[n, V, sense_size]`` frozen-encoder features of every view of ``grids``, on
    ``device``: computed once instead of once per epoch."""
    parts = []
    for lo in range(0, grids.shape[0], chunk):
        part = grids[lo : lo + chunk].to(device)
        env.reset(part, starts=torch.zeros(part.shape[0], dtype=torch.int64, device=device))
        parts.append(expert.encode_views(env.grid))
    return torch.cat(parts)


@torch.no_grad()
def expert_trajectories(
    policy: CompletionPolicy,
    expert: FullObservabilityActor,
    grids: Tensor,
    *,
    T: int,
    channel_mean: Sequence[float] | None,
    device: torch.device,
    batch_size: int = 256,
    mode: ActionMode = "greedy",
    seed: int = 0,
) -> tuple[Tensor, Tensor]:
    """The expert's greedy trajectories from every start view of every grid.

    Both networks run in eval mode; like the authors' ``gather_expert_trajectories.py`` the
    errors are measured with observed views pasted. ``mode="random"`` replaces the expert's
    choices with uniform random motions (drawn from ``seed``): the baseline it must beat.

    Args:
        policy: the frozen one-view agent, on ``device``.
        expert: the trained expert, on ``device``.
        grids: ``[n, N, M, C, H, W]`` uint8 viewgrids (any device; moved chunk by chunk).
        T: glimpses per episode (>= 2).
        channel_mean: the dataset's per-channel mean (0–255).
        device: where to run.
        batch_size: episodes per forward pass (memory only).
        mode: ``"greedy"`` (the expert's argmax) or ``"random"``.
        seed: seed of the random motions.

    Returns:
        ``trajectories`` ``[n, V, T-1]`` int64 (row ``[i, s]``: the actions from start view
        ``s``) and ``errors`` ``[n, V]`` float32 final MSE of each of those episodes, on CPU.
    """
    if isinstance(T, bool) or not isinstance(T, int) or T < 2:
        raise UserError(f"expert trajectories need T >= 2 glimpses, got T={T!r}")
    cfg = policy.config
    V = cfg.n_views
    env = make_env(cfg, T, channel_mean)
    chunk = max(1, batch_size // V)
    starts = torch.arange(V, device=device)
    generator = torch.Generator(device).manual_seed(seed)
    was_training = expert.training
    policy.eval()
    expert.eval()
    trajectories, errors = [], []
    try:
        for lo in range(0, grids.shape[0], chunk):
            part = grids[lo : lo + chunk].to(device)
            k = part.shape[0]
            # One code per grid, shared by its V episodes (eval mode: per-sample codes).
            features = _view_features(expert, env, part, device, k)
            grid_code = expert.fuse_views(features).repeat_interleave(V, dim=0)
            episodes = run_expert_episodes(
                policy,
                expert,
                env,
                part.repeat_interleave(V, dim=0),
                starts.repeat(k),
                mode=mode,
                generator=generator,
                grid_code=grid_code,
            )
            trajectories.append(episodes.actions.T.reshape(k, V, T - 1).cpu())
            errors.append(episodes.final_errors.reshape(k, V).float().cpu())
    finally:
        expert.train(was_training)
    return torch.cat(trajectories), torch.cat(errors)
