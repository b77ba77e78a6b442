"""Act: the policy head scoring the camera motions (docs/paper-reference.md §3.6)."""

from __future__ import annotations

from torch import nn

from pyskick.models.config import ModelConfig


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
