"""Correctness of ``greedy_coverage``: native vs reference, hand-computed trajectories."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pyskick.errors import UserError
from pyskick.ops import greedy_coverage

# Grids of the datasets (SUN360 4x8, ModelNet 5x9) and small or degenerate ones.
GRIDS = [(4, 8), (5, 9), (1, 1), (1, 4), (3, 1), (2, 3), (3, 4)]
ACTION_GRIDS = [
    (1, 1),
    (1, 3),
    (3, 1),
    (3, 3),
    (3, 5),
    (5, 5),
    (5, 3),
    (1, 7),
    (7, 7),
    (9, 9),
    (3, 21),
]
# continuous maps, and maps with many exact ties where the lowest-index rule decides.
KINDS = ["uniform", "sparse", "binary", "quarters", "saturating"]


def random_coverage(gen: torch.Generator, B: int, V: int, kind: str) -> torch.Tensor:
    """[B, V, V] float32 utilities in [0, 1] of the given ``kind``."""
    shape = (B, V, V)
    if kind == "uniform":
        return torch.rand(shape, generator=gen)
    if kind == "sparse":  # mostly 0: trajectories soon run out of gain and all gains tie at 0
        return torch.rand(shape, generator=gen) * (torch.rand(shape, generator=gen) < 0.1)
    if kind == "binary":
        return (torch.rand(shape, generator=gen) < 0.3).float()
    if kind == "quarters":
        return torch.randint(0, 5, shape, generator=gen) / 4
    # "saturating": large utilities, so most targets saturate at 1 within a step or two
    return 0.5 + 0.5 * torch.rand(shape, generator=gen)


@st.composite
def greedy_inputs(draw: st.DrawFn) -> dict:
    N, M = draw(st.sampled_from(GRIDS))
    V = N * M
    B, S = draw(st.integers(1, 3)), draw(st.integers(1, 4))  # empty shapes: test_empty_shapes
    borders = sorted({0, M - 1, V - M, V - 1, (N // 2) * M})
    start = st.one_of(st.sampled_from(borders), st.integers(0, V - 1))
    return {
        "N": N,
        "M": M,
        "B": B,
        "starts": draw(st.lists(st.lists(start, min_size=S, max_size=S), min_size=B, max_size=B)),
        "S": S,
        "steps": draw(st.integers(0, 6)),
        "action_grid": draw(st.sampled_from(ACTION_GRIDS)),
        "wrap_azimuth": draw(st.booleans()),
        "wrap_elevation": draw(st.booleans()),
        "kind": draw(st.sampled_from(KINDS)),
        "seed": draw(st.integers(0, 2**31)),
    }


def make_case(case: dict, device: str) -> tuple[torch.Tensor, torch.Tensor, int, dict]:
    gen = torch.Generator().manual_seed(case["seed"])
    V = case["N"] * case["M"]
    coverage = random_coverage(gen, case["B"], V, case["kind"]).to(device)
    starts = torch.tensor(case["starts"], dtype=torch.int64).reshape(case["B"], case["S"])
    options = {
        "n_elevations": case["N"],
        "n_azimuths": case["M"],
        "action_grid": case["action_grid"],
        "wrap_azimuth": case["wrap_azimuth"],
        "wrap_elevation": case["wrap_elevation"],
    }
    return coverage, starts.to(device), case["steps"], options


def move(view: int, action: int, N: int, M: int, options: dict) -> int:
    """The environment's transition (docs/paper-reference.md §2.3, §2.4), in plain Python."""
    dN, dM = options["action_grid"]
    e = view // M + action // dM - dN // 2
    a = view % M + action % dM - dM // 2
    e = e % N if options["wrap_elevation"] else min(max(e, 0), N - 1)
    a = a % M if options["wrap_azimuth"] else min(max(a, 0), M - 1)
    return e * M + a


def coverage_value(U: list[list[float]], views: set[int]) -> float:
    """Cov(S) = sum_t min(sum_{s in unique(S)} U[s][t], 1), in float64.

    The authors' objective is in docs/paper-reference.md §5.5.
    """
    return sum(min(sum(U[s][t] for s in sorted(views)), 1.0) for t in range(len(U)))


@settings(deadline=None, max_examples=300)
@given(case=greedy_inputs())
def test_native_matches_reference(native_and_reference, device: str, case: dict) -> None:
    coverage, starts, steps, options = make_case(case, device)
    (actions, views), (ref_actions, ref_views) = native_and_reference(
        greedy_coverage, coverage, starts, steps, **options
    )
    B, S = starts.shape
    assert actions.shape == (B, S, steps)
    assert views.shape == (B, S, steps + 1)
    assert actions.dtype == views.dtype == torch.int64
    assert torch.equal(actions, ref_actions)
    assert torch.equal(views, ref_views)


@settings(deadline=None, max_examples=60)
@given(case=greedy_inputs())
def test_each_step_is_the_greedy_choice(backend: str, device: str, case: dict) -> None:
    """Re-derive every step: views follow the move rules, and the action maximises the gain.

    On binary and quarter-step maps every gain is exact in float64, so the chosen action must be
    the lowest index among the maximal gains.
    """
    coverage, starts, steps, options = make_case(case, device)
    actions, views = greedy_coverage(coverage, starts, steps, backend=backend, **options)
    N, M = case["N"], case["M"]
    dN, dM = case["action_grid"]
    exact = case["kind"] in ("binary", "quarters")
    for b, row in enumerate(starts.tolist()):
        U = coverage[b].double().tolist()
        for s, start in enumerate(row):
            traj_actions, traj_views = actions[b, s].tolist(), views[b, s].tolist()
            assert traj_views[0] == start
            chosen = {start}
            for k, action in enumerate(traj_actions):
                assert 0 <= action < dN * dM
                current = traj_views[k]
                assert traj_views[k + 1] == move(current, action, N, M, options)
                base = coverage_value(U, chosen)
                gains = [
                    coverage_value(U, chosen | {move(current, c, N, M, options)}) - base
                    for c in range(dN * dM)
                ]
                best = max(gains)
                if exact:
                    assert action == gains.index(best)
                else:
                    # Float64 sums in another order: allow near-ties (< 1e-9) either way, but an
                    # exact tie (the same view, or all-zero gains) must go to the lower index.
                    assert gains[action] >= best - 1e-9
                    for g in gains[:action]:
                        assert g < gains[action] + 1e-9
                        assert g != gains[action]
                chosen.add(traj_views[k + 1])


def test_hand_computed_1x4(backend: str, device: str) -> None:
    """N=1, M=4, actions (1, 3) = [left, stay, right], azimuth wraps; start at view 0.

    U (source rows, target columns):
        U0 = [1, .25, 0, .5]   U1 = [0, 1, .5, 0]   U2 = [0, 0, .5, .5]   U3 = [0, 0, 0, .75]
    cov = [1, .25, 0, .5]
    step 1 from 0: left->3 gains min(.5+.75, 1) - .5 = .5; stay 0 (revisit);
                   right->1 gains (1 - .25) + .5 = 1.25 (target 1 saturates)  -> action 2, view 1
    cov = [1, 1.25, .5, .5]
    step 2 from 1: left->0 revisit 0; stay 0; right->2 gains .5 + .5 = 1       -> action 2, view 2
    cov = [1, 1.25, 1, 1]
    step 3 from 2: left->1 revisit 0; stay 0; right->3 is new but every target it helps is
                   saturated: gain 0. All gains 0: the tie goes to action 0   -> action 0, view 1
    step 4 from 1: left->0 revisit, stay, right->2 revisit: all 0             -> action 0, view 0
    """
    U = torch.tensor(
        [[1, 0.25, 0, 0.5], [0, 1, 0.5, 0], [0, 0, 0.5, 0.5], [0, 0, 0, 0.75]], device=device
    )
    actions, views = greedy_coverage(
        U[None], torch.tensor([[0]], device=device), 4, n_elevations=1, n_azimuths=4,
        action_grid=(1, 3), backend=backend,
    )  # fmt: skip
    assert actions.tolist() == [[[2, 2, 0, 0]]]
    assert views.tolist() == [[[0, 1, 2, 1, 0]]]


def test_gain_differences_below_float32_resolution_decide(backend: str, device: str) -> None:
    """Gains 1 and 1 + 2**-25: equal in float32, different in float64, which decides.

    N=1, M=3, actions (1, 3) = [left, stay, right], start at view 1 (all zeros, so every target
    is uncovered). Left reaches view 0 (gain 1); right reaches view 2 (gain 1 + 2**-25). A
    float32-only search would see a tie and take action 0; the float64 gain takes action 2.
    """
    tiny = 2.0**-25
    U = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, tiny, 1.0]], device=device)
    assert float(U[2].sum()) == 1.0  # the two gains really tie in float32
    actions, views = greedy_coverage(
        U[None], torch.tensor([[1]], device=device), 1, n_elevations=1, n_azimuths=3,
        action_grid=(1, 3), backend=backend,
    )  # fmt: skip
    assert actions.tolist() == [[[2]]]
    assert views.tolist() == [[[1, 2]]]


def test_hand_computed_tie_between_new_views(backend: str, device: str) -> None:
    """Two new views with equal positive gain: the lower action index wins.

    N=1, M=4, actions [left, stay, right], start 0, U0 = [1, 0, 0, 0], U1 = U3 = [0, .5, 0, .5],
    U2 = 0. Step 1: left->3 and right->1 both gain 1 -> action 0 (view 3). Step 2 from 3:
    left->2 gains 0 (U2 = 0), stay and right->0 are revisits: all 0 -> action 0 (view 2).
    """
    U = torch.tensor(
        [[1, 0, 0, 0], [0, 0.5, 0, 0.5], [0, 0, 0, 0], [0, 0.5, 0, 0.5]], device=device
    )
    actions, views = greedy_coverage(
        U[None], torch.tensor([[0]], device=device), 2, n_elevations=1, n_azimuths=4,
        action_grid=(1, 3), backend=backend,
    )  # fmt: skip
    assert actions.tolist() == [[[0, 0]]]
    assert views.tolist() == [[[0, 3, 2]]]


# Diagonal utilities: view v covers only itself, with weight w[v]; on the 2x3 grid (v = 3 n + m)
#     n=0: w = [1, .5, 0]      n=1: w = [.25, .5, .75]
# Actions (3, 3): a = (de + 1) * 3 + (da + 1); a0 = (-1, -1), a4 = stay, a8 = (+1, +1).
W_2X3 = [1, 0.5, 0, 0.25, 0.5, 0.75]


@pytest.mark.parametrize(
    ("wrap_azimuth", "wrap_elevation", "expected_actions", "expected_views"),
    [
        # Both axes clip. From (0,0): a0,a1,a3,a4 stay at 0 (revisit); a2 = (-1,+1) clips to
        # (0,1) gaining .5, as do a5 -> (0,1) and a8 -> (1,1): tie -> a2, view 1.
        # From (0,1): a8 -> (1,2) gains .75 (a6 -> (1,0) .25, a7 -> (1,1) .5)  -> a8, view 5.
        # From (1,2): a3 -> (1,1) .5 = a6 (elevation +1 clips to 1)            -> a3, view 4.
        # From (1,1): a3 -> (1,0) .25 = a6 -> (1,0)                            -> a3, view 3.
        # From (1,0): every reachable view is a revisit: all 0 -> a0 = (-1,-1) clips to (0,0).
        (False, False, [2, 8, 3, 3, 0], [0, 1, 5, 4, 3, 0]),
        # Both axes wrap. From (0,0): a0 -> (1,2) .75 (a6 too)                   -> a0, view 5.
        # From (1,2): a0 -> (0,1) .5, a3 -> (1,1) .5, a6 -> (0,1) .5          -> a0, view 1.
        # From (0,1): a0 -> (1,0) .25, a1 -> (1,1) .5, a7 -> (1,1) .5         -> a1, view 4.
        # From (1,1): a3 -> (1,0) .25 (a0 -> (0,0), a1 -> (0,1) revisits)     -> a3, view 3.
        # From (1,0): the only new view is (0,2) with w = 0: all gains 0    -> a0 = (0,2), view 2.
        (True, True, [0, 0, 1, 3, 0], [0, 5, 1, 4, 3, 2]),
        # Azimuth wraps, elevation clips (the default). From (0,0): a0 = (-1,-1) -> (0,2) gains 0;
        # a2 -> (0,1) .5; a6 -> (1,2) .75 -> a6, view 5. From (1,2): a0 -> (0,1) .5,
        # a2 -> (0,0) revisit, a3 -> (1,1) .5 -> a0, view 1. From (0,1): a0 -> (0,0) revisit,
        # a1 -> (0,1), a2 -> (0,2) 0, a6 -> (1,0) .25, a7 -> (1,1) .5 -> a7, view 4.
        # From (1,1): a3 -> (1,0) .25 -> a3, view 3. From (1,0): all 0 -> a0 = (0,-1->2), view 2.
        (True, False, [6, 0, 7, 3, 0], [0, 5, 1, 4, 3, 2]),
    ],
)
def test_hand_computed_2x3_wrap_and_clip(
    backend: str,
    device: str,
    wrap_azimuth: bool,
    wrap_elevation: bool,
    expected_actions: list[int],
    expected_views: list[int],
) -> None:
    U = torch.diag(torch.tensor(W_2X3, device=device))[None]
    actions, views = greedy_coverage(
        U, torch.tensor([[0]], device=device), 5, n_elevations=2, n_azimuths=3,
        action_grid=(3, 3), wrap_azimuth=wrap_azimuth, wrap_elevation=wrap_elevation,
        backend=backend,
    )  # fmt: skip
    assert actions.tolist() == [[expected_actions]]
    assert views.tolist() == [[expected_views]]


def test_elevation_clips_at_both_borders(backend: str, device: str) -> None:
    """N=3, M=1, actions (3, 1) = [up, stay, down]; U diagonal [1, 0, 1].

    Clipped elevation: from the bottom (start 2, cov [0, 0, 1]) up -> 1 gains 0, down clips in
    place (revisit, 0): action 0 to view 1; then up -> 0 gains 1: action 0, view 0. From the top
    (start 0, cov [1, 0, 0]) up clips in place and down -> 1 gains 0: action 0 stays at 0, twice.
    Wrapped elevation instead: down from the bottom reaches 0 and up from the top reaches 2, each
    gaining 1.
    """
    U = torch.diag(torch.tensor([1.0, 0.0, 1.0], device=device))[None]
    starts = torch.tensor([[2, 0]], device=device)
    options = {"n_elevations": 3, "n_azimuths": 1, "action_grid": (3, 1), "backend": backend}
    actions, views = greedy_coverage(U, starts, 2, **options)
    assert actions.tolist() == [[[0, 0], [0, 0]]]
    assert views.tolist() == [[[2, 1, 0], [0, 0, 0]]]
    actions, views = greedy_coverage(U, starts, 1, wrap_elevation=True, **options)
    assert actions.tolist() == [[[2], [0]]]
    assert views.tolist() == [[[2, 0], [0, 2]]]


def test_batch_and_starts_are_independent(backend: str, device: str) -> None:
    """Each (sample, start) trajectory equals the same trajectory computed alone."""
    gen = torch.Generator().manual_seed(11)
    coverage = torch.rand(3, 32, 32, generator=gen).to(device)
    starts = torch.tensor([[0, 7, 31], [24, 3, 3], [16, 8, 15]], device=device)
    actions, views = greedy_coverage(
        coverage, starts, 5, n_elevations=4, n_azimuths=8, backend=backend
    )
    for b in range(3):
        for s in range(3):
            a, v = greedy_coverage(
                coverage[b : b + 1], starts[b : b + 1, s : s + 1], 5,
                n_elevations=4, n_azimuths=8, backend=backend,
            )  # fmt: skip
            assert torch.equal(a[0, 0], actions[b, s])
            assert torch.equal(v[0, 0], views[b, s])


@pytest.mark.parametrize(("B", "S", "steps"), [(0, 3, 4), (2, 0, 4), (2, 3, 0), (0, 0, 0)])
def test_empty_shapes(backend: str, device: str, B: int, S: int, steps: int) -> None:
    coverage = torch.rand(B, 45, 45, device=device)
    starts = torch.arange(B * S, device=device).reshape(B, S) % 45
    actions, views = greedy_coverage(
        coverage, starts, steps, n_elevations=5, n_azimuths=9, backend=backend
    )
    assert actions.shape == (B, S, steps)
    assert views.shape == (B, S, steps + 1)
    assert actions.dtype == views.dtype == torch.int64
    assert torch.equal(views[..., 0], starts)


def test_single_view_grid(backend: str, device: str) -> None:
    """N = M = 1: every action stays at view 0 and gains 0, so every step is action 0."""
    U = torch.tensor([[[0.5]]], device=device)
    actions, views = greedy_coverage(
        U, torch.zeros(1, 2, dtype=torch.int64, device=device), 3,
        n_elevations=1, n_azimuths=1, action_grid=(5, 5), backend=backend,
    )  # fmt: skip
    assert torch.equal(actions, torch.zeros(1, 2, 3, dtype=torch.int64, device=device))
    assert torch.equal(views, torch.zeros(1, 2, 4, dtype=torch.int64, device=device))


def test_non_contiguous_inputs(backend: str, device: str) -> None:
    gen = torch.Generator().manual_seed(12)
    coverage = torch.rand(4, 32, 32, generator=gen).to(device)[::2].transpose(1, 2)
    starts = torch.tensor([[0, 5, 9, 31], [1, 2, 3, 4]], device=device).t()[:2]  # [2, 2] view
    assert not coverage.is_contiguous()
    assert not starts.is_contiguous()
    options = {"n_elevations": 4, "n_azimuths": 8, "backend": backend}
    got = greedy_coverage(coverage, starts, 4, **options)
    want = greedy_coverage(coverage.contiguous(), starts.contiguous(), 4, **options)
    assert torch.equal(got[0], want[0])
    assert torch.equal(got[1], want[1])


def test_inputs_not_modified(backend: str, device: str) -> None:
    coverage = torch.rand(1, 6, 6).to(device)
    starts = torch.tensor([[0, 5]], device=device)
    coverage_copy, starts_copy = coverage.clone(), starts.clone()
    greedy_coverage(coverage, starts, 3, n_elevations=2, n_azimuths=3, backend=backend)
    assert torch.equal(coverage, coverage_copy)
    assert torch.equal(starts, starts_copy)


def good_arguments(device: str = "cpu") -> dict:
    return {
        "coverage": torch.rand(2, 6, 6, device=device),
        "starts": torch.zeros(2, 3, dtype=torch.int64, device=device),
        "steps": 3,
        "n_elevations": 2,
        "n_azimuths": 3,
    }


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"coverage": torch.rand(2, 6, 6, dtype=torch.float64)}, TypeError, "coverage must have"),
        ({"coverage": torch.ones(2, 6, 6, dtype=torch.int32)}, TypeError, "coverage must have"),
        ({"starts": torch.zeros(2, 3, dtype=torch.int32)}, TypeError, "starts must have dtype"),
        ({"starts": torch.zeros(2, 3)}, TypeError, "starts must have dtype"),
        ({"coverage": torch.rand(6, 6)}, ValueError, "coverage must have 3 dim"),
        ({"starts": torch.zeros(6, dtype=torch.int64)}, ValueError, "starts must have 2 dim"),
        ({"coverage": torch.rand(2, 6, 7)}, ValueError, r"coverage must have shape \[B, 6, 6\]"),
        ({"coverage": torch.rand(2, 8, 8)}, ValueError, r"coverage must have shape \[B, 6, 6\]"),
        ({"n_azimuths": 4}, ValueError, r"coverage must have shape \[B, 8, 8\]"),
        ({"starts": torch.zeros(3, 3, dtype=torch.int64)}, ValueError, r"starts must have shape"),
        ({"starts": torch.tensor([[0], [-1]])}, ValueError, r"starts must lie in \[0, 6\)"),
        ({"starts": torch.tensor([[0], [6]])}, ValueError, r"starts must lie in \[0, 6\)"),
        ({"coverage": torch.full((2, 6, 6), 1.5)}, ValueError, r"coverage must lie in \[0, 1\]"),
        ({"coverage": torch.full((2, 6, 6), -0.1)}, ValueError, r"coverage must lie in \[0, 1\]"),
        (
            {"coverage": torch.rand(2, 6, 6).index_fill_(2, torch.tensor([4]), float("nan"))},
            ValueError,
            r"coverage must lie in \[0, 1\]",
        ),
        ({"steps": -1}, ValueError, "steps must be >= 0"),
        ({"steps": True}, TypeError, "steps must be an int"),
        ({"steps": 2.0}, TypeError, "steps must be an int"),
        ({"n_elevations": 0}, ValueError, "n_elevations must be >= 1"),
        ({"n_azimuths": False}, TypeError, "n_azimuths must be an int"),
        ({"action_grid": (3, 4)}, ValueError, "action_grid must be odd"),
        ({"action_grid": (2, 5)}, ValueError, "action_grid must be odd"),
        ({"action_grid": (0, 5)}, ValueError, r"action_grid\[0\] must be >= 1"),
        ({"action_grid": (-3, 5)}, ValueError, r"action_grid\[0\] must be >= 1"),
        ({"action_grid": (3,)}, TypeError, "action_grid must be a pair"),
        ({"action_grid": 3}, TypeError, "action_grid must be a pair"),
        ({"action_grid": (3, True)}, TypeError, r"action_grid\[1\] must be an int"),
        ({"coverage": [[0.0]]}, TypeError, "coverage must be a torch.Tensor"),
        ({"starts": [[0]]}, TypeError, "starts must be a torch.Tensor"),
    ],
)
def test_bad_arguments(backend: str, change: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=f"greedy_coverage: {match}") as raised:
        greedy_coverage(**{**good_arguments(), **change}, backend=backend)
    assert isinstance(raised.value, UserError), type(raised.value)  # the caller's error


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_grid_too_large_for_the_cuda_kernel_is_the_caller_s_error() -> None:
    # 2 x 2731 views exceed the kernel's 48 KiB of shared memory (9 bytes per view).
    V = 2 * 2731
    arguments = {
        "coverage": torch.zeros(1, V, V, device="cuda"),
        "starts": torch.zeros(1, 1, dtype=torch.int64, device="cuda"),
        "steps": 1,
        "n_elevations": 2,
        "n_azimuths": 2731,
    }
    with pytest.raises(UserError, match="greedy_coverage: the CUDA kernel supports at most 5461"):
        greedy_coverage(**arguments, backend="native")


def test_bad_backend() -> None:
    with pytest.raises(ValueError, match="backend must be one of"):
        greedy_coverage(**good_arguments(), backend="bogus")


def test_native_on_meta_device_is_a_runtime_error() -> None:
    with pytest.raises(
        RuntimeError, match=r"backend='native' needs kernels for device type 'meta'"
    ):
        greedy_coverage(**good_arguments("meta"), backend="native")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_tensors_on_different_devices() -> None:
    arguments = {**good_arguments(), "coverage": torch.rand(2, 6, 6, device="cuda")}
    with pytest.raises(ValueError, match=r"one device.*coverage on cuda.*starts on cpu"):
        greedy_coverage(**arguments)


@given(greedy_inputs())
@settings(max_examples=40, deadline=None)
def test_unchecked_calls_give_the_checked_result(case: dict) -> None:
    """check_values=False skips the value checks (no wait for a GPU), nothing else."""
    gen = torch.Generator().manual_seed(case["seed"])
    coverage = random_coverage(gen, case["B"], case["N"] * case["M"], case["kind"])
    starts = torch.tensor(case["starts"], dtype=torch.int64)
    arguments = dict(n_elevations=case["N"], n_azimuths=case["M"], action_grid=case["action_grid"])
    for backend in ("native", "reference"):
        checked = greedy_coverage(coverage, starts, case["steps"], backend=backend, **arguments)
        unchecked = greedy_coverage(
            coverage, starts, case["steps"], backend=backend, check_values=False, **arguments
        )
        assert all(torch.equal(a, b) for a, b in zip(checked, unchecked, strict=True))


@pytest.mark.parametrize("start", [-1, 6, 2**40])
def test_the_cpu_kernel_refuses_starts_out_of_range_even_unchecked(start: int) -> None:
    """The kernel reads no memory out of bounds whatever it is given (its own check)."""
    arguments = {**good_arguments(), "starts": torch.tensor([[0], [start]])}
    with pytest.raises(ValueError, match=r"greedy_coverage: starts must lie in \[0, 6\)"):
        greedy_coverage(**arguments, backend="native", check_values=False)
