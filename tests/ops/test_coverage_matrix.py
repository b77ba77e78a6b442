"""Correctness of ``coverage_matrix``: native vs reference, a hand-computed case, properties."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pyskick.errors import UserError
from pyskick.ops import coverage_matrix

# Grids of the datasets (SUN360 4x8 RGB, ModelNet 5x9 grey) and small or degenerate ones.
GRIDS = [(4, 8, 3), (5, 9, 1), (1, 1, 1), (1, 4, 2), (3, 1, 1), (2, 3, 3)]


@st.composite
def coverage_inputs(draw: st.DrawFn) -> dict:
    N, M, C = draw(st.sampled_from(GRIDS))
    return {
        "B": draw(st.integers(0, 2)),
        "grid": (N, M, C, draw(st.integers(1, 4)), draw(st.integers(1, 4))),
        "kind": draw(st.sampled_from(["uniform", "noisy", "quarters"])),
        "seed": draw(st.integers(0, 2**31)),
    }


def make_case(case: dict, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """recon [B, V, N, M, C, H, W] and grid [B, N, M, C, H, W] float32 on ``device``.

    ``uniform``: unrelated random values; ``noisy``: the truth rolled into each start's frame
    plus noise of a per-source scale (realistic: some sources reconstruct much better);
    ``quarters``: values in {0, .25, ..., 1}, so that many errors tie exactly.
    """
    gen = torch.Generator().manual_seed(case["seed"])
    B = case["B"]
    N, M = case["grid"][:2]
    V = N * M
    grid_shape = (B, *case["grid"])
    recon_shape = (B, V, *case["grid"])
    if case["kind"] == "quarters":
        grid = torch.randint(0, 5, grid_shape, generator=gen) / 4
        recon = torch.randint(0, 5, recon_shape, generator=gen) / 4
    elif case["kind"] == "uniform":
        grid = torch.rand(grid_shape, generator=gen)
        recon = torch.rand(recon_shape, generator=gen)
    else:
        grid = torch.rand(grid_shape, generator=gen)
        start_azimuth = torch.arange(V) % M
        in_frame = torch.stack([grid.roll(-int(j), dims=2) for j in start_azimuth], dim=1)
        scale = torch.rand(B, V, 1, 1, 1, 1, 1, generator=gen) * 0.3
        recon = in_frame + scale * torch.randn(recon_shape, generator=gen)
    return recon.to(device), grid.to(device)


def float64_errors(recon: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    """err[b, s, t] in float64, written independently of the op with explicit loops."""
    B, V, N, M = recon.shape[:4]
    err = torch.zeros(B, V, V, dtype=torch.float64)
    for s in range(V):
        j = s % M
        for n in range(N):
            for m in range(M):
                diff = recon[:, s, n, (m - j) % M].double() - grid[:, n, m].double()
                err[:, s, n * M + m] = diff.square().flatten(1).sum(1).cpu()
    return err


@settings(deadline=None, max_examples=250)
@given(case=coverage_inputs())
def test_native_matches_reference(native_and_reference, device: str, case: dict) -> None:
    recon, grid = make_case(case, device)
    native, reference = native_and_reference(coverage_matrix, recon, grid)
    assert native.dtype == torch.float32
    assert native.device == recon.device
    # Native sums squared errors in float32 lanes, the reference in float64.
    torch.testing.assert_close(native, reference, rtol=1e-4, atol=1e-5)


@settings(deadline=None, max_examples=60)
@given(case=coverage_inputs())
def test_normalised_per_target(backend: str, device: str, case: dict) -> None:
    """Each target column spans [0, (hi - lo) / (hi - lo + 1e-8)] over the sources."""
    recon, grid = make_case(case, device)
    out = coverage_matrix(recon, grid, backend=backend).cpu()
    B, V = recon.shape[:2]
    assert out.shape == (B, V, V)
    assert bool(((out >= 0) & (out <= 1)).all())
    if B == 0:
        return
    u = 1.0 / (1000.0 * float64_errors(recon, grid) + 1e-8)
    spread = u.amax(dim=1) - u.amin(dim=1)  # [B, V] over sources, per target
    torch.testing.assert_close(out.amin(dim=1), torch.zeros(B, V), rtol=0, atol=1e-6)
    torch.testing.assert_close(
        out.amax(dim=1).double(), spread / (spread + 1e-8), rtol=1e-4, atol=1e-6
    )
    # The best source of each target (largest utility) is the one at the column maximum.
    distinct = spread > 1e-3 * u.amax(dim=1)
    best = u.argmax(dim=1)
    picked = out.gather(1, best[:, None, :])[:, 0]
    torch.testing.assert_close(picked[distinct], out.amax(dim=1)[distinct])


def test_hand_computed_1x3(backend: str, device: str) -> None:
    """N=1, M=3, views of C=1, H=1, W=2 whose second pixel is always exact.

    Truth is 1 everywhere. Start s = j holds absolute azimuth (j + m) % 3 in slot m. First-pixel
    reconstruction errors d give err = d^2 and u = 1 / (1000 d^2 + 1e-8):
    d = 1/16 -> u = 0.256, 1/8 -> 0.064, 1/4 -> 0.016, 1/2 -> 0.004.
      s=0 slots [1/8, 1/4, 1/2]  -> targets 0,1,2 get u = .064, .016, .004
      s=1 slots [1/4, 1/4, 1/16] -> slot0=t1, slot1=t2, slot2=t0: t0 .256, t1 .016, t2 .016
      s=2 slots [1/8, 1/2, 1/8]  -> slot0=t2, slot1=t0, slot2=t1: t0 .004, t1 .064, t2 .064
    Per target, (u - lo) / (hi - lo):
      t0: [.064, .256, .004] -> [.06/.252, 1, 0] = [5/21, 1, 0]
      t1: [.016, .016, .064] -> [0, 0, 1]
      t2: [.004, .016, .064] -> [0, .2, 1]
    """
    d = torch.tensor([[1 / 8, 1 / 4, 1 / 2], [1 / 4, 1 / 4, 1 / 16], [1 / 8, 1 / 2, 1 / 8]])
    recon = torch.ones(1, 3, 1, 3, 1, 1, 2)
    recon[0, :, 0, :, 0, 0, 0] += d
    grid = torch.ones(1, 1, 3, 1, 1, 2)
    out = coverage_matrix(recon.to(device), grid.to(device), backend=backend)
    expected = torch.tensor([[5 / 21, 0.0, 0.0], [1.0, 0.0, 0.2], [0.0, 1.0, 1.0]])
    # The 1e-8 terms shift the exact fractions by < 1e-6.
    torch.testing.assert_close(out.cpu(), expected[None], rtol=0, atol=1e-6)


def test_hand_computed_elevation_not_rolled(backend: str, device: str) -> None:
    """N=2, M=1: every start has azimuth 0, so recon is compared slot for slot.

    Truth 0. s=0 reconstructs [0, 1/2] (t0 exact: u = 1e8; t1: u = .004),
    s=1 reconstructs [1/4, 1/8] (t0: u = .016; t1: u = .064).
    t0: [1e8, .016] -> [1, 0]; t1: [.004, .064] -> [0, 1].
    """
    recon = torch.tensor([[0.0, 0.5], [0.25, 0.125]]).reshape(1, 2, 2, 1, 1, 1, 1)
    grid = torch.zeros(1, 2, 1, 1, 1, 1)
    out = coverage_matrix(recon.to(device), grid.to(device), backend=backend)
    torch.testing.assert_close(out.cpu(), torch.eye(2)[None], rtol=0, atol=1e-6)


def test_identical_sources_give_zero(backend: str, device: str) -> None:
    """When every source reconstructs a target equally well, the column is 0 (hi == lo)."""
    gen = torch.Generator().manual_seed(3)
    grid = torch.rand(2, 4, 8, 3, 2, 2, generator=gen)
    # Every source reconstructs the same absolute grid: recon[s] is truth + c, rolled per s.
    absolute = grid + 0.125
    recon = torch.stack([absolute.roll(-(s % 8), dims=2) for s in range(32)], dim=1)
    out = coverage_matrix(recon.to(device), grid.to(device), backend=backend)
    assert torch.equal(out.cpu(), torch.zeros(2, 32, 32))


def test_perfect_source_is_one(backend: str, device: str) -> None:
    """A source that reconstructs a target exactly gets u = 1e8 and normalises to 1."""
    gen = torch.Generator().manual_seed(4)
    grid = torch.rand(1, 5, 9, 1, 2, 2, generator=gen)
    recon = torch.rand(1, 45, 5, 9, 1, 2, 2, generator=gen)
    recon[0, 7, 2, (4 - 7 % 9) % 9] = grid[0, 2, 4]  # source 7 is exact at target (2, 4)
    out = coverage_matrix(recon.to(device), grid.to(device), backend=backend).cpu()
    assert out[0, 7, 2 * 9 + 4] == 1.0
    assert int(out[0, :, 2 * 9 + 4].argmax()) == 7


def fresh(t: torch.Tensor) -> torch.Tensor:
    """A contiguous copy in new storage at offset 0."""
    return t.clone(memory_format=torch.contiguous_format)


def test_non_contiguous_inputs(backend: str, device: str) -> None:
    gen = torch.Generator().manual_seed(5)
    base_recon = torch.rand(4, 6, 2, 3, 2, 3, 3, generator=gen, device="cpu").to(device)
    base_grid = torch.rand(4, 2, 3, 3, 3, 2, generator=gen).to(device)
    recon = base_recon[::2].transpose(-1, -2)  # [2, 6, 2, 3, 2, 3, 3]
    grid = base_grid[1::2].transpose(-1, -3)  # [2, 2, 3, 2, 3, 3]
    assert not recon.is_contiguous()
    assert not grid.is_contiguous()
    # Broadcast (stride 0) sources, and a contiguous view that starts at a storage offset.
    expanded = base_recon[1:2, 3:4].expand(2, 6, 2, 3, 2, 3, 3)
    offset = base_grid.flatten()[5 : 5 + grid.numel()].view(grid.shape)
    assert offset.storage_offset() == 5
    for r, g in ((recon, grid), (expanded, offset)):
        got = coverage_matrix(r, g, backend=backend)
        want = coverage_matrix(fresh(r), fresh(g), backend=backend)
        assert torch.equal(got, want)


@pytest.mark.parametrize(
    ("B", "grid"),
    [
        (0, (4, 8, 3, 2, 2)),
        (2, (0, 8, 3, 2, 2)),
        (2, (4, 0, 3, 2, 2)),
        (2, (4, 8, 0, 2, 2)),
        (1, (1, 1, 1, 1, 1)),
    ],
)
def test_empty_and_single_view(backend: str, device: str, B: int, grid: tuple) -> None:
    N, M = grid[:2]
    recon = torch.rand(B, N * M, *grid, device=device)
    out = coverage_matrix(recon, torch.rand(B, *grid, device=device), backend=backend)
    assert out.shape == (B, N * M, N * M)
    assert out.dtype == torch.float32
    # No views, one source, or no pixels (every err is 0): hi == lo, so every value is 0.
    assert torch.equal(out, torch.zeros_like(out))


def test_inputs_not_modified(backend: str, device: str) -> None:
    gen = torch.Generator().manual_seed(6)
    recon = torch.rand(1, 6, 2, 3, 1, 2, 2, generator=gen).to(device)
    grid = torch.rand(1, 2, 3, 1, 2, 2, generator=gen).to(device)
    recon_copy, grid_copy = recon.clone(), grid.clone()
    coverage_matrix(recon, grid, backend=backend)
    assert torch.equal(recon, recon_copy)
    assert torch.equal(grid, grid_copy)


R = (2, 6, 2, 3, 1, 2, 2)
G = (2, 2, 3, 1, 2, 2)


@pytest.mark.parametrize(
    ("recon", "grid", "error", "match"),
    [
        ((R, torch.float64), (G, torch.float32), TypeError, "recon must have dtype"),
        ((R, torch.float32), (G, torch.float64), TypeError, "grid must have dtype"),
        ((R, torch.uint8), (G, torch.uint8), TypeError, "recon must have dtype"),
        ((R[1:], torch.float32), (G, torch.float32), ValueError, "recon must have 7 dim"),
        ((R, torch.float32), (G[1:], torch.float32), ValueError, "grid must have 6 dim"),
        (((2, 5, 2, 3, 1, 2, 2), torch.float32), (G, torch.float32), ValueError, "recon must be"),
        ((R, torch.float32), ((3, 2, 3, 1, 2, 2), torch.float32), ValueError, "grid must have"),
        ((R, torch.float32), ((2, 2, 3, 1, 2, 3), torch.float32), ValueError, "grid must have"),
        ((R, torch.float32), ((2, 3, 2, 1, 2, 2), torch.float32), ValueError, "grid must have"),
    ],
)
def test_bad_tensors(backend: str, device: str, recon, grid, error: type, match: str) -> None:
    def make(spec: tuple) -> torch.Tensor:
        return torch.zeros(spec[0], dtype=spec[1], device=device)

    with pytest.raises(error, match=f"coverage_matrix: {match}") as raised:
        coverage_matrix(make(recon), make(grid), backend=backend)
    assert isinstance(raised.value, UserError), type(raised.value)  # the caller's error


def test_non_tensor_arguments() -> None:
    with pytest.raises(TypeError, match=r"recon must be a torch.Tensor"):
        coverage_matrix([[0.0]], torch.zeros(G))
    with pytest.raises(TypeError, match=r"grid must be a torch.Tensor"):
        coverage_matrix(torch.zeros(R), None)


def test_bad_backend() -> None:
    with pytest.raises(ValueError, match="backend must be one of"):
        coverage_matrix(torch.zeros(R), torch.zeros(G), backend="bogus")


def test_native_on_meta_device_is_a_runtime_error() -> None:
    recon, grid = torch.zeros(R, device="meta"), torch.zeros(G, device="meta")
    with pytest.raises(
        RuntimeError, match=r"backend='native' needs kernels for device type 'meta'"
    ):
        coverage_matrix(recon, grid, backend="native")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_tensors_on_different_devices() -> None:
    with pytest.raises(ValueError, match=r"one device.*recon on cuda.*grid on cpu"):
        coverage_matrix(torch.zeros(R, device="cuda"), torch.zeros(G))
