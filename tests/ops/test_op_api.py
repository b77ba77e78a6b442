"""The public op API: every op has a reference twin with its signature; build reporting agrees."""

from __future__ import annotations

import importlib
import inspect
import warnings

import pytest
import torch

from pyskick import ops
from pyskick.ops import _reference


@pytest.mark.parametrize("name", ops.OPS)
def test_every_op_has_a_reference_twin(name: str) -> None:
    public = getattr(ops, name)
    twin = getattr(_reference, name)
    assert name in ops.__all__
    public_params = inspect.signature(public).parameters
    assert "backend" in public_params
    backend = public_params["backend"]
    assert backend.kind is inspect.Parameter.KEYWORD_ONLY
    assert backend.default == "auto"
    expected = [p for p in public_params.values() if p.name != "backend"]
    assert list(inspect.signature(twin).parameters.values()) == expected


def test_ops_tuple_lists_the_four_kernels() -> None:
    assert ops.OPS == ("rotate_viewgrid", "coverage_matrix", "greedy_coverage", "nms_rewards")
    for name in ops.OPS:
        assert (getattr(ops, name).__doc__ or "").strip(), f"{name} has no docstring"


def test_build_reporting_is_consistent() -> None:
    try:
        native = importlib.import_module("pyskick._C")
    except ImportError:
        native = None
    info = ops.build_info()
    assert ops.has_native() is (native is not None)
    assert info["native"] is ops.has_native()
    if native is None:
        assert info == {"native": False, "cuda": False}
        assert ops.has_cuda() is False
        return
    assert info == {"native": True, **native.build_info()}
    assert ops.has_cuda() is bool(native.has_cuda()) is info["cuda"]
    assert info["version"] == importlib.import_module("pyskick").__version__
    assert isinstance(info["openmp"], bool)
    if info["cuda"]:
        assert isinstance(info["cuda_version"], str)
        assert info["cuda_version"]
    else:
        assert info["cuda_version"] is None


def test_native_module_is_built() -> None:
    """The test suite runs on a build (``make setup``): the CPU kernels must be there."""
    assert ops.has_native(), "pyskick._C is missing: run `make setup`"


def test_auto_uses_native_when_built(device: str) -> None:
    """backend="auto" gives the native result, without a fallback warning, when kernels exist."""
    scores = torch.tensor([[[0.5, 1.0, 0.25, 1.0]]], device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        auto = ops.nms_rewards(scores, 2, 0)
    assert torch.equal(auto, ops.nms_rewards(scores, 2, 0, backend="native"))
