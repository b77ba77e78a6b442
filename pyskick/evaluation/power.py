"""How many seeds a paired comparison needs: the power of the paired t test.

A claim "B beats A" is judged by the 95 % t interval of the paired differences across seeds
(:func:`pyskick.evaluation.compare.paired_seeds`). When that interval includes zero the claim is
*not resolved*, and the useful question is how many seeds would resolve it: with the observed
seed-to-seed spread ``sd`` of the paired differences, and a true gap equal to the observed mean
``effect``, the smallest K for which a two-sided paired t test at level ``alpha`` rejects "no
difference" with probability ``power``.

The power of the t test is an integral over the noncentral t distribution,
``P(|T'| > c)`` with ``T' = (Z + λ) / sqrt(V / ν)``, ``Z`` standard normal, ``V ~ χ²_ν``,
``ν = K − 1``, ``λ = effect · sqrt(K) / sd`` and ``c`` the t quantile; it is computed by
integrating the normal tails against the chi-square density (Simpson's rule in ``sqrt(V)``,
where the density is smooth), without SciPy. ``tests/evaluation/test_power.py`` checks it against a
simulation of the test itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pyskick.errors import UserError
from pyskick.evaluation.tdist import t_quantile

DEFAULT_POWER = 0.9
DEFAULT_ALPHA = 0.05
MAX_SEEDS = 10_000
_GRID = 2000  # Simpson intervals of the chi-square integral (even)


def _normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def paired_t_power(effect: float, sd: float, seeds: int, alpha: float = DEFAULT_ALPHA) -> float:
    """Probability that a two-sided paired t test at level ``alpha`` on ``seeds`` paired runs
    rejects "no difference" when the true mean difference is ``effect`` and the differences
    scatter with standard deviation ``sd`` (normally).

    Raises:
        ValueError: ``seeds < 2``, ``sd <= 0``, ``alpha`` outside (0, 1) or a non-finite value.
    """
    if seeds < 2:
        raise UserError(f"a paired t test needs at least 2 seeds, got {seeds}")
    if not (math.isfinite(effect) and math.isfinite(sd) and sd > 0):
        raise UserError(f"need a finite effect and a positive sd, got {effect}, {sd}")
    if not 0.0 < alpha < 1.0:
        raise UserError(f"alpha must be in (0, 1), got {alpha}")
    df = seeds - 1
    critical = t_quantile(1.0 - alpha / 2.0, df)
    shift = abs(effect) * math.sqrt(seeds) / sd
    # V ~ chi-square(df), written V = U² so that the density of U, 2 u^(df-1) e^(-u²/2) /
    # (2^(df/2) Γ(df/2)), is smooth at 0 for every df; integrate P(|Z + shift| > c U / sqrt(df)).
    top = math.sqrt(df + 12.0 * math.sqrt(2.0 * df) + 40.0)
    step = top / _GRID
    log_norm = math.log(2.0) - (df / 2.0) * math.log(2.0) - math.lgamma(df / 2.0)
    total = 0.0
    for i in range(_GRID + 1):
        u = i * step
        if u == 0.0:
            density = math.exp(log_norm) if df == 1 else 0.0
        else:
            density = math.exp(log_norm + (df - 1.0) * math.log(u) - u * u / 2.0)
        bound = critical * u / math.sqrt(df)
        reject = _normal_cdf(shift - bound) + _normal_cdf(-shift - bound)
        weight = 1.0 if i in (0, _GRID) else (4.0 if i % 2 else 2.0)
        total += weight * density * reject
    return min(1.0, max(0.0, total * step / 3.0))


def seeds_for_power(
    effect: float,
    sd: float,
    power: float = DEFAULT_POWER,
    alpha: float = DEFAULT_ALPHA,
    max_seeds: int = MAX_SEEDS,
) -> int | None:
    """The fewest paired seeds (at least 2) whose paired t test reaches ``power`` for a true
    gap ``effect`` with seed spread ``sd``; None when no gap was observed (``effect == 0``) or
    more than ``max_seeds`` would be needed. ``sd == 0`` needs 2.
    """
    if not 0.0 < power < 1.0:
        raise UserError(f"power must be in (0, 1), got {power}")
    if not math.isfinite(effect) or not math.isfinite(sd) or sd < 0:
        raise UserError(f"need a finite effect and sd >= 0, got {effect}, {sd}")
    if effect == 0.0:
        return None
    if sd == 0.0:
        return 2
    if paired_t_power(effect, sd, max_seeds, alpha) < power:
        return None
    lo, hi = 1, 2  # power(lo) < target <= power(hi); power grows with the seeds
    while paired_t_power(effect, sd, hi, alpha) < power:
        lo, hi = hi, min(2 * hi, max_seeds)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mid >= 2 and paired_t_power(effect, sd, mid, alpha) >= power:
            hi = mid
        else:
            lo = mid
    return hi


MAX_PLANNED_SEEDS = 256
"""The most seeds :func:`seeds_for_joint_power` searches by default (it simulates each count
it tries); a claim that needs more is said to need "more than" this."""
JOINT_SIMULATIONS = 20_000
"""Simulated experiments behind :func:`joint_power` (a standard error of at most 0.0035)."""
_SIM_CHUNK = 1_000  # simulated experiments per step: memory stays at chunk x seeds x parts


def joint_power(
    pilot: Sequence[Sequence[float]],
    seeds: int,
    *,
    alpha: float = DEFAULT_ALPHA,
    simulations: int = JOINT_SIMULATIONS,
    seed: int = 0,
) -> float:
    """The power of a claim judged by several paired gaps at once, planned from a pilot.

    A claim *holds* when the two-sided ``1 - alpha`` t interval of every one of its parts (e.g.
    avg and adv) lies above zero (:func:`pyskick.experiments.claims.verdict_of`). Treating the
    pilot's seeds as draws of a multivariate normal with the parts' observed means and
    covariance (their correlation matters: avg and adv gaps of one seed move together), this
    is the share of ``simulations`` experiments of ``seeds`` seeds in which the claim holds.
    Deterministic for a given ``seed``.

    Args:
        pilot: per part, the pilot's per-seed gaps in the claimed direction (positive: the
            claim's side); every part has the same seeds, at least 2.
        seeds: seeds of the planned experiment (at least 2).

    Raises:
        ValueError: no part, parts of unequal or fewer than 2 seeds, a non-finite gap,
            ``seeds < 2``, ``alpha`` outside (0, 1) or ``simulations < 1``.
    """
    import torch

    if not pilot or len({len(part) for part in pilot}) != 1 or len(pilot[0]) < 2:
        raise UserError("a power plan needs every part's gaps on the same >= 2 pilot seeds")
    if seeds < 2:
        raise UserError(f"a paired t test needs at least 2 seeds, got {seeds}")
    if not 0.0 < alpha < 1.0:
        raise UserError(f"alpha must be in (0, 1), got {alpha}")
    if simulations < 1:
        raise UserError(f"need at least one simulation, got {simulations}")
    gaps = torch.tensor(pilot, dtype=torch.float64).T  # [pilot seeds, parts]
    if not bool(torch.isfinite(gaps).all()):
        raise UserError("a pilot gap is not finite")
    mean = gaps.mean(0)
    cov = torch.atleast_2d(torch.cov(gaps.T))
    # A square root of the covariance that exists when it is singular (a part without spread,
    # parts that move together): V diag(sqrt(λ)).
    values, vectors = torch.linalg.eigh(cov)
    root = vectors * values.clamp(min=0.0).sqrt()
    critical = t_quantile(1.0 - alpha / 2.0, seeds - 1)
    generator = torch.Generator().manual_seed(seed)
    held = 0
    for start in range(0, simulations, _SIM_CHUNK):
        n = min(_SIM_CHUNK, simulations - start)
        noise = torch.randn(n, seeds, mean.numel(), generator=generator, dtype=torch.float64)
        draws = mean + noise @ root.T  # [n, seeds, parts]
        low = draws.mean(1) - critical * draws.std(1) / math.sqrt(seeds)
        held += int((low > 0).all(1).sum())
    return held / simulations


def seeds_for_joint_power(
    pilot: Sequence[Sequence[float]],
    power: float = DEFAULT_POWER,
    *,
    alpha: float = DEFAULT_ALPHA,
    max_seeds: int = MAX_PLANNED_SEEDS,
) -> int | None:
    """The fewest seeds (at least 2) whose :func:`joint_power` reaches ``power``; None when
    ``max_seeds`` do not (no gap in the claimed direction, or too small a one)."""
    if not 0.0 < power < 1.0:
        raise UserError(f"power must be in (0, 1), got {power}")
    if max_seeds < 2:
        raise UserError(f"max_seeds must be at least 2, got {max_seeds}")

    def enough(n: int) -> bool:
        return joint_power(pilot, n, alpha=alpha) >= power

    lo, hi = 1, 2  # not enough(lo) (1 seed never is); double hi until enough(hi)
    while not enough(hi):
        if hi == max_seeds:
            return None
        lo, hi = hi, min(2 * hi, max_seeds)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mid >= 2 and enough(mid):
            hi = mid
        else:
            lo = mid
    return hi
