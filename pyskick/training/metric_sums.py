"""Per-batch metrics summed over an epoch (and over the ranks of a run), read out as means."""

from __future__ import annotations

import torch

from pyskick.distributed import DistContext, all_reduce_sum


class MetricSums:
    """Running sums of named metrics and of the samples they cover.

    Each batch adds its metrics already summed over its samples (a batch mean times the batch
    size); :meth:`means` divides by the samples of all batches. Sums are float64, added in the
    order the batches come, so the means are exactly those of one float64 accumulator per name.
    """

    def __init__(self) -> None:
        self._sums: dict[str, float] = {}
        self.samples = 0.0
        """Samples covered (summed over ranks after :meth:`all_reduce`)."""

    def add(self, samples: float, **sums: float) -> None:
        """Add one batch: ``samples`` it covered and each metric's sum over them."""
        for name, value in sums.items():
            self._sums[name] = self._sums.get(name, 0.0) + float(value)
        self.samples += float(samples)

    def all_reduce(self, dist: DistContext) -> MetricSums:
        """The sums over every rank (the same names, added in the same order, on every rank);
        ``self`` in a single process."""
        if not dist.distributed:
            return self
        names = list(self._sums)
        values = torch.tensor([*(self._sums[n] for n in names), self.samples], dtype=torch.float64)
        total = all_reduce_sum(values, dist).tolist()
        out = MetricSums()
        out._sums = dict(zip(names, total[:-1], strict=True))
        out.samples = total[-1]
        return out

    def means(self) -> dict[str, float]:
        """Each metric's mean per sample, by name, in the order the names were first added.

        Raises:
            ValueError: no sample was added.
        """
        if self.samples <= 0:
            raise ValueError("no samples were added")
        return {name: value / self.samples for name, value in self._sums.items()}
