"""The kernels as torch operators (``torch.ops.pyskick.*``): their schemas, fake kernels and
autograd pass ``torch.library.opcheck``; ``torch.compile(fullgraph=True)`` traces through every
one; the profiler names them; ``rotate_viewgrid`` is differentiable."""

from __future__ import annotations

import pytest
import torch

from pyskick import ops


def _inputs(backend: str = "auto") -> dict[str, tuple]:
    gen = torch.Generator().manual_seed(0)
    grid = torch.rand(2, 3, 4, 1, 4, 4, generator=gen)
    shift = torch.tensor([1, -5])
    recon = torch.rand(2, 12, 3, 4, 1, 4, 4, generator=gen)
    coverage = torch.rand(2, 12, 12, generator=gen)
    starts = torch.tensor([[0, 11], [5, 3]])
    scores = torch.rand(2, 3, 4, generator=gen)
    return {
        "rotate_viewgrid": (grid, shift, torch.tensor([0, 2]), False, backend),
        "coverage_matrix": (recon, grid, backend),
        "greedy_coverage": (coverage, starts, 3, 3, 4, 3, 5, True, False, backend),
        "nms_rewards": (scores, 2, 1, backend),
    }


@pytest.mark.parametrize("backend", ["native", "reference"])
@pytest.mark.parametrize(
    "name", ["rotate_viewgrid", "coverage_matrix", "greedy_coverage", "nms_rewards"]
)
def test_each_operator_passes_opcheck(name: str, backend: str) -> None:
    if backend == "native" and not ops.has_native():
        pytest.skip("pyskick._C is not built")
    op = getattr(torch.ops.pyskick, name)
    args = _inputs(backend)[name]
    torch.library.opcheck(op, args)
    # Tagged as custom_op tags its operators: torch.compile may insist on it.
    assert torch.Tag.pt2_compliant_tag in op.default.tags


@pytest.mark.parametrize("backend", ["native", "reference"])
def test_rotate_viewgrids_autograd_formula_passes_opcheck(backend: str) -> None:
    """opcheck checks the autograd registration, and the formula traced by AOT autograd, only
    where an input requires grad (the formula's values: the test below)."""
    if backend == "native" and not ops.has_native():
        pytest.skip("pyskick._C is not built")
    grid, *rest = _inputs(backend)["rotate_viewgrid"]
    args = (grid.clone().requires_grad_(), *rest)
    torch.library.opcheck(torch.ops.pyskick.rotate_viewgrid, args)


def test_compile_traces_through_every_operator_as_one_graph() -> None:
    grid = torch.rand(2, 3, 4, 1, 4, 4)
    shift = torch.tensor([1, 2])
    recon = torch.rand(2, 12, 3, 4, 1, 4, 4)
    scores = torch.rand(2, 3, 4)
    starts = torch.tensor([[0], [5]])

    def pipeline(grid, shift, recon, scores, starts):
        rolled = ops.rotate_viewgrid(grid, shift)
        coverage = ops.coverage_matrix(recon, rolled)
        actions, views = ops.greedy_coverage(
            coverage, starts, 3, n_elevations=3, n_azimuths=4, check_values=False
        )
        maps = ops.nms_rewards(scores * 2, 2, 1)
        return rolled.sum() + coverage.sum() + maps.sum(), actions, views

    eager = pipeline(grid, shift, recon, scores, starts)
    compiled = torch.compile(pipeline, fullgraph=True, backend="aot_eager")
    traced = compiled(grid, shift, recon, scores, starts)
    for a, b in zip(eager, traced, strict=True):
        torch.testing.assert_close(a, b)


def test_the_profiler_names_the_operators() -> None:
    grid = torch.rand(2, 3, 4, 1, 4, 4)
    with torch.profiler.profile() as profile:
        ops.rotate_viewgrid(grid, torch.tensor([1, 2]))
        ops.nms_rewards(torch.rand(2, 3, 4), 2, 1)
    names = {event.key for event in profile.key_averages()}
    assert {"pyskick::rotate_viewgrid", "pyskick::nms_rewards"} <= names


@pytest.mark.parametrize("backend", ["native", "reference"])
def test_rotate_viewgrid_is_differentiable(backend: str) -> None:
    if backend == "native" and not ops.has_native():
        pytest.skip("pyskick._C is not built")
    grid = torch.rand(3, 2, 5, 2, 3, 3, requires_grad=True)
    shift = torch.tensor([1, 7, -2])
    up = torch.tensor([0, 1, 1])
    weights = torch.rand(3, 2, 5, 2, 3, 3)
    out = ops.rotate_viewgrid(grid, shift, up, backend=backend)
    (out * weights).sum().backward()
    # The gradient of a roll is the opposite roll of the gradient.
    expected = ops.rotate_viewgrid(weights, shift, up, inverse=True, backend=backend)
    assert torch.equal(grid.grad, expected)
    inverse = ops.rotate_viewgrid(grid, shift, inverse=True, backend=backend)
    assert inverse.requires_grad
    assert not ops.rotate_viewgrid(grid.detach(), shift).requires_grad


@pytest.mark.parametrize(
    ("name", "argument"),
    [("coverage_matrix", 0), ("coverage_matrix", 1), ("greedy_coverage", 0), ("nms_rewards", 0)],
)
def test_an_operator_without_a_gradient_refuses_an_input_that_requires_one(
    name: str, argument: int
) -> None:
    """Its output would carry no gradient: the call is refused by name, not left to PyTorch's
    autograd fallback (a warning at backward and a gradient of None)."""
    args = list(_inputs()[name])
    args[argument] = args[argument].clone().requires_grad_()
    op = getattr(torch.ops.pyskick, name)
    with pytest.raises(RuntimeError, match=rf"^{name}: is not differentiable, but \w+ requires"):
        op(*args)
    with torch.no_grad():
        expected = op(*_inputs()[name])
        outputs = op(*args)
    for out, want in zip(
        outputs if isinstance(outputs, tuple) else (outputs,),
        expected if isinstance(expected, tuple) else (expected,),
        strict=True,
    ):
        assert torch.equal(out, want)
