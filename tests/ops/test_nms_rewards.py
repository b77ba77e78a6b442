"""Correctness of ``nms_rewards``: native vs reference, hand-computed maps, properties, errors."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pyskick.errors import UserError
from pyskick.ops import nms_rewards

# Grids of the datasets (SUN360 4x8, ModelNet 5x9) and small or degenerate ones.
GRIDS = [(4, 8), (5, 9), (1, 1), (1, 6), (6, 1), (2, 3), (3, 4), (7, 5)]
# continuous maps, and maps with many exact ties where the lowest-index rule decides.
KINDS = ["normal", "positive", "binary", "quarters", "constant"]


def random_scores(gen: torch.Generator, shape: tuple[int, ...], kind: str) -> torch.Tensor:
    if kind == "normal":
        return torch.randn(shape, generator=gen)
    if kind == "positive":
        return torch.rand(shape, generator=gen) + 0.01
    if kind == "binary":
        return (torch.rand(shape, generator=gen) < 0.3).float()
    if kind == "quarters":
        return torch.randint(0, 5, shape, generator=gen) / 4
    return torch.full(shape, 0.5)


@st.composite
def nms_inputs(draw: st.DrawFn, kinds: list[str] = KINDS) -> dict:
    N, M = draw(st.sampled_from(GRIDS))
    return {
        "shape": (draw(st.integers(1, 4)), N, M),
        "k": draw(st.integers(0, 8)),
        "radius": draw(st.integers(0, 5)),
        "kind": draw(st.sampled_from(kinds)),
        "seed": draw(st.integers(0, 2**31)),
    }


def make_scores(case: dict, device: str) -> torch.Tensor:
    gen = torch.Generator().manual_seed(case["seed"])
    return random_scores(gen, case["shape"], case["kind"]).to(device)


def distance(u: int, v: int, N: int, M: int) -> int:
    """Chebyshev distance of views u, v: plain on elevation (clips), ring on azimuth (wraps)."""
    de = abs(u // M - v // M)
    da = abs(u % M - v % M)
    return max(de, min(da, M - da))


@settings(deadline=None, max_examples=300)
@given(case=nms_inputs())
def test_native_matches_reference(native_and_reference, device: str, case: dict) -> None:
    scores = make_scores(case, device)
    native, reference = native_and_reference(nms_rewards, scores, case["k"], case["radius"])
    assert native.shape == scores.shape
    assert native.dtype == torch.float32
    assert torch.equal(native, reference)


@settings(deadline=None, max_examples=80)
@given(case=nms_inputs(kinds=["positive", "quarters", "constant"]))
def test_greedy_suppression_properties(backend: str, device: str, case: dict) -> None:
    """Re-derive the kept peaks of strictly positive maps (so that kept <=> non-zero).

    At most k peaks, pairwise farther than ``radius``, with the input values; taken in order, each
    is the highest cell (lowest index among ties) outside the earlier peaks' neighbourhoods; fewer
    than k only when every cell is suppressed.
    """
    scores = make_scores(case, device)
    if case["kind"] == "quarters":
        scores = scores + 0.25  # {.25, ..., 1.25}: still many ties, never 0
    out = nms_rewards(scores, case["k"], case["radius"], backend=backend).cpu()
    _, N, M = scores.shape
    r = case["radius"]
    for b in range(scores.shape[0]):
        values = scores[b].flatten().tolist()
        kept_mask = out[b].flatten() != 0
        kept = torch.nonzero(kept_mask).flatten().tolist()
        assert len(kept) <= case["k"]
        assert out[b].flatten()[kept_mask].tolist() == [values[v] for v in kept]
        for i, u in enumerate(kept):
            for v in kept[i + 1 :]:
                assert distance(u, v, N, M) > r
        order = sorted(kept, key=lambda v: (-values[v], v))
        for i, peak in enumerate(order):
            free = [v for v in range(N * M) if all(distance(v, p, N, M) > r for p in order[:i])]
            best = max(free, key=lambda v: (values[v], -v))
            assert peak == best
        if len(kept) < case["k"]:
            assert all(any(distance(v, p, N, M) <= r for p in kept) for v in range(N * M))


def test_hand_computed_wrap_and_clip(backend: str, device: str) -> None:
    """N=3, M=4, radius 1, k=3.

        row 0: [9, 1,  2,   8  ]
        row 1: [3, 4,  5,   6  ]
        row 2: [7, .5, .25, .75]
    Peak 1: 9 at (0,0). Suppresses rows 0-1 (elevation clips: row 2 is not a neighbour) and
    azimuths {3, 0, 1} (azimuth wraps: 8 at (0,3) and 6 at (1,3) go across the seam).
    Peak 2: 7 at (2,0), left alive by the clip; suppresses rows 1-2, azimuths {3, 0, 1}.
    Peak 3: the rest is (0,2)=2, (1,2)=5, (2,2)=.25: 5 at (1,2).
    With elevation wrap (the authors' code) 7 would be suppressed; without azimuth wrap 8 would be
    peak 2.
    """
    scores = torch.tensor(
        [[[9, 1, 2, 8], [3, 4, 5, 6], [7, 0.5, 0.25, 0.75]]], device=device
    )  # fmt: skip
    expected = torch.zeros(1, 3, 4, device=device)
    expected[0, 0, 0], expected[0, 2, 0], expected[0, 1, 2] = 9, 7, 5
    assert torch.equal(nms_rewards(scores, 3, 1, backend=backend), expected)
    # After peak 3 every cell is suppressed: more iterations keep nothing more.
    assert torch.equal(nms_rewards(scores, 10, 1, backend=backend), expected)
    # k = 1 keeps only the global maximum.
    assert torch.equal(
        nms_rewards(scores, 1, 1, backend=backend), torch.where(scores == 9, scores, 0)
    )


def test_hand_computed_ties_go_to_lowest_index(backend: str, device: str) -> None:
    """A constant 2x5 map, radius 1: peak (0,0) suppresses azimuths {4, 0, 1} on both rows; the
    lowest remaining index is (0,2), which suppresses azimuths {1, 2, 3}: nothing is left.
    """
    scores = torch.full((1, 2, 5), 0.5, device=device)
    expected = torch.zeros(1, 2, 5, device=device)
    expected[0, 0, 0] = expected[0, 0, 2] = 0.5
    assert torch.equal(nms_rewards(scores, 4, 1, backend=backend), expected)


def test_hand_computed_negative_scores(backend: str, device: str) -> None:
    """Peaks are the highest cells even when every score is negative (1x5, radius 1, k 2):
    [-3, -1, -2, -5, -4] -> -1 at 1 suppresses {0, 1, 2}; then -4 at 4 (> -5) is kept.
    """
    scores = torch.tensor([[[-3.0, -1.0, -2.0, -5.0, -4.0]]], device=device)
    expected = torch.tensor([[[0.0, -1.0, 0.0, 0.0, -4.0]]], device=device)
    assert torch.equal(nms_rewards(scores, 2, 1, backend=backend), expected)


@settings(deadline=None, max_examples=40)
@given(case=nms_inputs())
def test_radius_zero_is_stable_top_k(backend: str, device: str, case: dict) -> None:
    """Radius 0 suppresses only the peak itself: the k highest cells, ties by lowest index."""
    scores = make_scores(case, device)
    out = nms_rewards(scores, case["k"], 0, backend=backend)
    flat = scores.flatten(1)
    order = torch.sort(-flat, dim=1, stable=True).indices[:, : case["k"]]
    expected = torch.zeros_like(flat).scatter(1, order, flat.gather(1, order))
    assert torch.equal(out.flatten(1), expected)


@pytest.mark.parametrize(("N", "M", "radius"), [(4, 8, 4), (5, 9, 4), (5, 9, 100), (1, 1, 1)])
def test_radius_covering_the_grid_keeps_one_peak(
    backend: str, device: str, N: int, M: int, radius: int
) -> None:
    """radius >= max(N - 1, M // 2) reaches every cell: only the first global maximum is kept."""
    scores = torch.randint(0, 3, (3, N, M), generator=torch.Generator().manual_seed(N)).float()
    scores = scores.to(device)
    out = nms_rewards(scores, 5, radius, backend=backend)
    flat = scores.flatten(1)
    first = flat.argmax(dim=1)  # documented: the first maximal index
    rows = torch.arange(3, device=device)
    expected = torch.zeros_like(flat)
    expected[rows, first] = flat[rows, first]
    assert torch.equal(out.flatten(1), expected)


@pytest.mark.parametrize(
    ("k", "radius"), [(2**62, 0), (2**62, 1), (2, 2**63 - 1), (2**70, 2**70), (3, 2**64)]
)
def test_huge_k_and_radius(backend: str, device: str, k: int, radius: int) -> None:
    """Any Python int works: k beyond N*M stops once every cell is suppressed, and a huge radius
    equals one that covers the grid.
    """
    scores = torch.rand(2, 5, 9, generator=torch.Generator().manual_seed(k % 1000)).to(device)
    out = nms_rewards(scores, k, radius, backend=backend)
    covered = min(k, 45), min(radius, 9)
    assert torch.equal(out, nms_rewards(scores, *covered, backend=backend))
    if radius >= 9:
        assert out.count_nonzero() == 2  # one peak per sample
    if radius == 0:
        assert torch.equal(out, scores)  # every cell is its own peak


def test_radius_just_below_the_ring(backend: str, device: str) -> None:
    """On one 1x8 row radius 3 leaves the opposite azimuth (ring distance 4) alive."""
    scores = torch.tensor([[[1.0, 0.9, 0.9, 0.9, 0.8, 0.9, 0.9, 0.9]]], device=device)
    expected = torch.tensor([[[1.0, 0, 0, 0, 0.8, 0, 0, 0]]], device=device)
    assert torch.equal(nms_rewards(scores, 8, 3, backend=backend), expected)


@pytest.mark.parametrize(
    ("shape", "k"),
    [((0, 4, 8), 3), ((2, 0, 8), 3), ((2, 4, 0), 3), ((3, 5, 9), 0), ((2, 1, 1), 2)],
)
def test_edge_shapes_and_k(backend: str, device: str, shape: tuple[int, ...], k: int) -> None:
    scores = torch.rand(shape, device=device) + 0.5
    out = nms_rewards(scores, k, 1, backend=backend)
    assert out.shape == scores.shape
    # k = 0 keeps nothing; a 1x1 grid keeps its single cell whatever k >= 1.
    assert torch.equal(out, scores if k and shape[1:] == (1, 1) else torch.zeros_like(scores))


def fresh(t: torch.Tensor) -> torch.Tensor:
    """A contiguous copy in new storage at offset 0."""
    return t.clone(memory_format=torch.contiguous_format)


def test_non_contiguous_inputs(backend: str, device: str) -> None:
    gen = torch.Generator().manual_seed(21)
    base = torch.randint(0, 5, (6, 9, 5), generator=gen).float().to(device) / 4
    offset = base.flatten()[7 : 7 + 2 * 5 * 9].view(2, 5, 9)  # contiguous, at a storage offset
    views = [
        base.transpose(1, 2),
        base[::2, :, :].transpose(1, 2)[:, 1:],
        base[:1, :4].expand(3, 4, 5),  # stride 0 over the batch
        offset,
    ]
    for scores in views:
        got = nms_rewards(scores, 4, 1, backend=backend)
        assert torch.equal(got, nms_rewards(fresh(scores), 4, 1, backend=backend))


def test_input_not_modified(backend: str, device: str) -> None:
    scores = torch.rand(2, 4, 8).to(device)
    copy = scores.clone()
    nms_rewards(scores, 4, 1, backend=backend)
    assert torch.equal(scores, copy)


def nan_at_one_cell() -> torch.Tensor:
    scores = torch.rand(2, 4, 8)
    scores[1, 3, 7] = float("nan")
    return scores


@pytest.mark.parametrize(
    ("scores", "k", "radius", "error", "match"),
    [
        (torch.rand(2, 4, 8, dtype=torch.float64), 4, 1, TypeError, "scores must have dtype"),
        (torch.ones(2, 4, 8, dtype=torch.int32), 4, 1, TypeError, "scores must have dtype"),
        (torch.rand(4, 8), 4, 1, ValueError, "scores must have 3 dim"),
        (torch.rand(1, 2, 4, 8), 4, 1, ValueError, "scores must have 3 dim"),
        (nan_at_one_cell(), 4, 1, ValueError, "scores contains NaN or infinite"),
        (torch.full((1, 4, 8), float("inf")), 4, 1, ValueError, "scores contains NaN or inf"),
        (torch.full((1, 4, 8), -float("inf")), 4, 1, ValueError, "scores contains NaN or inf"),
        (torch.rand(2, 4, 8), -1, 1, ValueError, "k must be >= 0"),
        (torch.rand(2, 4, 8), 4, -1, ValueError, "radius must be >= 0"),
        (torch.rand(2, 4, 8), True, 1, TypeError, "k must be an int"),
        (torch.rand(2, 4, 8), 4, False, TypeError, "radius must be an int"),
        (torch.rand(2, 4, 8), 4.0, 1, TypeError, "k must be an int"),
        (torch.rand(2, 4, 8), 4, "1", TypeError, "radius must be an int"),
        ([[[0.0]]], 4, 1, TypeError, r"scores must be a torch\.Tensor"),
    ],
)
def test_bad_arguments(backend: str, scores, k, radius, error: type, match: str) -> None:
    with pytest.raises(error, match=f"nms_rewards: {match}") as raised:
        nms_rewards(scores, k, radius, backend=backend)
    assert isinstance(raised.value, UserError), type(raised.value)  # the caller's error


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_grid_too_large_for_the_cuda_kernel_is_the_caller_s_error() -> None:
    # 256 x 256 views exceed the kernel's 48 KiB of shared memory (one byte per view).
    with pytest.raises(UserError, match="nms_rewards: the CUDA kernel supports at most 49152"):
        nms_rewards(torch.rand(1, 256, 256, device="cuda"), 2, 1, backend="native")


def test_bad_backend() -> None:
    with pytest.raises(ValueError, match="backend must be one of"):
        nms_rewards(torch.rand(2, 4, 8), 4, 1, backend="bogus")


def test_native_on_meta_device_is_a_runtime_error() -> None:
    scores = torch.zeros(2, 4, 8, device="meta")
    with pytest.raises(
        RuntimeError, match=r"backend='native' needs kernels for device type 'meta'"
    ):
        nms_rewards(scores, 4, 1, backend="native")
