"""The ``pyskick`` operator library: each op's implementation as ``torch.ops.pyskick.<op>``.

The operators are defined with ``torch.library.Library`` (a schema, one implementation for
every device, a fake kernel, and an autograd formula where the op is differentiable) rather
than with the ``torch.library.custom_op`` decorator, whose run-time safety layers cost a call
more than the op's own host work: on the 2-core CPU machine (torch 2.13, an op that allocates
its output and nothing else) 14.5 µs a call through ``custom_op`` against 3.5 µs through the
library, and 14.9 against 10.0 µs with a Python autograd formula. What those layers check at
run time (the schema, the fake kernel, the autograd formula, outputs that alias no input),
``torch.library.opcheck`` checks in the tests (``tests/ops/test_op_library.py``; the autograd
registration with an input that requires grad, the formula's values by hand).

An op without an autograd formula is not differentiable: the public wrappers hand it detached
inputs, and a direct call with an input that requires grad (grad mode on) is refused by name
(``_checks.check_not_differentiated``) rather than left to PyTorch's autograd fallback, whose
output would silently carry no gradient.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

NAMESPACE = "pyskick"

# Kept for the life of the process: a Library's registrations end when it is deleted.
LIBRARY = torch.library.Library(NAMESPACE, "FRAGMENT")


def define_op(name: str, impl: Callable[..., Any], *, fake: Callable[..., Any]) -> None:
    """Define ``torch.ops.pyskick.<name>``: ``impl`` on every device, ``fake`` on fake tensors.

    The schema is inferred from ``impl``'s annotations, as ``torch.library.custom_op`` infers
    it, and the operator is tagged PT2-compliant, as ``custom_op`` tags its operators (what
    ``torch.compile`` with ``only_allow_pt2_compliant_ops`` asks of an operator).

    Args:
        name: the operator's name in the ``pyskick`` namespace.
        impl: the implementation; type-annotated, it mutates none of its arguments.
        fake: the fake kernel (``torch.compile``, meta): outputs of the right shapes, dtypes
            and devices.
    """
    schema = torch.library.infer_schema(impl, mutates_args=())
    LIBRARY.define(name + schema, tags=(torch.Tag.pt2_compliant_tag,))
    LIBRARY.impl(name, impl, "CompositeExplicitAutograd")
    torch.library.register_fake(f"{NAMESPACE}::{name}", fake, lib=LIBRARY)


def define_autograd(
    name: str, backward: Callable[..., Any], *, setup_context: Callable[..., Any]
) -> None:
    """Make ``torch.ops.pyskick.<name>`` differentiable (``torch.library.register_autograd``).

    Args:
        name: the operator's name in the ``pyskick`` namespace.
        backward: the gradients of the inputs from the output's (``(ctx, grad)``).
        setup_context: what ``backward`` needs, saved from the inputs and output.
    """
    torch.library.register_autograd(
        f"{NAMESPACE}::{name}", backward, setup_context=setup_context, lib=LIBRARY
    )
