"""Paired statistics: Student's t, sign-flip permutations, seeds as replicates.

The statistics are described in docs/reproduce.md, "Comparing methods".

Oracles: closed forms of the t distribution at 1 and 2 degrees of freedom, published quantiles,
a brute-force enumeration of sign patterns written independently of the module, and
hand-computed means, standard errors and intervals.
"""

from __future__ import annotations

import itertools
import math
import statistics

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pyskick.evaluation.compare import (
    EXACT_PERMUTATION_LIMIT,
    compare_errors,
    paired_samples,
    paired_seeds,
    policy_gain_ratio,
    sign_flip_p,
)
from pyskick.evaluation.power import seeds_for_power
from pyskick.evaluation.tdist import betainc, t_quantile, t_two_sided_p

# ------------------------------------------------------------------------------ t distribution


@pytest.mark.parametrize(
    ("df", "expected"),
    [
        (1, 12.706204736),
        (2, 4.302652730),
        (3, 3.182446305),
        (4, 2.776445105),
        (9, 2.262157163),
        (29, 2.045229642),
        (79, 1.990450210),  # these two from mpmath (30 digits)
        (10_000, 1.960201240),
    ],
)
def test_t_quantile_matches_tables(df: int, expected: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(expected, rel=1e-8)
    assert t_quantile(0.025, df) == pytest.approx(-expected, rel=1e-8)


@given(t=st.floats(min_value=-200.0, max_value=200.0, allow_nan=False))
def test_t_p_closed_forms(t: float) -> None:
    # df = 1 is the Cauchy distribution; df = 2 has P(|T| >= t) = 1 - |t| / sqrt(t² + 2).
    assert t_two_sided_p(t, 1) == pytest.approx(1 - 2 / math.pi * math.atan(abs(t)), abs=1e-12)
    assert t_two_sided_p(t, 2) == pytest.approx(1 - abs(t) / math.sqrt(t * t + 2), abs=1e-12)


@given(
    t=st.floats(min_value=-50.0, max_value=50.0),
    df=st.floats(min_value=0.5, max_value=2000.0),
)
def test_t_p_matches_mpmath(t: float, df: float) -> None:
    # mpmath (a dependency of torch's sympy) at 30 digits: an independent implementation.
    import mpmath

    with mpmath.workdps(30):
        x = mpmath.mpf(df) / (df + mpmath.mpf(t) ** 2)
        expected = float(mpmath.betainc(df / 2, 0.5, 0, x, regularized=True))
    assert t_two_sided_p(t, df) == pytest.approx(expected, rel=1e-9, abs=1e-14)


@given(
    q=st.floats(min_value=1e-6, max_value=1 - 1e-6),
    df=st.floats(min_value=0.5, max_value=500.0),
)
def test_t_quantile_inverts_the_tail(q: float, df: float) -> None:
    t = t_quantile(q, df)
    tail = t_two_sided_p(t, df) / 2  # one-sided mass beyond |t|
    assert (tail if q < 0.5 else 1 - tail) == pytest.approx(q, rel=1e-7, abs=1e-12)


@given(
    a=st.floats(min_value=0.05, max_value=60.0),
    b=st.floats(min_value=0.05, max_value=60.0),
    # Below 1e-6, 1 - x rounds to 1 and the identity only holds up to that rounding.
    x=st.one_of(st.just(0.0), st.floats(min_value=1e-6, max_value=1.0)),
)
def test_betainc_symmetry_and_range(a: float, b: float, x: float) -> None:
    value = betainc(a, b, x)
    assert 0.0 <= value <= 1.0
    assert value + betainc(b, a, 1 - x) == pytest.approx(1.0, abs=1e-10)


@given(a=st.floats(min_value=0.1, max_value=20.0), x=st.floats(min_value=0.0, max_value=1.0))
def test_betainc_special_cases(a: float, x: float) -> None:
    assert betainc(a, 1.0, x) == pytest.approx(x**a, abs=1e-12)
    assert betainc(1.0, 1.0, x) == pytest.approx(x, abs=1e-12)


def test_t_distribution_bad_arguments() -> None:
    for call in (
        lambda: t_quantile(0.0, 3),
        lambda: t_quantile(1.0, 3),
        lambda: t_quantile(0.5, 0),
        lambda: t_two_sided_p(1.0, -1),
        lambda: t_two_sided_p(float("nan"), 3),
        lambda: betainc(0.0, 1.0, 0.5),
        lambda: betainc(1.0, 1.0, 1.5),
    ):
        with pytest.raises(ValueError):
            call()
    assert t_two_sided_p(float("inf"), 3) == 0.0
    assert t_quantile(0.5, 7) == 0.0


# ----------------------------------------------------------------------- sign-flip permutation


def brute_force_p(values: list[float]) -> float:
    """Every sign pattern, in plain Python: the share whose |sum| reaches the observed one."""
    observed = abs(sum(values))
    patterns = list(itertools.product((1, -1), repeat=len(values)))
    hits = sum(
        abs(sum(s * v for s, v in zip(signs, values, strict=True))) >= observed - 1e-12
        for signs in patterns
    )
    return hits / len(patterns)


def test_sign_flip_hand_computed() -> None:
    # ±1 ±2 ±3: |sums| are 6, 4, 2, 0, 0, 2, 4, 6 -> two of eight reach 6.
    assert sign_flip_p([1.0, 2.0, 3.0]) == pytest.approx(0.25)
    # Mean zero: every pattern is as extreme.
    assert sign_flip_p([1.0, -1.0]) == pytest.approx(1.0)
    # All differences equal: only the observed pattern and its mirror.
    assert sign_flip_p([0.5] * 10) == pytest.approx(2 / 2**10)


@given(
    st.lists(
        st.floats(min_value=-5, max_value=5, allow_nan=False).map(lambda v: round(v, 2)),
        min_size=1,
        max_size=10,
    )
)
def test_sign_flip_exact_matches_enumeration(values: list[float]) -> None:
    assert sign_flip_p(values) == pytest.approx(brute_force_p(values), abs=1e-12)


def test_sign_flip_monte_carlo_close_to_exact() -> None:
    # n = 18 is past the exact limit: 20,000 random patterns estimate the exact p (262,144
    # patterns enumerated here) within a few Monte-Carlo standard errors.
    generator = torch.Generator().manual_seed(5)
    values = (torch.randn(18, generator=generator, dtype=torch.float64) + 0.45).tolist()
    assert len(values) > EXACT_PERMUTATION_LIMIT
    exact = brute_force_p(values)
    estimate = sign_flip_p(values, n_permutations=20_000, seed=1)
    mc_se = math.sqrt(exact * (1 - exact) / 20_000)
    assert 0.001 < exact < 0.5
    assert abs(estimate - exact) < 4 * mc_se + 1e-4
    # Seeded: the same p every time; never exactly 0.
    assert sign_flip_p(values, n_permutations=20_000, seed=1) == estimate
    assert sign_flip_p([1.0] * 40, n_permutations=100) == pytest.approx(1 / 101)


def test_sign_flip_bad_input() -> None:
    with pytest.raises(ValueError, match="no differences"):
        sign_flip_p([])
    with pytest.raises(ValueError, match="NaN or infinite"):
        sign_flip_p([1.0, float("inf")])
    with pytest.raises(ValueError, match="positive"):
        sign_flip_p([1.0] * 20, n_permutations=0)


# ---------------------------------------------------------------------------- paired statistics


def test_paired_samples_hand_computed() -> None:
    # Differences ×1000: 1, 3, 0 -> mean 4/3, sd sqrt(7/3), se sd / sqrt(3).
    stat = paired_samples([0.010, 0.020, 0.030], [0.009, 0.017, 0.030])
    sd = math.sqrt(7 / 3)
    se = sd / math.sqrt(3)
    assert stat.n == 3
    assert stat.diff_x1000 == pytest.approx(4 / 3)
    assert stat.se_x1000 == pytest.approx(se)
    half = 4.302652730 * se
    assert stat.ci95_x1000[0] == pytest.approx(4 / 3 - half)
    assert stat.ci95_x1000[1] == pytest.approx(4 / 3 + half)
    t = (4 / 3) / se
    assert stat.p == pytest.approx(1 - t / math.sqrt(t * t + 2))  # df = 2 closed form
    assert stat.sign_flip_p == pytest.approx(brute_force_p([1.0, 3.0, 0.0]))
    assert not stat.excludes_zero


def test_the_headline_p_is_the_interval_s_dual_and_the_sign_flip_p_stands_beside_it() -> None:
    # Heavy-tailed differences ×1000 whose sign-flip p (6 of 256 sign patterns as extreme) is
    # below 0.05 while the t interval contains zero: the headline p must agree with the
    # interval (it was the sign-flip p, which contradicted it).
    d = [19.0, 0.2, 0.3, 0.01, 5.0, 38.0, 0.5, -0.04]
    stat = paired_samples([x / 1000 for x in d], [0.0] * 8)
    assert stat.sign_flip_p == pytest.approx(6 / 256)
    assert not stat.excludes_zero
    assert stat.p > 0.05
    mean = sum(d) / 8
    se = math.sqrt(sum((x - mean) ** 2 for x in d) / 7 / 8)
    assert stat.p == pytest.approx(t_two_sided_p(mean / se, 7))
    result = compare_errors(torch.tensor([x / 1000 for x in d]), torch.zeros(8), metric="avg")
    assert result.p == pytest.approx(stat.p)
    assert result.samples_sign_flip_p == pytest.approx(6 / 256)
    assert result.claim_verdict == "not resolved"
    assert result.to_dict()["samples_sign_flip_p"] == pytest.approx(6 / 256)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-50, 50, allow_nan=False, allow_subnormal=False), min_size=2, max_size=40),
    st.floats(-20, 20, allow_nan=False),
)
def test_p_below_005_exactly_when_the_interval_excludes_zero(values: list, shift: float) -> None:
    d = [v + shift for v in values]
    for stat in (paired_samples([x / 1000 for x in d], [0.0] * len(d)), paired_seeds(d)):
        lo, hi = stat.ci95_x1000
        if math.isnan(stat.p) or min(abs(lo), abs(hi)) < 1e-9 * (1 + abs(stat.diff_x1000)):
            continue  # an end of the interval at zero up to rounding: either answer is right
        assert (stat.p < 0.05) == stat.excludes_zero, (stat, d)


def test_paired_samples_needs_the_same_samples() -> None:
    with pytest.raises(ValueError, match="same samples"):
        paired_samples([0.1, 0.2], [0.1, 0.2, 0.3])


def test_paired_seeds_hand_computed() -> None:
    stat = paired_seeds([1.0, 2.0, 3.0])
    se = 1 / math.sqrt(3)
    assert stat.diff_x1000 == pytest.approx(2.0)
    assert stat.se_x1000 == pytest.approx(se)
    assert stat.ci95_x1000 == pytest.approx((2 - 4.302652730 * se, 2 + 4.302652730 * se))
    t = 2 / se
    assert stat.p == pytest.approx(1 - t / math.sqrt(t * t + 2))  # df = 2 closed form
    assert not stat.excludes_zero  # p = 0.074: three seeds are not enough here
    one = paired_seeds([1.5])
    assert one.n == 1
    assert one.diff_x1000 == 1.5
    assert math.isnan(one.se_x1000)
    assert paired_seeds([2.0, 2.0]).p == 0.0
    assert paired_seeds([0.0, 0.0]).p == 1.0


def correlated_errors(n: int, seeds: int, gap: float, noise: float, seed: int = 0) -> tuple:
    """Errors of two methods sharing a large per-sample difficulty (correlated, as in the
    demo), B better by ``gap`` plus per-seed training noise ``noise``."""
    g = torch.Generator().manual_seed(seed)
    difficulty = 0.015 + 0.006 * torch.rand(n, generator=g, dtype=torch.float64)
    a = difficulty + 0.0003 * torch.randn(seeds, n, generator=g, dtype=torch.float64)
    shift = gap + noise * torch.randn(seeds, 1, generator=g, dtype=torch.float64)
    b = difficulty - shift + 0.0003 * torch.randn(seeds, n, generator=g, dtype=torch.float64)
    return a, b


def test_compare_one_seed_is_within_run_and_says_so() -> None:
    a, b = correlated_errors(80, 1, 0.0005, 0.0)
    result = compare_errors(a[0], b[0], metric="avg")
    assert result.kind == "samples"
    assert result.n_seeds == 1
    assert result.n_samples == 80
    assert result.diff_x1000 == pytest.approx(float((a - b).mean()) * 1000)
    # Pairing removes the shared difficulty: the paired SE is a fraction of the unpaired one.
    assert result.se_x1000 < result.unpaired_se_x1000 / 5
    assert result.excludes_zero
    assert result.p < 0.001
    assert "B is better than A" in result.verdict()
    assert "training noise is not measured" in result.verdict()


def test_compare_seeds_are_the_replicates() -> None:
    a, b = correlated_errors(60, 4, 0.0004, 0.0002, seed=3)
    result = compare_errors(a, b, metric="adv")
    seed_diffs = ((a - b).mean(1) * 1000).tolist()
    assert result.kind == "seeds"
    assert result.n_seeds == 4
    assert result.seed_diffs_x1000 == pytest.approx(seed_diffs)
    assert result.diff_x1000 == pytest.approx(sum(seed_diffs) / 4)
    expected = paired_seeds(seed_diffs)
    assert result.se_x1000 == pytest.approx(expected.se_x1000)
    assert result.ci95_x1000 == pytest.approx(expected.ci95_x1000)
    assert result.p == pytest.approx(expected.p)
    # The within-run figure is kept for contrast: the seed-averaged per-sample differences.
    within = paired_samples(a.mean(0), b.mean(0))
    assert result.samples_se_x1000 == pytest.approx(within.se_x1000)
    payload = result.to_dict()
    assert payload["kind"] == "seeds"
    assert isinstance(payload["ci95_x1000"], list)


def test_compare_single_reference_pairs_with_every_seed() -> None:
    a, b = correlated_errors(30, 3, 0.001, 0.0001)
    result = compare_errors(a[0], b, metric="avg")  # e.g. one-view, trained once
    assert result.n_seeds == 3
    assert result.seed_diffs_x1000 == pytest.approx(((a[0] - b).mean(1) * 1000).tolist())


def test_compare_refuses_what_does_not_pair() -> None:
    a, b = correlated_errors(30, 3, 0.001, 0.0)
    with pytest.raises(ValueError, match="same test samples"):
        compare_errors(a, b[:, :20], metric="avg")
    with pytest.raises(ValueError, match="seeds do not pair"):
        compare_errors(a[:2], b, metric="avg")
    with pytest.raises(ValueError, match="not finite"):
        compare_errors(a * float("nan"), b, metric="avg")


def test_verdict_without_a_clear_difference() -> None:
    # Seed differences +1.0, -0.5, +0.8 (×1000): mean 0.43, CI far across zero.
    base = torch.linspace(0.01, 0.02, 25, dtype=torch.float64)
    shifts = torch.tensor([[0.001], [-0.0005], [0.0008]], dtype=torch.float64)
    result = compare_errors(base.expand(3, -1), base - shifts, metric="avg")
    assert result.seed_diffs_x1000 == pytest.approx((1.0, -0.5, 0.8))
    assert not result.excludes_zero
    assert result.verdict("ltla", "ours(rew)").startswith(
        "ours(rew) beats ltla: not resolved; no clear difference between ltla and ours(rew)"
    )
    assert result.claim_verdict == "not resolved"
    # The seeds' spread (their standard deviation) around their mean gap decides the seeds.
    spread = statistics.stdev([1.0, -0.5, 0.8])
    assert result.seeds_needed == seeds_for_power(statistics.mean([1.0, -0.5, 0.8]), spread)
    assert result.seeds_needed > 10
    assert f"needs ≈ {result.seeds_needed} seeds for 90% power" in result.verdict()
    assert result.to_dict()["seeds_needed"] == result.seeds_needed
    reversed_ = compare_errors(base - 0.001, base.expand(2, -1), metric="avg")
    assert reversed_.diff_x1000 == pytest.approx(-1.0)
    # Identical differences in both seeds: SE 0, the interval is the point itself.
    assert reversed_.excludes_zero
    assert reversed_.verdict("ltla", "ours(rew)").startswith(
        "ours(rew) beats ltla: contradicted; ltla is better than ours(rew)"
    )
    assert reversed_.to_dict()["claim_verdict"] == "contradicted"


def test_policy_gain_ratio_paper_values() -> None:
    # SUN360 avg in the paper: ltla 34.89 %, rnd-actions 19.09 % -> 1.83.
    assert policy_gain_ratio(34.89, 19.09) == pytest.approx(1.828, abs=1e-3)
    assert policy_gain_ratio(None, 19.09) is None
    assert policy_gain_ratio(10.0, 0.0) is None
    assert policy_gain_ratio(10.0, -3.0) is None
