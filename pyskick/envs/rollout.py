"""A policy in the environment: one batch of episodes (docs/paper-reference.md §2.9 and §4.2).

:func:`make_env` builds the environment a policy runs in; :func:`collect_rollout` runs ``T``
glimpses of ``B`` episodes (observe, reconstruct, act) and stores, time first, what the losses
need in a :class:`Rollout` of ``[T, B]`` / ``[T-1, B]`` tensors, each stacked once. Training,
evaluation, the sidekicks and the figures all run episodes through these two.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pyskick.envs.lookaround import LookAroundEnv, StartZeroing
from pyskick.envs.lookaround import paste as paste_slots
from pyskick.errors import UserError, UserTypeError
from pyskick.models import CompletionPolicy, ModelConfig
from pyskick.models.act import ActionMode, select_actions
from pyskick.models.packed import PackedCompletionPolicy
from pyskick.timing import SpanTimer, span

_EPS = 1e-7  # the authors' log(p + 1e-7)


def make_env(
    config: ModelConfig,
    T: int,
    channel_mean: Sequence[float] | None,
    *,
    reward_radius: int = 1,
    start_zeroing: StartZeroing = "view",
) -> LookAroundEnv:
    """The environment a policy of ``config`` runs in (paper defaults: 3 x 5 moves).

    ``reward_radius`` is the neighbourhood zeroed around a visited view in a sidekick's reward
    map (the sidekick's NMS radius); ``start_zeroing`` what the map loses at reset.

    Raises:
        ValueError: the model scores another number of actions than the environment has.
    """
    env = LookAroundEnv(
        T,
        known_azimuth=config.known_azimuth,
        channel_mean=channel_mean if config.mean_subtract else None,
        reward_radius=reward_radius,
        start_zeroing=start_zeroing,
    )
    if env.n_actions != config.n_actions:
        raise UserError(
            f"the model scores {config.n_actions} actions but the environment has {env.n_actions}"
        )
    return env


class Rollout(NamedTuple):
    """What one batch of episodes produced (``T`` glimpses, ``T - 1`` actions)."""

    rec_errors: Tensor
    """``[T, B]`` per-sample MSE of the reconstruction after each glimpse (differentiable);
    NaN before the last glimpse when only the final one was decoded (``final_only``)."""
    log_probs: Tensor
    """``[T-1, B]`` ``log(p[a_t] + 1e-7)`` of the actions taken (differentiable)."""
    entropies: Tensor
    """``[T-1, B]`` ``-sum_a p log(p + 1e-7)`` of the action distributions (differentiable)."""
    values: Tensor | None
    """``[T-1, B]`` critic values of the action steps, or None without a learned critic."""
    intrinsic: Tensor
    """``[T-1, B]`` raw intrinsic rewards the environment paid (0 without reward maps)."""
    actions: Tensor
    """``[T-1, B]`` int64 actions taken."""
    supervised: Tensor
    """``[T-1, B]`` bool, True where a demonstration forced the action."""
    visited: Tensor
    """``[B, T]`` int64 view indices seen, in order."""
    decoded: Tensor
    """``[B, N, M, C, H, W]`` the last reconstruction (pasted when ``paste``), detached."""

    @property
    def final_errors(self) -> Tensor:
        """``[B]`` detached MSE after the last glimpse."""
        return self.rec_errors[-1].detach()


def collect_rollout(
    policy: nn.Module,
    env: LookAroundEnv,
    grids: Tensor,
    *,
    mode: ActionMode,
    starts: Tensor | None = None,
    generator: torch.Generator | None = None,
    critic: nn.Module | None = None,
    critic_full_obs: bool = False,
    reward_maps: Tensor | None = None,
    demonstrations: tuple[Tensor, Tensor] | None = None,
    paste: bool = False,
    final_only: bool = False,
    decode_once: bool = False,
    check_values: bool = True,
    timer: SpanTimer | None = None,
    choose: Callable[[Tensor], Tensor] | None = None,
) -> Rollout:
    """Run ``env.T`` glimpses of one episode per viewgrid.

    At each glimpse t: observe, step the policy with the previous LSTM state, optionally paste
    the observed views, record the MSE to the start-relative target; then, if t < T - 1,
    choose an action (a demonstration's where its mask is set), record its log-probability,
    the entropy and the critic's value, and move.

    Args:
        policy: a :class:`CompletionPolicy` (or a packed one), possibly wrapped (DDP, compiled:
            :class:`~pyskick.training.compiled.CompiledNetwork`); called as
            ``policy(view, proprio, t, state, azimuth=...)``.
        env: the environment; its ``T`` is the episode length.
        grids: ``[B, N, M, C, H, W]`` uint8 viewgrids on the device to run on.
        mode: how the policy's actions are chosen: ``"sample"``, ``"greedy"`` or ``"random"``.
        starts: ``[B]`` start views; None draws them from ``generator``.
        generator: random source of the starts and of ``"sample"``/``"random"`` actions; None
            uses torch's global generator.
        critic: a learned critic (possibly wrapped), or None.
        critic_full_obs: the critic takes the whole absolute grid (asymm-critic).
        reward_maps: ``[B, N, M]`` raw sidekick rewards, or None.
        demonstrations: ``(actions [T-1, B], mask [T-1, B])`` forced actions, or None.
        paste: paste observed views before measuring the error (always at evaluation).
        final_only: decode (and measure) only the last glimpse: evaluation's figure is the
            final error, and skipping the decoder at the other glimpses saves most of the cost.
            The actions do not depend on decoding, so the episodes are the same.
        decode_once: decode every glimpse's hidden state in one batch at the last glimpse
            (the policy's ``earlier_hidden``) instead of one batch per glimpse: the same
            values up to float rounding, fewer and larger kernels (``TrainConfig.decode_once``).
            Without effect with ``final_only`` or T = 1.
        check_values: check the values of ``starts``, ``reward_maps`` and the demonstrated
            actions (ranges, finiteness). False trusts them, as the trainer and evaluation do
            with values drawn in range or checked where they were loaded: reading values
            waits for a GPU (:meth:`LookAroundEnv.reset`).
        timer: adds the environment's time (reset, steps, pastes) to its span ``"env"``.
        choose: picks the ``[B]`` actions from the ``[B, A]`` action probabilities instead of
            ``select_actions(probs, mode, generator=generator)`` (a pack of runs draws each
            run's from its own generator and mode).

    Returns:
        The :class:`Rollout`.
    """
    core = _unwrapped(policy)
    if not isinstance(core, CompletionPolicy | PackedCompletionPolicy):
        raise UserTypeError(f"policy must be a CompletionPolicy, got {type(core).__name__}")
    T = env.T
    B = grids.shape[0]
    M = grids.shape[2]
    device = grids.device
    # Each glimpse's values are collected and stacked once at the end: written into slices of
    # preallocated tensors they would cost a copy each, and the differentiable ones two more
    # kernels each in the backward pass (a GPU's step is bound by its count of kernels).
    errors: list[Tensor] = []
    probabilities: list[Tensor] = []
    values: list[Tensor] = []
    intrinsic: list[Tensor] = []
    actions: list[Tensor] = []
    if demonstrations is not None:
        demo_actions, demo_mask = checked_demonstrations(demonstrations, T, B, device)
        supervised = demo_mask.clone()
    else:
        supervised = torch.zeros(T - 1, B, dtype=torch.bool, device=device)

    with span(timer, "env"):
        obs = env.reset(
            grids,
            starts=starts,
            generator=generator,
            reward_maps=reward_maps,
            check_values=check_values,
        )
    # A full-observability critic's costliest part, its encoding of the grid's views, is the
    # same at every glimpse of the episode: done once where the critic offers it (a plugin's
    # critic may not: it is called with the grid alone, as its contract says).
    views: dict[str, Tensor] = {}
    if critic is not None and critic_full_obs and T > 1:
        encode = _views_encoder(_unwrapped(critic))
        if encode is not None:
            views = {"views": encode(env.grid)}
    state = None
    decoded = None
    once = decode_once and not final_only and T > 1
    earlier: list[Tensor] = []  # with ``once``: the glimpses' hidden states, and what
    observed: list[Tensor] = []  # each would have pasted
    for t in range(T):
        azimuth = obs.position % M
        decode = not (final_only or once) or t == T - 1
        batched = {"earlier_hidden": torch.stack(earlier)} if once and t == T - 1 else {}
        out = policy(obs.view, obs.proprio, t, state, azimuth=azimuth, decode=decode, **batched)
        state = out.state
        if once and paste:
            with span(timer, "env"):
                observed.append(env.observed_slots())
        if once and t < T - 1:
            earlier.append(state[0])
        elif decode:
            decoded = out.decoded
            assert decoded is not None
            if paste:  # what each glimpse had seen (every glimpse's, decoded once)
                with span(timer, "env"):
                    slots = torch.stack(observed) if once else env.observed_slots()
                    decoded = paste_slots(decoded, env.target, slots)
            errors.append(reconstruction_error(decoded, env.target))
        if t == T - 1:
            break
        probs = torch.softmax(out.logits, dim=1)
        if choose is not None:
            chosen = choose(probs)
        else:
            chosen = select_actions(probs, mode, generator=generator)
        if demonstrations is not None:
            chosen = torch.where(demo_mask[t], demo_actions[t], chosen)
        actions.append(chosen)
        probabilities.append(probs)
        if critic is not None:
            if critic_full_obs:
                values.append(
                    critic(out.hidden, obs.proprio, t, env.grid, azimuth=azimuth, **views)
                )
            else:
                values.append(critic(out.hidden, obs.proprio, t, azimuth=azimuth))
        with span(timer, "env"):
            obs, reward, _ = env.step(chosen, check_values=check_values)
        intrinsic.append(reward)
    assert decoded is not None  # T >= 1
    if final_only:  # the glimpses before the last were not decoded
        rec_errors = torch.full((T, B), math.nan, device=device)
        rec_errors[-1] = errors[-1]
    elif once:  # every glimpse's, [T, B], decoded [T, B, ...]
        rec_errors, decoded = errors[0].to(torch.float32), decoded[-1]
    else:
        rec_errors = _stacked(errors, B, device)
    chosen_actions = _stacked(actions, B, device, torch.int64)
    log_probs, entropies = _log_probs_and_entropies(probabilities, chosen_actions)
    return Rollout(
        rec_errors=rec_errors,
        log_probs=log_probs,
        entropies=entropies,
        values=_stacked(values, B, device) if critic is not None else None,
        intrinsic=_stacked(intrinsic, B, device),
        actions=chosen_actions,
        supervised=supervised,
        visited=env.visited_views.clone(),
        decoded=decoded.detach(),
    )


def _unwrapped(module: nn.Module) -> nn.Module:
    """The network inside a compiled wrapper (``torch.compile``'s, or
    :class:`~pyskick.training.compiled.CompiledNetwork`'s ``_orig_mod``) and a DDP wrapper."""
    core = cast(nn.Module, getattr(module, "_orig_mod", module))
    return core.module if isinstance(core, nn.parallel.DistributedDataParallel) else core


def _views_encoder(critic: nn.Module) -> Callable[[Tensor], Tensor] | None:
    """The critic's ``encode_views`` if its ``forward`` takes them (``views=``): a subclass that
    overrides ``forward`` with the contract's signature, or a module whose ``encode_views``
    means something else, is called with the grid alone."""
    encode = getattr(critic, "encode_views", None)
    if not callable(encode) or "views" not in _parameters(type(critic).forward):
        return None
    return cast(Callable[[Tensor], Tensor], encode)


@functools.cache
def _parameters(function: Callable[..., Any]) -> frozenset[str]:
    """The names a function takes (a critic class's ``forward``: looked up once per class)."""
    return frozenset(inspect.signature(function).parameters)


def _log_probs_and_entropies(probabilities: list[Tensor], actions: Tensor) -> tuple[Tensor, Tensor]:
    """The chosen actions' log-probabilities and the policy's entropies, each ``[T-1, B]``,
    from every glimpse's action probabilities (``T-1`` of ``[B, A]``) and ``actions
    [T-1, B]``: computed once for the episode, not once per glimpse (the same element-wise
    arithmetic in a third of the kernels, forward and backward, at T = 4)."""
    if not probabilities:  # T = 1: [0, B] each
        B, device = actions.shape[1], actions.device
        return _stacked([], B, device), _stacked([], B, device)
    probs = torch.stack(probabilities)
    log_probs = torch.log(probs.gather(2, actions[..., None]).squeeze(2) + _EPS)
    entropies = -(probs * torch.log(probs + _EPS)).sum(2)
    return log_probs.to(torch.float32), entropies.to(torch.float32)


def _stacked(
    parts: list[Tensor], B: int, device: torch.device, dtype: torch.dtype = torch.float32
) -> Tensor:
    """``[len(parts), B]`` of ``dtype`` (a ``[0, B]`` one when there are none, T = 1); under
    bf16 autocast a critic's values are bfloat16, stored in float32 as before."""
    if not parts:
        return torch.zeros(0, B, dtype=dtype, device=device)
    return torch.stack(parts).to(dtype)


def reconstruction_error(decoded: Tensor, target: Tensor) -> Tensor:
    """``[B]`` per-sample MSE over every pixel and channel of the grid
    (docs/paper-reference.md §4.2); ``[T, B]`` for T glimpses' ``decoded [T, B, ...]`` against
    one ``target [B, ...]``.

    ``F.mse_loss(decoded, target, reduction="none").flatten(1).mean(1)``, with the same
    forward and bit-identical gradients, in fewer passes over the decoded grids (the largest
    tensors of a training step): see :class:`_PerSampleMSE`.
    """
    extra = decoded.dim() - target.dim()
    if extra < 0 or decoded.shape[extra:] != target.shape:
        raise ValueError(  # a bug: the caller passes the model's output and its own target
            f"decoded {list(decoded.shape)} does not end with target's shape {list(target.shape)}"
        )
    # The target broadcast over the glimpses (a view); torch leaves Function.apply unannotated.
    return cast(
        Tensor,
        _PerSampleMSE.apply(decoded, target.expand_as(decoded), extra + 1),  # type: ignore[no-untyped-call]
    )


class _PerSampleMSE(torch.autograd.Function):
    """Per-sample mean squared error whose backward is one pass over the grid.

    Autograd's backward of ``mse_loss(..., "none").flatten(1).mean(1)`` materialises the
    mean's gradient ``g / n`` as a full ``[B, n]`` tensor and zero-fills the input's gradient
    before ``mse_loss_backward`` overwrites every element of it (two of the three passes). Here
    ``g / n`` is computed on ``[B]`` and broadcast into ``mse_loss_backward``, which writes into
    an uninitialised tensor: the same operations on the same values, element by element.
    """

    @staticmethod
    def forward(ctx: Any, decoded: Tensor, target: Tensor, batch_dims: int) -> Tensor:
        device = decoded.device.type
        if torch.is_autocast_enabled(device):
            # What autocast does to mse_loss (a float32 op: lower-precision floats cast up),
            # done here so that the backward sees the inputs the forward used.
            decoded, target = (
                x if x.dtype == torch.float64 else x.float() for x in (decoded, target)
            )
        with torch.autocast(device, enabled=False):
            error = F.mse_loss(decoded, target, reduction="none").flatten(batch_dims)
            error = error.mean(batch_dims)
        ctx.save_for_backward(decoded, target)
        ctx.numel = math.prod(decoded.shape[batch_dims:])
        return error

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None]:
        decoded, target = ctx.saved_tensors
        # The mean's gradient, one value per sample, broadcast over the grid.
        per_sample = (grad / ctx.numel).view(*grad.shape, *(1,) * (decoded.dim() - grad.dim()))
        per_sample = per_sample.expand_as(decoded)

        def mse_backward(x: Tensor, y: Tensor) -> Tensor:  # autograd's formula, into empty
            out = torch.empty_like(x, memory_format=torch.contiguous_format)
            torch.ops.aten.mse_loss_backward.grad_input(per_sample, x, y, 0, grad_input=out)
            return out

        wants_decoded, wants_target, _ = ctx.needs_input_grad
        return (
            mse_backward(decoded, target) if wants_decoded else None,
            mse_backward(target, decoded) if wants_target else None,
            None,
        )


def checked_demonstrations(
    demonstrations: tuple[Tensor, Tensor], T: int, B: int, device: torch.device
) -> tuple[Tensor, Tensor]:
    """Validate a sidekick's ``(actions, mask)`` and move them to ``device``."""
    if not (isinstance(demonstrations, tuple) and len(demonstrations) == 2):
        raise UserTypeError("demonstrations must be a tuple (actions [T-1, B], mask [T-1, B])")
    demo_actions, demo_mask = demonstrations
    for name, tensor, dtype in (
        ("actions", demo_actions, torch.int64),
        ("mask", demo_mask, torch.bool),
    ):
        if not isinstance(tensor, Tensor) or tensor.dtype != dtype:
            raise UserTypeError(f"demonstration {name} must be a {dtype} tensor")
        if tuple(tensor.shape) != (T - 1, B):
            raise UserError(
                f"demonstration {name} must have shape [{T - 1}, {B}], got {list(tensor.shape)}"
            )
    if demo_actions.device != device:
        demo_actions = demo_actions.to(device)
    if demo_mask.device != device:
        demo_mask = demo_mask.to(device)
    return demo_actions, demo_mask
