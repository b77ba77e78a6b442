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


def test_ops_lists_every_public_op() -> None:
    """``OPS`` names every op of pyskick.ops (test_native_stub checks it against pyskick._C)."""
    helpers = {"OPS", "build_info", "has_cuda", "has_native"}
    assert sorted(set(ops.__all__) - helpers) == sorted(ops.OPS)
    assert len(set(ops.OPS)) == len(ops.OPS)
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


# A valid address for the pointer arguments not under test; alive for the whole module, so that a
# check that failed to fire would at worst write here rather than into freed memory.
_BUFFER = torch.zeros(64, dtype=torch.int64)


def binding_calls() -> list[tuple[str, tuple, str]]:
    """Raw calls to pyskick._C that its last-guard checks must turn into ValueError.

    Each op's CPU and CUDA entry points run the same check function before any launch, so every
    ``<op>_cpu`` call is also made as ``<op>_cuda(..., stream=0)`` when the build has that entry
    point: it raises the same error on a machine without a GPU (the stream is never reached).
    """
    p = _BUFFER.data_ptr()
    render = (p, p, p, p, p, p, 1, 1, 1, 1, 1)  # pointers, then P, F, N, M, L
    material = (0.4, 0.9, 0.7, 15.0, 0.6)  # ambient, diffuse, specular, shininess, albedo
    calls = [
        ("rotate_viewgrid_cpu", (p, p, -1, 1, 1, 1, p, 0, False), "sizes must be non-negative"),
        ("rotate_viewgrid_cpu", (0, p, 1, 1, 1, 4, p, 0, False), "grid is a null pointer"),
        ("rotate_viewgrid_cpu", (p, p, 1, 1, 1, 4, 0, 0, False), "azimuth_shift is a null"),
        ("coverage_matrix_cpu", (p, p, p, 1, -2, 1, 1, p), "sizes must be non-negative"),
        ("coverage_matrix_cpu", (0, p, p, 1, 1, 1, 1, p), "recon is a null pointer"),
        ("coverage_matrix_cpu", (p, p, 0, 1, 1, 1, 1, p), "out is a null pointer"),
        ("coverage_matrix_cpu", (p, p, p, 1, 1, 1, 1, 0), "nonfinite is a null pointer"),
        ("greedy_coverage_cpu", (p, p, p, p, 1, 1, -1, 1, 1, 1, 1, True, False), "non-negative"),
        ("greedy_coverage_cpu", (p, p, p, p, 1, 1, 1, 0, 3, 1, 1, True, False), "empty grid"),
        ("greedy_coverage_cpu", (p, p, p, p, 1, 1, 1, 1, 3, 2, 1, True, False), "must be odd"),
        ("greedy_coverage_cpu", (0, p, p, p, 1, 1, 1, 1, 3, 1, 1, True, False), "coverage is a"),
        ("greedy_coverage_cpu", (p, 0, p, p, 1, 1, 1, 1, 3, 1, 1, True, False), "starts is a"),
        ("nms_rewards_cpu", (p, p, 1, 1, 1, -1, 1), "sizes must be non-negative"),
        ("nms_rewards_cpu", (0, p, 1, 1, 1, 1, 1), "scores is a null pointer"),
        ("render_mesh_views_cpu", (*render, 0, 1, *material, 40.0, 3.0, 1.0), "bad image_size"),
        ("render_mesh_views_cpu", (*render, 8, 1, *material, 180.0, 3.0, 1.0), "bad fov_deg"),
        ("render_mesh_views_cpu", (0, *render[1:], 8, 1, *material, 40.0, 3.0, 1.0), "vertices"),
        ("set_num_threads", (0,), "n must be >= 1"),
    ]
    native = importlib.import_module("pyskick._C") if ops.has_native() else None
    cuda = [
        (name.replace("_cpu", "_cuda"), (*args, 0), match)
        for name, args, match in calls
        if name.endswith("_cpu") and hasattr(native, name.replace("_cpu", "_cuda"))
    ]
    return calls + cuda


@pytest.mark.parametrize(
    "index", [pytest.param(i, id=f"{c[0]}-{c[2]}") for i, c in enumerate(binding_calls())]
)
def test_native_bindings_reject_bad_arguments(index: int) -> None:
    """The bindings' own checks raise ValueError instead of letting a kernel crash the process."""
    if not ops.has_native():
        pytest.fail("pyskick._C is missing: run `make setup`")
    native = importlib.import_module("pyskick._C")
    name, args, match = binding_calls()[index]
    with pytest.raises(ValueError, match=match) as raised:
        getattr(native, name)(*args)
    # A last guard is tripped by a wrapper's bug, not by the caller's values: not InputError.
    assert not isinstance(raised.value, native.InputError)


def test_a_kernel_s_check_of_the_caller_s_values_raises_input_error() -> None:
    """Checks only a kernel can make (it reads the values) raise pyskick._C.InputError, a
    ValueError that pyskick.ops re-raises as UserError (the wrappers' tests check that)."""
    if not ops.has_native():
        pytest.fail("pyskick._C is missing: run `make setup`")
    native = importlib.import_module("pyskick._C")
    assert issubclass(native.InputError, ValueError)
    scores = torch.rand(1, 2, 3)
    scores[0, 1, 2] = float("nan")
    out = torch.empty_like(scores)
    with pytest.raises(native.InputError, match="nms_rewards: scores contains NaN"):
        native.nms_rewards_cpu(scores.data_ptr(), out.data_ptr(), 1, 2, 3, 1, 0)
    coverage = torch.full((1, 2, 2), 2.0)  # outside [0, 1]
    starts = torch.zeros(1, 1, dtype=torch.int64)
    actions = torch.zeros(1, 1, 1, dtype=torch.int64)
    views = torch.zeros(1, 1, 2, dtype=torch.int64)
    pointers = (coverage.data_ptr(), starts.data_ptr(), actions.data_ptr(), views.data_ptr())
    with pytest.raises(native.InputError, match=r"coverage must lie in \[0, 1\]"):
        native.greedy_coverage_cpu(*pointers, 1, 1, 1, 1, 2, 1, 1, True, False)
    starts.fill_(5)  # outside [0, 2)
    coverage.fill_(0.5)
    with pytest.raises(native.InputError, match=r"starts must lie in \[0, 2\)"):
        native.greedy_coverage_cpu(*pointers, 1, 1, 1, 1, 2, 1, 1, True, False)


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("set_num_threads", (0,), "set_num_threads: n must be >= 1, got 0"),
        ("nms_rewards_cpu", "sizes", "nms_rewards: sizes must be non-negative, got -1099511627776"),
        ("render_mesh_views_cpu", "fov", "render_mesh_views: bad fov_deg 12.5 or distance -3.25"),
        ("render_mesh_views_cpu", "image", "render_mesh_views: bad image_size 0 or supersample 2"),
    ],
)
def test_binding_messages_print_their_numbers(name: str, args: object, message: str) -> None:
    """Numbers in the bindings' messages, exactly: they are formatted without iostreams, whose
    number formatting crashed the process on one GPU image (docs/kernels.md, "On a GPU")."""
    if not ops.has_native():
        pytest.fail("pyskick._C is missing: run `make setup`")
    p = _BUFFER.data_ptr()
    render = (p, p, p, p, p, p, 1, 1, 1, 1, 1)
    material = (0.4, 0.9, 0.7, 15.0, 0.6)
    calls = {
        "sizes": (p, p, 1, 1, 1, -(2**40), 1),
        "fov": (*render, 8, 1, *material, 12.5, -3.25, 1.0),
        "image": (*render, 0, 2, *material, 40.0, 3.0, 1.0),
    }
    native = importlib.import_module("pyskick._C")
    with pytest.raises(ValueError) as raised:
        getattr(native, name)(*calls.get(args, args))
    assert str(raised.value) == message
