"""Weight initialisation schemes of the authors' code (docs/paper-reference.md §3.9).

The authors initialise layer by layer: every Linear, Conv2d and ConvTranspose2d gets the
scheme's weight and bias, an LSTM gets it on each of its weight and bias tensors, and
BatchNorm layers keep the framework default (weight 1, bias 0 in modern PyTorch). Which modules
are initialised is the caller's choice: the policy leaves ``sense_pro`` alone, as the authors'
code did by accident (docs/paper-reference.md §3.9, §8.22).
"""

from __future__ import annotations

from torch import Tensor, nn

from pyskick.models.config import INIT_SCHEMES, InitScheme

BIAS_VALUE = 0.01
"""Constant bias of the "xavier" and "normal" schemes (an LSTM's gate bias is twice this)."""
NORMAL_STD = 0.001
"""Standard deviation of the "normal" scheme's weights."""
UNIFORM_BOUND = 0.1
"""The "uniform" scheme draws weights and biases from U(-bound, bound)."""

_WEIGHTED_LAYERS = (nn.Linear, nn.Conv2d, nn.ConvTranspose2d)


def init_weights_(module: nn.Module, scheme: InitScheme) -> None:
    """Initialise every Linear, Conv2d, ConvTranspose2d and LSTM inside ``module`` in place.

    Schemes:
        - ``"xavier"``: weights ``xavier_normal_`` (gain 1), biases 0.01. An LSTM's
          ``weight_ih_l0`` and ``weight_hh_l0`` (each ``[4H, in]``) are drawn as whole
          matrices; both bias vectors are 0.01, so the effective gate bias is 0.02.
        - ``"normal"``: weights N(0, 0.001²), biases 0.01.
        - ``"uniform"``: weights and biases U(-0.1, 0.1).

    BatchNorm and parameter-free layers are left untouched.

    Args:
        module: a module whose sub-layers are initialised (``module`` itself included).
        scheme: ``"xavier"``, ``"normal"`` or ``"uniform"``.

    Raises:
        ValueError: on an unknown scheme.
    """
    if scheme not in INIT_SCHEMES:
        raise ValueError(f"init scheme must be one of {', '.join(INIT_SCHEMES)}, got {scheme!r}")
    for layer in module.modules():
        if isinstance(layer, nn.LSTM):
            for name, param in layer.named_parameters(recurse=False):
                if name.startswith("weight_"):
                    _init_weight(param, scheme)
                else:
                    _init_bias(param, scheme)
        elif isinstance(layer, _WEIGHTED_LAYERS):
            _init_weight(layer.weight, scheme)
            if layer.bias is not None:
                _init_bias(layer.bias, scheme)


def _init_weight(weight: Tensor, scheme: InitScheme) -> None:
    if scheme == "xavier":
        nn.init.xavier_normal_(weight)
    elif scheme == "normal":
        nn.init.normal_(weight, mean=0.0, std=NORMAL_STD)
    else:
        nn.init.uniform_(weight, -UNIFORM_BOUND, UNIFORM_BOUND)


def _init_bias(bias: Tensor, scheme: InitScheme) -> None:
    if scheme == "uniform":
        nn.init.uniform_(bias, -UNIFORM_BOUND, UNIFORM_BOUND)
    else:
        nn.init.constant_(bias, BIAS_VALUE)
