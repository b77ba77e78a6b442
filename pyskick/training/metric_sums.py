"""Per-batch metrics summed over an epoch (and over the ranks of a run), read out as means."""

from __future__ import annotations

import torch
from torch import Tensor

from pyskick.distributed import DistContext, all_reduce_sum


class MetricSums:
    """Running sums of named metrics and of the samples they cover.

    Each batch adds its metrics already summed over its samples (a batch mean times the batch
    size); :meth:`means` divides by the samples of all batches. Sums are float64, added in the
    order the batches come, so the means are exactly those of one float64 accumulator per name.
    A sum given as a tensor is added on its device without being read (the training step never
    waits for the device); :meth:`means` reads them all at once.
    """

    def __init__(self) -> None:
        self._sums: dict[str, Tensor | float] = {}
        self.samples = 0.0
        """Samples covered (summed over ranks after :meth:`all_reduce`)."""

    def add(self, samples: float, **sums: float | Tensor) -> None:
        """Add one batch: ``samples`` it covered and each metric's sum over them (a number or
        a 0-d tensor)."""
        for name, value in sums.items():
            value = value.detach().double() if isinstance(value, Tensor) else float(value)
            self._sums[name] = self._sums.get(name, 0.0) + value
        self.samples += float(samples)

    def _values(self) -> list[float]:
        """Every sum on the host (one read of the device for the tensor sums)."""
        values = list(self._sums.values())
        tensors = [v for v in values if isinstance(v, Tensor)]
        read = iter(torch.stack(tensors).tolist() if tensors else [])
        return [next(read) if isinstance(v, Tensor) else float(v) for v in values]

    def all_reduce(self, dist: DistContext, device: torch.device | None = None) -> MetricSums:
        """The sums over every rank (the same names, added in the same order, on every rank);
        ``self`` in a single process. ``device``: where the collective runs (the training
        device: nccl reduces only CUDA tensors)."""
        if not dist.distributed:
            return self
        names = list(self._sums)
        values = torch.tensor([*self._values(), self.samples], dtype=torch.float64)
        total = all_reduce_sum(values.to(device or "cpu"), dist).tolist()
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
        values = self._values()
        return {name: value / self.samples for name, value in zip(self._sums, values, strict=True)}
