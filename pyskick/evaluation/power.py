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
        raise ValueError(f"a paired t test needs at least 2 seeds, got {seeds}")
    if not (math.isfinite(effect) and math.isfinite(sd) and sd > 0):
        raise ValueError(f"need a finite effect and a positive sd, got {effect}, {sd}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
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
        raise ValueError(f"power must be in (0, 1), got {power}")
    if not math.isfinite(effect) or not math.isfinite(sd) or sd < 0:
        raise ValueError(f"need a finite effect and sd >= 0, got {effect}, {sd}")
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
