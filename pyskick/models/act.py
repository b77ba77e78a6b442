"""Act: the policy head scoring the camera motions (docs/paper-reference.md §3.6), and how a
motion is picked from its probabilities (docs/paper-reference.md §2.9).

``"sample"`` draws from the policy (training), ``"greedy"`` takes the argmax (evaluation of a
learned actor), ``"random"`` draws uniform actions from a seeded generator (rnd-actions).
"""

from __future__ import annotations

from typing import Literal, get_args

import torch
from torch import Tensor, nn

from pyskick.models.config import ModelConfig

ActionMode = Literal["sample", "greedy", "random"]
ACTION_MODES: tuple[str, ...] = get_args(ActionMode)


def head_layers(in_size: int, width: int, out_size: int) -> list[nn.Module]:
    """Linear -> ReLU -> Linear -> ReLU -> BatchNorm1d -> Linear, shared by act and critics."""
    return [
        nn.Linear(in_size, width),
        nn.ReLU(),
        nn.Linear(width, width),
        nn.ReLU(),
        nn.BatchNorm1d(width),
        nn.Linear(width, out_size),
    ]


class ActHead(nn.Sequential):
    """Maps the act input (:func:`pyskick.models.inputs.act_input`) to action logits.

    Input ``[B, act_input_size]`` (260 for the paper); output ``[B, n_actions]`` logits. The
    authors divide the logits by ``1 + explorationBaseFactor`` before the softmax; that factor
    is 0 in every published run, so no temperature is applied. Layer indices match the authors'
    ``act``.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(*head_layers(config.act_input_size, config.act_size, config.n_actions))


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
