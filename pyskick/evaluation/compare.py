"""Paired comparisons of two methods evaluated on the same test samples.

Why and how: docs/reproduce.md, "Comparing methods".

Every method is evaluated on the same test viewgrids from the same start views, so the
per-sample errors of two methods are strongly correlated (0.8–0.9 on the demo): their
*differences* are far less noisy than either error, and comparing means with unpaired standard
errors hides real gaps. Two levels of noise are measured:

- **samples** (within one pair of runs): per-test-sample differences ``d_i = a_i - b_i``; their
  mean, standard error ``sd(d) / sqrt(n)``, 95 % Student-t interval (``n - 1`` degrees of
  freedom) and the t test's p-value, the interval's dual (``p < 0.05`` exactly when the interval
  excludes zero), and beside them a two-sided sign-flip permutation p-value that assumes no
  normality (exact for ``n <= 16``, else ``n_permutations`` random flips, seeded: the p-value is
  reproducible), shown for contrast and never used for a verdict;
- **seeds** (across training runs): run k of every method uses seed k (same data order and
  start views), so the seed is the unit of replication of training noise: each seed's paired
  mean difference ``D_k``, their mean, standard error ``sd(D) / sqrt(K)``, 95 % t-interval
  (``K - 1`` degrees of freedom) and the t-test p-value.

With two or more seeds the verdict rests on the seeds (``kind = "seeds"``); with one seed only
the within-run statistic exists (``kind = "samples"``), which says nothing about training
noise, and the result says so.

Sign convention: ``diff = reference error - candidate error``, so a positive difference means
the candidate (B) is better (lower error). Everything is reported ×1000 like the paper.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import torch
from torch import Tensor

from pyskick.errors import UserError, UserTypeError
from pyskick.evaluation.power import seeds_for_power
from pyskick.evaluation.tdist import t_quantile, t_two_sided_p

Kind = Literal["seeds", "samples"]

EXACT_PERMUTATION_LIMIT = 16
"""Up to this many samples the sign-flip test enumerates all ``2^n`` sign patterns."""
DEFAULT_PERMUTATIONS = 20_000
"""Random sign patterns of the Monte-Carlo sign-flip test (p resolution ≈ 5e-5)."""
CONFIDENCE = 0.95


@dataclass(frozen=True)
class PairedStat:
    """Mean of paired differences with its standard error, 95 % t-interval and p-value (×1000).

    Attributes:
        diff_x1000: mean difference ×1000 (positive: the candidate is better).
        se_x1000: its standard error ×1000.
        ci95_x1000: the 95 % Student-t interval ×1000, ``(lo, hi)``.
        p: two-sided p-value of "no difference", Student's t test (the interval's dual).
        n: number of differences (samples or seeds).
        sign_flip_p: the sign-flip permutation p-value of the same differences (within a run
            only; None across seeds), for contrast.
    """

    diff_x1000: float
    se_x1000: float
    ci95_x1000: tuple[float, float]
    p: float
    n: int
    sign_flip_p: float | None = None

    @property
    def excludes_zero(self) -> bool:
        """The 95 % interval lies entirely on one side of zero."""
        lo, hi = self.ci95_x1000
        return lo > 0 or hi < 0


def _check_differences(values: Tensor | Sequence[float], what: str) -> Tensor:
    tensor = torch.as_tensor(values, dtype=torch.float64).flatten().cpu()
    if tensor.numel() == 0:
        raise UserError(f"no {what} to compare")
    if not bool(torch.isfinite(tensor).all()):
        raise UserError(f"{what} contain NaN or infinite values")
    return tensor


def _t_interval(mean: float, se: float, n: int) -> tuple[float, float]:
    if n < 2:
        return (math.nan, math.nan)
    half = t_quantile(0.5 + CONFIDENCE / 2, n - 1) * se
    return (mean - half, mean + half)


def _t_p(mean: float, se: float, n: int) -> float:
    """Two-sided p of Student's t test of ``mean == 0`` (``n - 1`` degrees of freedom): NaN
    for one value; with no spread, 1 for a zero mean and 0 otherwise (as the zero-width
    interval says)."""
    if n < 2:
        return math.nan
    if se == 0.0:
        return 1.0 if mean == 0.0 else 0.0
    return t_two_sided_p(mean / se, n - 1)


def sign_flip_p(
    differences: Tensor | Sequence[float],
    *,
    n_permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
) -> float:
    """Two-sided sign-flip permutation p-value of ``mean(differences) == 0``.

    Under the null hypothesis each paired difference is as likely to have either sign, so the
    observed ``|mean|`` is compared with the means of the differences under random sign
    patterns. Up to :data:`EXACT_PERMUTATION_LIMIT` values every pattern is enumerated (the
    exact p-value); beyond, ``n_permutations`` patterns are drawn from a generator seeded with
    ``seed`` and ``p = (1 + #{|mean*| >= |mean|}) / (1 + n_permutations)``, never 0.

    Args:
        differences: ``[n]`` paired differences.
        n_permutations: random patterns when ``n`` exceeds the exact limit.
        seed: seed of the random patterns.

    Raises:
        ValueError: empty or non-finite input, or ``n_permutations < 1``.
    """
    d = _check_differences(differences, "differences")
    if isinstance(n_permutations, bool) or not isinstance(n_permutations, int):
        raise UserTypeError(f"n_permutations must be an int, got {n_permutations!r}")
    if n_permutations < 1:
        raise UserError(f"n_permutations must be positive, got {n_permutations}")
    n = d.numel()
    observed = abs(float(d.sum()))
    # Sums under sign flips equal to the observed one up to rounding count as "as extreme".
    tolerance = 1e-9 * max(float(d.abs().sum()), 1e-300)
    if n <= EXACT_PERMUTATION_LIMIT:
        signs = torch.tensor(list(itertools.product((1.0, -1.0), repeat=n)), dtype=torch.float64)
        sums = (signs @ d).abs()
        return float((sums >= observed - tolerance).double().mean())
    generator = torch.Generator().manual_seed(seed)
    extreme = 0
    chunk = max(1, 4_000_000 // n)
    for lo in range(0, n_permutations, chunk):
        count = min(chunk, n_permutations - lo)
        signs = torch.randint(0, 2, (count, n), generator=generator, dtype=torch.int8)
        sums = ((signs.double() * 2.0 - 1.0) @ d).abs()
        extreme += int((sums >= observed - tolerance).sum())
    return (1 + extreme) / (1 + n_permutations)


def paired_samples(
    reference: Tensor | Sequence[float],
    candidate: Tensor | Sequence[float],
    *,
    n_permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
) -> PairedStat:
    """Within one pair of runs: statistics of the per-sample differences ``reference -
    candidate`` (errors, unscaled; reported ×1000): the t interval and its test's p-value, and
    the sign-flip p-value beside them.

    Args:
        reference: ``[n]`` per-sample errors of the reference method (A).
        candidate: ``[n]`` per-sample errors of the candidate (B), same samples in the same
            order.
        n_permutations, seed: of :func:`sign_flip_p`.

    Raises:
        ValueError: different lengths, empty or non-finite input.
    """
    a = _check_differences(reference, "reference errors")
    b = _check_differences(candidate, "candidate errors")
    if a.shape != b.shape:
        raise UserError(
            f"paired errors need the same samples: {a.numel()} reference and {b.numel()} "
            "candidate values"
        )
    d = (a - b) * 1000.0
    n = d.numel()
    mean = float(d.mean())
    se = float(d.std(unbiased=True)) / math.sqrt(n) if n > 1 else math.nan
    flips = sign_flip_p(d, n_permutations=n_permutations, seed=seed)
    return PairedStat(mean, se, _t_interval(mean, se, n), _t_p(mean, se, n), n, flips)


def paired_seeds(seed_differences_x1000: Tensor | Sequence[float]) -> PairedStat:
    """Across seeds: statistics of each seed's paired mean difference (already ×1000).

    The p-value is Student's t test with ``K - 1`` degrees of freedom (NaN for one seed; 0 when
    every seed gives exactly the same non-zero difference).

    Raises:
        ValueError: empty or non-finite input.
    """
    d = _check_differences(seed_differences_x1000, "seed differences")
    K = d.numel()
    mean = float(d.mean())
    if K < 2:
        return PairedStat(mean, math.nan, (math.nan, math.nan), math.nan, K)
    se = float(d.std(unbiased=True)) / math.sqrt(K)
    return PairedStat(mean, se, _t_interval(mean, se, K), _t_p(mean, se, K), K)


@dataclass(frozen=True)
class Comparison:
    """Reference (A) versus candidate (B) on one metric; positive differences favour B.

    The headline (``diff_x1000``, ``se_x1000``, ``ci95_x1000``, ``p``) is of ``kind``:
    ``"seeds"`` with two or more seeds, ``"samples"`` with one. The other figures are there
    for contrast.

    Attributes:
        metric: ``"avg"`` or ``"adv"``.
        diff_x1000: mean over seeds of the paired mean differences, ×1000.
        se_x1000: standard error of ``kind``.
        ci95_x1000: 95 % t-interval of ``kind``.
        p: two-sided p-value of ``kind``, Student's t test (the interval's dual: below 0.05
            exactly when the interval excludes zero).
        n_seeds: paired training runs (seed k of A with seed k of B).
        n_samples: test samples per run.
        kind: ``"seeds"`` or ``"samples"``.
        samples_se_x1000: within-run paired standard error of the seed-averaged per-sample
            differences (what ``kind = "samples"`` would report).
        unpaired_se_x1000: ``sqrt(se_A² + se_B²)`` of the seed-averaged errors, ignoring the
            pairing (shown for contrast only; never used for a verdict).
        seed_diffs_x1000: each seed's paired mean difference.
        single_run: ``"reference"`` or ``"candidate"`` when that side is one run paired with
            every seed of the other (its own training noise is then not measured), else None.
        samples_sign_flip_p: the sign-flip permutation p-value of the seed-averaged
            per-sample differences (no normality assumed; for contrast, never a verdict).
    """

    metric: str
    diff_x1000: float
    se_x1000: float
    ci95_x1000: tuple[float, float]
    p: float
    n_seeds: int
    n_samples: int
    kind: Kind
    samples_se_x1000: float
    unpaired_se_x1000: float
    seed_diffs_x1000: tuple[float, ...]
    single_run: str | None = None
    samples_sign_flip_p: float | None = None

    @property
    def excludes_zero(self) -> bool:
        """The 95 % interval of ``kind`` lies entirely on one side of zero."""
        lo, hi = self.ci95_x1000
        return lo > 0 or hi < 0

    @property
    def claim_verdict(self) -> str:
        """The claim "B beats A": ``"holds"`` (the interval is above zero), ``"contradicted"``
        (below zero) or ``"not resolved"`` (it contains zero)."""
        lo, hi = self.ci95_x1000
        if lo > 0:
            return "holds"
        if hi < 0:
            return "contradicted"
        return "not resolved"

    @property
    def seeds_needed(self) -> int | None:
        """Seeds for 90 % power at the observed gap and seed spread (across seeds only; None
        with one seed or no gap; :func:`pyskick.evaluation.power.seeds_for_power`)."""
        if self.kind != "seeds" or self.n_seeds < 2 or math.isnan(self.se_x1000):
            return None
        return seeds_for_power(self.diff_x1000, self.se_x1000 * math.sqrt(self.n_seeds))

    def verdict(self, reference: str = "A", candidate: str = "B") -> str:
        """One sentence: the claim "B beats A" judged (holds, contradicted, not resolved),
        which is better and by how much; an unresolved gap across seeds adds the seeds its
        spread would need for 90 % power."""
        lo, hi = self.ci95_x1000
        gap = f"{self.diff_x1000:+.2f} ×1000, 95% CI [{lo:.2f}, {hi:.2f}], p = {self.p:.2g}"
        claim = f"{candidate} beats {reference}: {self.claim_verdict}; "
        if self.excludes_zero:
            better, worse = (
                (candidate, reference) if self.diff_x1000 > 0 else (reference, candidate)
            )
            text = f"{claim}{better} is better than {worse} ({gap})"
        else:
            text = (
                f"{claim}no clear difference between {reference} and {candidate} ({gap}; CI "
                "includes 0)"
            )
            if self.seeds_needed is not None:
                text += (
                    f"; the observed seed spread needs ≈ {self.seeds_needed} seeds for 90% power"
                )
        if self.kind == "samples":
            text += "; one training run each: training noise is not measured"
        elif self.single_run is not None:
            single = reference if self.single_run == "reference" else candidate
            text += (
                f"; {single} is one run paired with every seed: its training noise is not measured"
            )
        return text

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (tuples become lists, NaN becomes None), with ``claim_verdict`` and
        ``seeds_needed``."""
        out = _json_ready(asdict(self))
        out["claim_verdict"] = self.claim_verdict
        out["seeds_needed"] = self.seeds_needed
        return out


def compare_errors(
    reference: Tensor,
    candidate: Tensor,
    *,
    metric: str,
    n_permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
) -> Comparison:
    """Compare per-sample errors of K paired seeds of two methods.

    Args:
        reference: ``[K, n]`` errors of A (row k: seed k), or ``[n]`` for one run.
        candidate: ``[K, n]`` errors of B, the same samples in the same order. A single row on
            either side (a method trained once, like one-view) pairs with every seed of the
            other.
        metric: the metric's name (recorded).
        n_permutations, seed: of the within-run sign-flip test.

    Raises:
        ValueError: shapes that do not pair, empty or non-finite errors.
    """
    a = torch.as_tensor(reference, dtype=torch.float64)
    b = torch.as_tensor(candidate, dtype=torch.float64)
    a = a[None] if a.dim() == 1 else a
    b = b[None] if b.dim() == 1 else b
    if a.dim() != 2 or b.dim() != 2:
        raise UserError("errors must be [n] or [seeds, n]")
    if a.shape[1] != b.shape[1]:
        raise UserError(
            f"paired errors need the same test samples: {a.shape[1]} and {b.shape[1]} samples"
        )
    if a.shape[0] != b.shape[0] and 1 not in (a.shape[0], b.shape[0]):
        raise UserError(
            f"seeds do not pair: {a.shape[0]} and {b.shape[0]} runs (use the same seeds)"
        )
    K = max(a.shape[0], b.shape[0])
    single = None
    if K > 1 and a.shape[0] == 1:
        single = "reference"
    elif K > 1 and b.shape[0] == 1:
        single = "candidate"
    a, b = a.expand(K, -1), b.expand(K, -1)
    for name, x in (("reference", a), ("candidate", b)):
        if x.numel() == 0 or not bool(torch.isfinite(x).all()):
            raise UserError(f"{name} errors are empty or not finite")
    seed_diffs = ((a - b).mean(1) * 1000.0).tolist()
    within = paired_samples(a.mean(0), b.mean(0), n_permutations=n_permutations, seed=seed)
    n = a.shape[1]
    unpaired = (
        math.hypot(float(a.mean(0).std()), float(b.mean(0).std())) / math.sqrt(n) * 1000.0
        if n > 1
        else math.nan
    )
    if K >= 2:
        head, kind = paired_seeds(seed_diffs), "seeds"
    else:
        head, kind = within, "samples"
    return Comparison(
        metric=metric,
        diff_x1000=head.diff_x1000,
        se_x1000=head.se_x1000,
        ci95_x1000=head.ci95_x1000,
        p=head.p,
        n_seeds=K,
        n_samples=n,
        kind=kind,  # type: ignore[arg-type]
        samples_se_x1000=within.se_x1000,
        unpaired_se_x1000=unpaired,
        seed_diffs_x1000=tuple(seed_diffs),
        single_run=single,
        samples_sign_flip_p=within.sign_flip_p,
    )


def policy_gain_ratio(method_pct: float | None, random_pct: float | None) -> float | None:
    """A method's % improvement over one-view divided by rnd-actions'.

    The policy gain ratio of docs/reproduce.md, "Comparing methods".

    None when either is unknown or random motions did not improve on one-view (the ratio is
    then meaningless).
    """
    if method_pct is None or random_pct is None or random_pct <= 0:
        return None
    return method_pct / random_pct


def _json_ready(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, tuple | list):
        return [_json_ready(item) for item in value]
    if isinstance(value, dict):
        return {key: _json_ready(item) for key, item in value.items()}
    return value
