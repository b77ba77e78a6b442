"""How an agent picks its next motion from the act head's probabilities.

The authors' rollout is in docs/paper-reference.md §2.9.

``"sample"`` draws from the policy (training), ``"greedy"`` takes the argmax (evaluation of a
learned actor), ``"random"`` draws uniform actions from a seeded generator (rnd-actions).
"""

from __future__ import annotations

from typing import Literal, get_args

import torch
from torch import Tensor

ActionMode = Literal["sample", "greedy", "random"]
ACTION_MODES: tuple[str, ...] = get_args(ActionMode)


def select_actions(
    probs: Tensor, mode: ActionMode, *, generator: torch.Generator | None = None
) -> Tensor:
    """Choose one action per sample.

    Args:
        probs: ``[B, A]`` action probabilities (only the shape is read in ``"random"`` mode).
        mode: ``"sample"``, ``"greedy"`` or ``"random"``.
        generator: random source for ``"sample"`` and ``"random"`` (on ``probs``' device);
            None uses torch's global generator.

    Returns:
        ``[B]`` int64 actions on ``probs``' device.

    Raises:
        ValueError: unknown mode.
    """
    if mode == "greedy":
        return probs.argmax(dim=1)
    if mode == "sample":
        return torch.multinomial(probs.detach(), 1, generator=generator).squeeze(1)
    if mode == "random":
        B, A = probs.shape
        return torch.randint(A, (B,), generator=generator, device=probs.device)
    raise ValueError(f"action mode must be one of {', '.join(ACTION_MODES)}, got {mode!r}")
