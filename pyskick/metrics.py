"""The evaluation metrics of the paper (docs/paper-reference.md §6): a closed table of two.

A metric is which start views a test viewgrid is evaluated from and how the final-step errors
of its episodes (one per start) reduce to the sample's error:

- ``avg``: every other elevation and azimuth (elevations 0, 2, ..., azimuths 0, 2, ...), the
  mean over those starts;
- ``adv``: all ``N * M`` views, the worst (max) start.

:data:`METRICS` holds them. It is closed, not an extension point (no hook adds a metric: a
metric of the paper is "mean or max of the final errors over some starts", and the reported
tables, claims and stored evaluations assume these two). :class:`~pyskick.training.TrainConfig`
validates ``val_metric`` against it, ``pyskick evaluate`` and ``pyskick compare`` offer its names,
``pyskick reproduce`` evaluates every one of them and the report has a column pair per metric.
:data:`EVERY_START` is not a reported metric: it is what a sidekick that scores every view asks
for (all views, in view order).

This module imports neither torch nor the rest of pyskick, so that the command line can list
the metrics without loading torch; the evaluation turns :meth:`Metric.starts` into tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from torch import Tensor

Reduction = Literal["mean", "max"]


def alternate_views(n_elevations: int, n_azimuths: int) -> tuple[int, ...]:
    """Views ``n * M + m`` at every other elevation and azimuth (2 x 4 = 8 of SUN360's 4 x 8)."""
    return tuple(
        n * n_azimuths + m for n in range(0, n_elevations, 2) for m in range(0, n_azimuths, 2)
    )


def all_views(n_elevations: int, n_azimuths: int) -> tuple[int, ...]:
    """Every view ``0 .. N * M - 1``, in view order."""
    return tuple(range(n_elevations * n_azimuths))


@dataclass(frozen=True)
class Metric:
    """One evaluation metric: start views and the reduction over them."""

    name: str
    """What users type (``--metric avg``) and what results record (``EvalResult.metric``)."""
    doc: str
    """One line: the starts and the reduction (shown by ``pyskick evaluate --help``)."""
    start_views: Callable[[int, int], tuple[int, ...]]
    """``(n_elevations, n_azimuths) -> views`` ``n * M + m`` to start episodes from."""
    reduction: Reduction
    """How a sample's per-start errors become its error: their mean or their max."""

    def starts(self, n_elevations: int, n_azimuths: int) -> tuple[int, ...]:
        """The start views of an ``n_elevations x n_azimuths`` grid."""
        return self.start_views(n_elevations, n_azimuths)

    def reduce(self, per_start: Tensor) -> Tensor:
        """``[n, S]`` errors from the starts -> ``[n]`` per-sample errors."""
        return per_start.mean(1) if self.reduction == "mean" else per_start.amax(1)


METRICS: Mapping[str, Metric] = MappingProxyType(
    {
        metric.name: metric
        for metric in (
            Metric(
                "avg",
                "every other elevation and azimuth as starts, mean over starts",
                alternate_views,
                "mean",
            ),
            Metric("adv", "all starts, worst start per sample", all_views, "max"),
        )
    }
)
"""The reported metrics by name, in the order of the paper's Table 1 (read-only)."""

DEFAULT_METRIC = "avg"
"""The metric of ``pyskick evaluate`` and of validation (``TrainConfig.val_metric``) when none
is given."""

EVERY_START = Metric(
    "every-start", "all starts, in view order, mean over starts", all_views, "mean"
)
"""Every view as a start: what a sidekick that scores each view on its own asks for (its
``per_start`` errors are in view order); not a reported metric."""


def get_metric(metric: str | Metric) -> Metric:
    """The registered metric ``metric`` names (a :class:`Metric` is returned as it is).

    Raises:
        UserError: not a registered name; the message lists the valid ones.
    """
    if isinstance(metric, Metric):
        return metric
    if not isinstance(metric, str) or metric not in METRICS:
        from pyskick.errors import UserError  # torch-free, like this module; only when needed

        raise UserError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    return METRICS[metric]


def metrics_help() -> str:
    """``"avg: ...; adv: ..."``: every metric with its one-line description."""
    return "; ".join(f"{metric.name}: {metric.doc}" for metric in METRICS.values()) + "."
