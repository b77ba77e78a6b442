"""Policy heatmaps of paper Eq. 10: which parts of the belief drive the action choice.

At a step with aggregated state ``a`` (the LSTM hidden state h the act head reads), find the
change ``Δa`` that most changes the action **probabilities**::

    Δa* = argmax_Δ  Σ_δ (π(δ | a) − π(δ | a + Δ))²   subject to  ‖Δ‖₂ ≤ C ‖a‖₂

then decode both beliefs: the heatmap is ``Σ_c (Decode(a + Δa*) − Decode(a))²`` per pixel, in
the absolute frame. Views with high heat are those whose belief would have to change to change
the action.

Optimiser (projected normalised gradient ascent, fixed budget, batched but independent per
sample since the policy runs with BatchNorm in eval mode):

- radius ``R = C ‖a‖₂`` (``C = 0.75``, the paper's constant);
- ``Δ₀`` a random direction of norm ``init_scale · R`` (``init_scale = 0.01``): the gradient
  of the objective is exactly 0 at ``Δ = 0``, where it has its minimum;
- ``iterations = 100`` steps ``Δ ← Π_R(Δ + η_k R g / ‖g‖)`` with ``g`` the gradient of the
  objective, ``η_k = step · (1 − k / iterations)`` (``step = 0.2``, linear decay) and ``Π_R``
  the projection onto the ball of radius R (rescaling when ``‖Δ‖ > R``);
- the best iterate per sample is returned, so the objective never ends below its value at
  ``Δ₀``.

Differences to the authors' notebook (``docs/deviations.md``, V1–V5): probabilities instead of
logits, a hard norm constraint instead of an L2 penalty counted twice (loss and weight decay),
clean gradients (the notebook never zeroes them), one colour scale per example instead of per
step, and no blur in the overlay.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from pyskick.models import CompletionPolicy
from pyskick.ops import rotate_viewgrid


class Perturbation(NamedTuple):
    """Result of :func:`optimal_perturbation`."""

    delta: Tensor
    """``[B, hidden_size]`` the best Δa found, ``‖Δa‖ ≤ C ‖a‖``."""
    objective: Tensor
    """``[B]`` Σ_δ (π(δ|a) − π(δ|a+Δa))² at ``delta``."""
    initial_objective: Tensor
    """``[B]`` the objective at the random start Δ₀."""


def policy_change(
    policy: CompletionPolicy,
    hidden: Tensor,
    delta: Tensor,
    proprio: Tensor,
    time: int | Tensor,
    *,
    azimuth: Tensor | None = None,
) -> Tensor:
    """``[B]`` Σ_δ (π(δ | a) − π(δ | a + Δ))², the Eq. 10 objective (differentiable in Δ).

    Args:
        policy: the policy (its act head; use eval mode so samples are independent).
        hidden: ``[B, hidden_size]`` aggregated states a.
        delta: ``[B, hidden_size]`` perturbations Δ.
        proprio: ``[B, P]`` proprioception of the step.
        time: the step index t (int or ``[B]``).
        azimuth: ``[B]`` absolute azimuths (needed only when the act head reads them).
    """
    both = torch.cat([hidden, hidden + delta])
    logits = policy.act_logits(
        both,
        torch.cat([proprio, proprio]),
        torch.cat([time, time]) if isinstance(time, Tensor) else time,
        azimuth=None if azimuth is None else torch.cat([azimuth, azimuth]),
    )
    probs = torch.softmax(logits, dim=1)
    B = hidden.shape[0]
    return (probs[:B] - probs[B:]).pow(2).sum(1)


def optimal_perturbation(
    policy: CompletionPolicy,
    hidden: Tensor,
    proprio: Tensor,
    time: int | Tensor,
    *,
    azimuth: Tensor | None = None,
    ratio: float = 0.75,
    iterations: int = 100,
    step: float = 0.2,
    init_scale: float = 0.01,
    generator: torch.Generator | None = None,
) -> Perturbation:
    """Solve Eq. 10 approximately by projected normalised gradient ascent (module docstring).

    Args:
        policy: the policy; put in eval mode for the search, its mode restored afterwards.
        hidden: ``[B, hidden_size]`` aggregated states a.
        proprio: ``[B, P]`` proprioception of the step.
        time: the step index t (int or ``[B]``).
        azimuth: ``[B]`` absolute azimuths (needed only when the act head reads them).
        ratio: C, the bound ``‖Δ‖ ≤ C ‖a‖``.
        iterations: gradient steps.
        step: first step length as a fraction of the radius (decays linearly to 0).
        init_scale: norm of the random start as a fraction of the radius (in (0, 1]).
        generator: random source of the start direction (on ``hidden``'s device).

    Returns:
        :class:`Perturbation`.

    Raises:
        ValueError: bad ratio, iterations, step or init_scale.
    """
    if not ratio > 0:
        raise ValueError(f"ratio (C) must be > 0, got {ratio}")
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 0:
        raise ValueError(f"iterations must be an int >= 0, got {iterations!r}")
    if not step > 0:
        raise ValueError(f"step must be > 0, got {step}")
    if not 0 < init_scale <= 1:
        raise ValueError(f"init_scale must lie in (0, 1], got {init_scale}")
    hidden = hidden.detach()
    radius = ratio * hidden.norm(dim=1, keepdim=True)  # [B, 1]
    direction = torch.randn(hidden.shape, generator=generator, device=hidden.device)
    direction = direction / direction.norm(dim=1, keepdim=True).clamp_min(1e-12)
    delta = direction * (init_scale * radius)
    was_training = policy.training
    policy.eval()
    try:
        with torch.enable_grad():
            initial, grad = _objective_and_grad(policy, hidden, delta, proprio, time, azimuth)
            best, best_delta = initial, delta
            for k in range(iterations):
                length = step * (1.0 - k / iterations) * radius
                unit = grad / grad.norm(dim=1, keepdim=True).clamp_min(1e-30)
                delta = project(delta + length * unit, radius)
                objective, grad = _objective_and_grad(policy, hidden, delta, proprio, time, azimuth)
                better = objective > best
                best = torch.where(better, objective, best)
                best_delta = torch.where(better[:, None], delta, best_delta)
    finally:
        policy.train(was_training)
    return Perturbation(best_delta, best, initial)


def project(delta: Tensor, radius: Tensor) -> Tensor:
    """Project each row of ``delta`` ``[B, D]`` onto the ball of its ``radius`` ``[B, 1]``."""
    norm = delta.norm(dim=1, keepdim=True)
    return delta * torch.where(norm > radius, radius / norm.clamp_min(1e-30), 1.0)


def belief_heatmaps(
    policy: CompletionPolicy, hidden: Tensor, delta: Tensor, starts: Tensor
) -> Tensor:
    """``Σ_c (Decode(a + Δ) − Decode(a))²`` per pixel, in the absolute frame.

    Args:
        policy: the policy (its decoder runs in eval mode; mode restored afterwards).
        hidden: ``[B, hidden_size]`` aggregated states a.
        delta: ``[B, hidden_size]`` perturbations Δ.
        starts: ``[B]`` start view indices ``n * M + m`` of the episodes (the decoder's
            azimuth frame starts at the start's azimuth unless the azimuth is known).

    Returns:
        ``[B, N, M, H, W]`` float32 heat, ``out[b, n, m]`` for absolute view (n, m).
    """
    cfg = policy.config
    was_training = policy.training
    policy.eval()
    try:
        with torch.no_grad():
            B = hidden.shape[0]
            decoded = policy.decode(torch.cat([hidden + delta, hidden]).detach())
    finally:
        policy.train(was_training)
    heat = (decoded[:B] - decoded[B:]).pow(2).sum(3, keepdim=True).float().contiguous()
    if not cfg.known_azimuth:
        shift = (starts % cfg.n_azimuths).to(device=heat.device, dtype=torch.int64)
        heat = rotate_viewgrid(heat, shift, inverse=True)
    return heat[:, :, :, 0]


def _objective_and_grad(
    policy: CompletionPolicy,
    hidden: Tensor,
    delta: Tensor,
    proprio: Tensor,
    time: int | Tensor,
    azimuth: Tensor | None,
) -> tuple[Tensor, Tensor]:
    delta = delta.detach().requires_grad_(True)
    objective = policy_change(policy, hidden, delta, proprio, time, azimuth=azimuth)
    (grad,) = torch.autograd.grad(objective.sum(), delta)
    return objective.detach(), grad
