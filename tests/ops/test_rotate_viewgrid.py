"""Correctness of ``rotate_viewgrid``: native vs reference, hand-computed rolls, inverse, edges."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pyskick.errors import UserError
from pyskick.ops import rotate_viewgrid

# Grids of the datasets (SUN360 4x8 RGB, ModelNet 5x9 grey) and small odd ones, tiny views.
GRIDS = [(4, 8, 3), (5, 9, 1), (1, 1, 1), (1, 5, 2), (3, 1, 1), (2, 3, 3)]
HUGE = [2**62, -(2**62), 2**63 - 1, -(2**63)]


def random_grid(
    gen: torch.Generator, shape: tuple[int, ...], dtype: torch.dtype, device: str
) -> torch.Tensor:
    """Random uint8 bytes or float32 normals of ``shape`` on ``device``."""
    if dtype == torch.uint8:
        grid = torch.randint(0, 256, shape, generator=gen, dtype=torch.uint8)
    else:
        grid = torch.randn(shape, generator=gen)
    return grid.to(device)


@st.composite
def rotate_inputs(draw: st.DrawFn) -> dict:
    """Shapes, dtype, shifts (small, negative and huge) and a seed for the grid values."""
    N, M, C = draw(st.sampled_from(GRIDS))
    B = draw(st.integers(0, 3))
    H, W = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    shift = st.one_of(st.integers(-20, 20), st.sampled_from(HUGE), st.integers(-(2**63), 2**63 - 1))
    return {
        "shape": (B, N, M, C, H, W),
        "dtype": draw(st.sampled_from([torch.uint8, torch.float32])),
        "azimuth": draw(st.lists(shift, min_size=B, max_size=B)),
        "elevation": draw(st.none() | st.lists(shift, min_size=B, max_size=B)),
        "inverse": draw(st.booleans()),
        "seed": draw(st.integers(0, 2**31)),
    }


def make_case(case: dict, device: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    gen = torch.Generator().manual_seed(case["seed"])
    grid = random_grid(gen, case["shape"], case["dtype"], device)
    azimuth = torch.tensor(case["azimuth"], dtype=torch.int64, device=device)
    elevation = case["elevation"]
    if elevation is not None:
        elevation = torch.tensor(elevation, dtype=torch.int64, device=device)
    return grid, azimuth, elevation


@settings(deadline=None, max_examples=250)
@given(case=rotate_inputs())
def test_native_matches_reference(native_and_reference, device: str, case: dict) -> None:
    grid, azimuth, elevation = make_case(case, device)
    native, reference = native_and_reference(
        rotate_viewgrid, grid, azimuth, elevation, inverse=case["inverse"]
    )
    assert native.dtype == grid.dtype
    assert native.device == grid.device
    assert torch.equal(native, reference)


@settings(deadline=None, max_examples=120)
@given(case=rotate_inputs())
def test_inverse_undoes_forward(backend: str, device: str, case: dict) -> None:
    grid, azimuth, elevation = make_case(case, device)
    rolled = rotate_viewgrid(grid, azimuth, elevation, backend=backend)
    back = rotate_viewgrid(rolled, azimuth, elevation, inverse=True, backend=backend)
    assert torch.equal(back, grid)
    forward = rotate_viewgrid(back, azimuth, elevation, backend=backend)
    assert torch.equal(forward, rolled)


@settings(deadline=None, max_examples=60)
@given(case=rotate_inputs())
def test_definition_per_view(backend: str, device: str, case: dict) -> None:
    """out[b, n, m] = grid[b, (n + e) % N, (m + a) % M], checked view by view in Python ints."""
    grid, azimuth, elevation = make_case(case, device)
    out = rotate_viewgrid(grid, azimuth, elevation, inverse=case["inverse"], backend=backend)
    B, N, M = grid.shape[:3]
    sign = -1 if case["inverse"] else 1
    for b in range(B):
        a = case["azimuth"][b]
        e = case["elevation"][b] if case["elevation"] is not None else 0
        for n in range(N):
            for m in range(M):
                src = grid[b, (n + sign * e) % N, (m + sign * a) % M]
                assert torch.equal(out[b, n, m], src)


def labelled_2x3(device: str, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A [1, 2, 3, 1, 1, 1] grid whose view (n, m) holds 10 n + m."""
    values = torch.tensor([[0, 1, 2], [10, 11, 12]], dtype=dtype, device=device)
    return values.reshape(1, 2, 3, 1, 1, 1)


@pytest.mark.parametrize(
    ("azimuth", "elevation", "inverse", "expected"),
    [
        (0, None, False, [[0, 1, 2], [10, 11, 12]]),
        (1, None, False, [[1, 2, 0], [11, 12, 10]]),
        (-1, None, False, [[2, 0, 1], [12, 10, 11]]),
        (1, None, True, [[2, 0, 1], [12, 10, 11]]),
        (-1, 1, False, [[12, 10, 11], [2, 0, 1]]),
        (1, 1, True, [[12, 10, 11], [2, 0, 1]]),
        (3, 2, False, [[0, 1, 2], [10, 11, 12]]),
        (5, -3, False, [[12, 10, 11], [2, 0, 1]]),
        # 2**62 = 4**31 = 1 (mod 3) and 0 (mod 2); -2**62 = 2 (mod 3).
        (2**62, 2**62, False, [[1, 2, 0], [11, 12, 10]]),
        (-(2**62), None, False, [[2, 0, 1], [12, 10, 11]]),
        (-(2**62), None, True, [[1, 2, 0], [11, 12, 10]]),
        # -2**63 = -(2 * 4**31) = -2 = 1 (mod 3); 2**63 - 1 = 2 - 1 = 1 (mod 3), = 1 (mod 2).
        (-(2**63), 2**63 - 1, False, [[11, 12, 10], [1, 2, 0]]),
    ],
)
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_hand_computed_2x3(
    backend: str,
    device: str,
    dtype: torch.dtype,
    azimuth: int,
    elevation: int | None,
    inverse: bool,
    expected: list[list[int]],
) -> None:
    a = torch.tensor([azimuth], device=device)
    e = None if elevation is None else torch.tensor([elevation], device=device)
    out = rotate_viewgrid(labelled_2x3(device, dtype), a, e, inverse=inverse, backend=backend)
    want = torch.tensor(expected, dtype=dtype, device=device).reshape(1, 2, 3, 1, 1, 1)
    assert torch.equal(out, want)


def test_per_sample_shifts_and_whole_views(backend: str, device: str) -> None:
    """Each sample uses its own shift, and a view's pixels move together."""
    grid = torch.arange(2 * 1 * 4 * 2 * 1 * 2, dtype=torch.float32, device=device)
    grid = grid.reshape(2, 1, 4, 2, 1, 2)
    out = rotate_viewgrid(grid, torch.tensor([1, -1], device=device), backend=backend)
    assert torch.equal(out[0], grid[0, :, [1, 2, 3, 0]])
    assert torch.equal(out[1], grid[1, :, [3, 0, 1, 2]])


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_non_contiguous_inputs(backend: str, device: str, dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(0)
    # Channels-last storage permuted to [B, N, M, C, H, W], and every other sample of a batch.
    base = random_grid(gen, (6, 4, 8, 3, 2, 3), dtype, device)
    permuted = base.permute(0, 1, 2, 5, 4, 3)
    sliced = base[::2]
    shifts = torch.tensor([5, -3, 2**62, 7, 0, -1], device=device)
    shift_view = shifts[::2]
    elev_view = torch.stack([shifts, -shifts], dim=1)[:, 1]
    assert not permuted.is_contiguous()
    assert not sliced.is_contiguous()
    assert not shift_view.is_contiguous()
    assert not elev_view.is_contiguous()
    for grid, a in ((permuted, shifts), (sliced, shift_view)):
        e = elev_view[: grid.shape[0]]
        got = rotate_viewgrid(grid, a, e, backend=backend)
        want = rotate_viewgrid(grid.contiguous(), a.contiguous(), e.contiguous(), backend=backend)
        assert torch.equal(got, want)


@pytest.mark.parametrize(
    "shape",
    [
        (0, 4, 8, 3, 2, 2),
        (2, 0, 8, 3, 2, 2),
        (2, 4, 0, 3, 2, 2),
        (2, 4, 8, 0, 2, 2),
        (2, 4, 8, 3, 0, 2),
        (1, 1, 1, 1, 1, 1),
    ],
)
def test_empty_and_single_view(backend: str, device: str, shape: tuple[int, ...]) -> None:
    grid = torch.rand(shape, device=device)
    shifts = torch.full((shape[0],), 3, dtype=torch.int64, device=device)
    for inverse in (False, True):
        out = rotate_viewgrid(grid, shifts, shifts, inverse=inverse, backend=backend)
        assert out.shape == grid.shape
        assert out.dtype == grid.dtype
        assert torch.equal(out, grid)  # empty, or a 1x1 grid where every roll is the identity


def test_returns_a_new_tensor(backend: str, device: str) -> None:
    grid = labelled_2x3(device)
    out = rotate_viewgrid(grid, torch.tensor([0], device=device), backend=backend)
    out.fill_(-1)
    assert torch.equal(grid, labelled_2x3(device))


def test_input_not_modified(backend: str, device: str) -> None:
    grid = labelled_2x3(device)
    shifts = torch.tensor([2**62], device=device)
    rotate_viewgrid(grid, shifts, -shifts, inverse=True, backend=backend)
    assert torch.equal(grid, labelled_2x3(device))
    assert shifts.tolist() == [2**62]


GOOD_GRID = (2, 4, 8, 3, 2, 2)


@pytest.mark.parametrize(
    ("grid", "azimuth", "elevation", "error", "match"),
    [
        (((2, 4, 8, 3, 2, 2), torch.float64), ((2,), torch.int64), None, TypeError, "grid"),
        (((2, 4, 8, 3, 2, 2), torch.int32), ((2,), torch.int64), None, TypeError, "grid"),
        ((GOOD_GRID, torch.float32), ((2,), torch.int32), None, TypeError, "azimuth_shift"),
        ((GOOD_GRID, torch.float32), ((2,), torch.float32), None, TypeError, "azimuth_shift"),
        (
            (GOOD_GRID, torch.float32),
            ((2,), torch.int64),
            ((2,), torch.int32),
            TypeError,
            "elevation_shift",
        ),
        (((2, 4, 8, 3, 2), torch.float32), ((2,), torch.int64), None, ValueError, "grid"),
        (((2, 4, 8, 3, 2, 2, 1), torch.uint8), ((2,), torch.int64), None, ValueError, "grid"),
        ((GOOD_GRID, torch.float32), ((3,), torch.int64), None, ValueError, "azimuth_shift"),
        ((GOOD_GRID, torch.float32), ((2, 1), torch.int64), None, ValueError, "azimuth_shift"),
        (
            (GOOD_GRID, torch.float32),
            ((2,), torch.int64),
            ((1,), torch.int64),
            ValueError,
            "elevation_shift",
        ),
        (
            (GOOD_GRID, torch.float32),
            ((2,), torch.int64),
            ((), torch.int64),
            ValueError,
            "elevation_shift",
        ),
    ],
)
def test_bad_tensors(
    backend: str, device: str, grid, azimuth, elevation, error: type, match: str
) -> None:
    def make(spec: tuple) -> torch.Tensor:
        shape, dtype = spec
        return torch.zeros(shape, dtype=dtype, device=device)

    elev = None if elevation is None else make(elevation)
    with pytest.raises(error, match=rf"rotate_viewgrid: {match}\b") as raised:
        rotate_viewgrid(make(grid), make(azimuth), elev, backend=backend)
    assert isinstance(raised.value, UserError), type(raised.value)  # the caller's error


@pytest.mark.parametrize(
    ("grid", "azimuth", "match"),
    [
        ([[1.0]], torch.zeros(1, dtype=torch.int64), "grid"),
        (torch.zeros(GOOD_GRID), [0, 0], "azimuth_shift"),
    ],
)
def test_non_tensor_arguments(grid, azimuth, match: str) -> None:
    with pytest.raises(TypeError, match=rf"{match} must be a torch.Tensor"):
        rotate_viewgrid(grid, azimuth)


def test_bad_backend() -> None:
    grid = torch.zeros(GOOD_GRID)
    with pytest.raises(ValueError, match="backend must be one of"):
        rotate_viewgrid(grid, torch.zeros(2, dtype=torch.int64), backend="bogus")


def test_native_on_meta_device_is_a_runtime_error() -> None:
    grid = torch.zeros(GOOD_GRID, device="meta")
    shifts = torch.zeros(2, dtype=torch.int64, device="meta")
    with pytest.raises(
        RuntimeError, match=r"backend='native' needs kernels for device type 'meta'"
    ):
        rotate_viewgrid(grid, shifts, backend="native")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_tensors_on_different_devices() -> None:
    grid = torch.zeros(GOOD_GRID, device="cuda")
    with pytest.raises(ValueError, match=r"one device.*azimuth_shift on cpu"):
        rotate_viewgrid(grid, torch.zeros(2, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"one device.*elevation_shift on cpu"):
        rotate_viewgrid(
            grid,
            torch.zeros(2, dtype=torch.int64, device="cuda"),
            torch.zeros(2, dtype=torch.int64),
        )
