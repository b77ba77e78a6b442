"""reconstruction_error: autograd's mse_loss + mean, bit for bit, in fewer passes backward."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from pyskick.envs.rollout import reconstruction_error


def _autograd(decoded: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The formula it replaces, differentiated by autograd."""
    return F.mse_loss(decoded, target, reduction="none").flatten(1).mean(1)


def _both(decoded, target, grad, dtype=None):
    """(error, decoded.grad, target.grad) of each implementation; with ``dtype``, under CPU
    autocast to it, the decoded grid cast to it (as a network's output would be)."""
    results = []
    for fn in (_autograd, reconstruction_error):
        d = decoded.clone().requires_grad_()
        t = target.clone().requires_grad_()
        if dtype is None:
            error = fn(d, t)
        else:
            with torch.autocast("cpu", dtype=dtype):
                error = fn(d.to(dtype), t)
        error.backward(grad)
        results.append((error, d.grad, t.grad))
    return results


@given(
    B=st.integers(1, 6),
    grid=st.sampled_from([(1, 1, 1, 1, 1), (2, 3, 1, 4, 4), (4, 8, 3, 8, 8), (3, 4, 3, 16, 16)]),
    seed=st.integers(0, 2**31),
    scale=st.sampled_from([1e-3, 1.0, 1e3]),
)
@settings(max_examples=40, deadline=None)
def test_it_equals_autograds_formula_bit_for_bit(B, grid, seed, scale) -> None:
    gen = torch.Generator().manual_seed(seed)
    decoded = torch.randn(B, *grid, generator=gen) * scale
    target = torch.randn(B, *grid, generator=gen)
    grad = torch.randn(B, generator=gen)
    ours, theirs = _both(decoded, target, grad)
    for a, b in zip(ours, theirs, strict=True):
        assert a.dtype == b.dtype
        assert torch.equal(a, b)


def test_by_hand() -> None:
    """Two samples of four values: errors 1/4 (one value off by 1) and 4 (all off by 2);
    d error_b / d decoded = 2 (decoded - target) / 4 times the upstream gradient."""
    decoded = torch.tensor([[1.0, 0.0, 0.0, 0.0], [2.0, 2.0, 2.0, 2.0]]).view(2, 1, 1, 1, 2, 2)
    decoded.requires_grad_()
    target = torch.zeros(2, 1, 1, 1, 2, 2)
    error = reconstruction_error(decoded, target)
    assert error.tolist() == [0.25, 4.0]
    error.backward(torch.tensor([1.0, 3.0]))
    assert decoded.grad is not None
    assert decoded.grad.flatten(1).tolist() == [[0.5, 0.0, 0.0, 0.0], [3.0, 3.0, 3.0, 3.0]]


def test_under_bf16_autocast_it_computes_in_float32_as_autograds_does() -> None:
    gen = torch.Generator().manual_seed(3)
    decoded, target = torch.randn(4, 2, 3, 1, 8, 8, generator=gen), torch.rand(4, 2, 3, 1, 8, 8)
    ours, theirs = _both(decoded, target, torch.ones(4), dtype=torch.bfloat16)
    assert ours[0].dtype == theirs[0].dtype == torch.float32
    for a, b in zip(ours, theirs, strict=True):
        assert torch.equal(a, b)


def test_only_the_decoded_grids_gradient_when_the_target_is_data() -> None:
    decoded = torch.randn(2, 1, 2, 1, 4, 4, requires_grad=True)
    reconstruction_error(decoded, torch.randn(2, 1, 2, 1, 4, 4)).sum().backward()
    assert decoded.grad is not None
    assert decoded.grad.shape == decoded.shape


def _grid_writes(backward, shapes) -> list[str]:
    """The operations ``backward()`` runs, nested ones included (a kernel's own zero-fill),
    whose first input has one of ``shapes``."""
    with torch.profiler.profile(record_shapes=True) as prof:
        backward()
    return [
        event.name
        for event in prof.events()
        if event.input_shapes
        and tuple(event.input_shapes[0]) in shapes
        and event.name in ("aten::div", "aten::fill_", "aten::mse_loss_backward")
    ]


def test_its_backward_writes_the_grid_once() -> None:
    """Autograd's formula writes three grid-sized tensors backward (the mean's gradient, a
    zero-filled input gradient, then the gradient): this writes only the gradient."""
    shape = (8, 4, 8, 3, 16, 16)
    shapes = {shape, (8, 4 * 8 * 3 * 16 * 16)}
    target = torch.randn(shape)
    writes = {}
    for fn in (_autograd, reconstruction_error):
        decoded = torch.randn(shape, requires_grad=True)
        error = fn(decoded, target).sum()
        writes[fn.__name__] = set(_grid_writes(error.backward, shapes))
    assert writes["_autograd"] == {"aten::div", "aten::fill_", "aten::mse_loss_backward"}
    assert writes["reconstruction_error"] == {"aten::mse_loss_backward"}
