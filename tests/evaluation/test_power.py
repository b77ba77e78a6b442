"""The power of the paired t test and the seeds a claim needs, against reference values and
a simulation of the test itself."""

from __future__ import annotations

import math

import pytest
import torch

from pyskick.evaluation.power import (
    joint_power,
    paired_t_power,
    seeds_for_joint_power,
    seeds_for_power,
)
from pyskick.evaluation.tdist import t_quantile


def simulated_power(effect: float, sd: float, seeds: int, trials: int = 40_000) -> float:
    """Rejection rate of the two-sided paired t test at 5 % over simulated experiments."""
    g = torch.Generator().manual_seed(seeds * 1000 + round(effect * 100))
    d = effect + sd * torch.randn(trials, seeds, generator=g, dtype=torch.float64)
    t = d.mean(1) / (d.std(1, unbiased=True) / math.sqrt(seeds))
    return float((t.abs() > t_quantile(0.975, seeds - 1)).double().mean())


@pytest.mark.parametrize("seeds", [2, 3, 5, 10, 40])
def test_without_an_effect_the_power_is_the_level(seeds):
    assert paired_t_power(0.0, 1.0, seeds) == pytest.approx(0.05, abs=1e-6)
    assert paired_t_power(0.0, 1.0, seeds, alpha=0.01) == pytest.approx(0.01, abs=1e-6)


@pytest.mark.parametrize(
    ("effect", "seeds", "expected"),
    # G*Power 3.1, t test of matched pairs, two-tailed, alpha 0.05 (dz = effect / sd).
    [(1.0, 10, 0.8031), (0.5, 34, 0.8078), (0.8, 15, 0.8213)],
)
def test_the_power_matches_published_values(effect, seeds, expected):
    assert paired_t_power(effect, 1.0, seeds) == pytest.approx(expected, abs=2e-3)


@pytest.mark.parametrize(
    ("effect", "sd", "seeds"), [(0.3, 0.25, 2), (0.3, 0.25, 4), (0.25, 0.3, 9), (-0.2, 0.3, 16)]
)
def test_the_power_matches_a_simulation_of_the_test(effect, sd, seeds):
    # 40,000 simulated experiments: a standard error of at most 0.0025.
    assert paired_t_power(effect, sd, seeds) == pytest.approx(
        simulated_power(effect, sd, seeds), abs=0.01
    )


@pytest.mark.parametrize(("effect", "sd"), [(0.31, 0.25), (0.25, 0.3), (1.0, 1.0), (0.1, 0.5)])
def test_the_seeds_needed_are_the_fewest_that_reach_the_power(effect, sd):
    seeds = seeds_for_power(effect, sd)
    assert seeds is not None
    assert paired_t_power(effect, sd, seeds) >= 0.9
    assert seeds == 2 or paired_t_power(effect, sd, seeds - 1) < 0.9
    if seeds <= 50:
        assert simulated_power(effect, sd, seeds) > 0.88


def test_the_seeds_needed_for_known_cases():
    assert seeds_for_power(1.0, 1.0) == 13  # dz = 1, 90 %: 12.7 paired samples, rounded up
    assert seeds_for_power(0.0, 1.0) is None  # no gap observed: nothing to power
    assert seeds_for_power(0.5, 0.0) == 2  # no spread: any two seeds resolve it
    assert seeds_for_power(1e-3, 1.0) is None  # beyond MAX_SEEDS
    assert seeds_for_power(-1.0, 1.0) == 13  # the sign does not matter


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: paired_t_power(1.0, 1.0, 1), "at least 2 seeds"),
        (lambda: paired_t_power(1.0, 0.0, 5), "positive sd"),
        (lambda: paired_t_power(1.0, 1.0, 5, alpha=1.5), "alpha"),
        (lambda: seeds_for_power(1.0, 1.0, power=1.0), "power"),
        (lambda: seeds_for_power(math.nan, 1.0), "finite"),
    ],
)
def test_bad_arguments_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def _pilot(effect: float, sd: float, seeds: int = 8) -> list[float]:
    """``seeds`` gaps whose mean is ``effect`` and standard deviation exactly ``sd``."""
    z = torch.linspace(-1.0, 1.0, seeds, dtype=torch.float64)
    z = (z - z.mean()) / z.std()
    return (effect + sd * z).tolist()


@pytest.mark.parametrize(
    ("effect", "sd", "seeds"), [(0.3, 0.25, 4), (0.25, 0.3, 9), (1.0, 1.0, 12)]
)
def test_one_part_joint_power_is_the_one_sided_t_test(effect, sd, seeds):
    # "Holds" is the interval above zero: the t test's upper tail, which for a positive gap is
    # the two-sided power less a lower tail of at most 0.025 * (1 - power) (here < 0.003).
    planned = joint_power([_pilot(effect, sd)], seeds)
    assert planned == pytest.approx(paired_t_power(effect, sd, seeds), abs=0.012)


def test_joint_power_of_several_parts():
    a, b = _pilot(0.3, 0.3), _pilot(0.5, 0.4)
    one, other = joint_power([a], 10), joint_power([b], 10)
    # The same gap twice is one part; parts that move together are as likely as the weaker.
    assert joint_power([a, a], 10) == pytest.approx(one, abs=0.01)
    assert joint_power([a, b], 10) == pytest.approx(min(one, other), abs=0.01)
    # Uncorrelated parts: both hold with the product of the chances.
    shuffled = [b[i] for i in (3, 6, 0, 5, 2, 7, 4, 1)]
    assert float(torch.corrcoef(torch.tensor([a, shuffled]))[0, 1]) == pytest.approx(0, abs=0.2)
    assert joint_power([a, shuffled], 10) < min(one, other) - 0.05
    # Without a gap a part holds with the test's upper tail alone (2.5 %).
    assert joint_power([_pilot(0.0, 1.0)], 10) == pytest.approx(0.025, abs=0.005)
    # A part without spread holds on every draw where its gap is positive.
    assert joint_power([[0.2] * 5], 3) == 1.0
    assert joint_power([[-0.2] * 5], 3) == 0.0
    # Deterministic for a seed; another seed draws other experiments.
    assert joint_power([a, b], 7) == joint_power([a, b], 7)
    assert joint_power([a, b], 7, seed=1) != joint_power([a, b], 7)


def test_seeds_for_joint_power_are_the_fewest_that_reach_it():
    parts = [_pilot(0.3, 0.3), _pilot(0.5, 0.4)]
    needed = seeds_for_joint_power(parts)
    assert needed is not None
    assert joint_power(parts, needed) >= 0.9 > joint_power(parts, needed - 1)
    # One part: about what the noncentral t says (its two-sided count, 13 at d = 1).
    assert seeds_for_joint_power([_pilot(1.0, 1.0)]) in (12, 13, 14)
    assert seeds_for_joint_power([_pilot(0.0, 1.0)]) is None  # no gap: never
    assert seeds_for_joint_power([_pilot(-1.0, 1.0)]) is None  # the other way: never
    assert seeds_for_joint_power([_pilot(0.05, 1.0)], max_seeds=64) is None


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: joint_power([], 5), "same >= 2 pilot seeds"),
        (lambda: joint_power([[1.0, 2.0], [1.0]], 5), "same >= 2 pilot seeds"),
        (lambda: joint_power([[1.0, math.inf]], 5), "not finite"),
        (lambda: joint_power([[1.0, 2.0]], 1), "at least 2 seeds"),
        (lambda: joint_power([[1.0, 2.0]], 5, alpha=0.0), "alpha"),
        (lambda: seeds_for_joint_power([[1.0, 2.0]], power=0.0), "power"),
    ],
)
def test_bad_joint_arguments_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()
