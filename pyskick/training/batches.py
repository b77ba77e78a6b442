"""Where an epoch's batches come from: the order of the viewgrids, their start views, and the
viewgrids on the device (docs/training.md, "Device data").

Every epoch reshuffles the training set and draws fresh starts from a generator seeded by
``(seed, epoch)`` (:func:`epoch_order`), so any epoch's batches are reproducible on their own.
The order and starts of a whole epoch are moved to the device once; the viewgrids are either
resident on the device (:class:`GridSource` with ``resident``: each batch is a gather there) or
stay on the host, each batch gathered there and copied from pinned memory without waiting.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor

from pyskick.errors import UserError
from pyskick.training.step import Batch

DEVICE_DATA_SHARE = 4
"""``data_on_device = "auto"`` keeps the viewgrids on a GPU when they take at most a quarter
of its free memory."""


def epoch_order(
    seed: int,
    epoch: int,
    n: int,
    batch_size: int,
    n_views: int,
    *,
    rank: int = 0,
    world_size: int = 1,
) -> tuple[Tensor, Tensor]:
    """This rank's ``[n_batches, B_local]`` sample indices and start views of ``epoch`` (CPU).

    The permutation and the starts of the *global* batches come from a generator seeded by
    ``seed * 100_003 + epoch``, identical on every rank; rank r takes the r-th slice of each
    global batch, so a run on k processes sees the same batches as a single process. The last
    ``n % batch_size`` samples of each (reshuffled) epoch are left out.
    """
    generator = torch.Generator().manual_seed(seed * 100_003 + epoch)
    n_batches = n // batch_size
    order = torch.randperm(n, generator=generator)[: n_batches * batch_size]
    starts = torch.randint(n_views, (n_batches * batch_size,), generator=generator)
    local = batch_size // world_size
    lo = rank * local
    shape = (n_batches, batch_size)
    return order.view(shape)[:, lo : lo + local], starts.view(shape)[:, lo : lo + local]


def resolve_data_on_device(mode: str, grids: list[Tensor], device: torch.device) -> bool:
    """Whether the viewgrids should live on ``device`` for ``mode`` (``"auto"``, ``"on"``,
    ``"off"``). On the CPU the data already is where it computes: True.

    Raises:
        ValueError: ``"on"`` but they do not fit in the device's free memory.
    """
    if device.type == "cpu":
        return True
    if mode == "off":
        return False
    need = sum(g.numel() * g.element_size() for g in grids)
    free = _free_memory(device)
    if mode == "on":
        if need > free:
            raise UserError(
                f"data_on_device = 'on': the viewgrids take {need / 2**30:.1f} GiB but {device} "
                f"has {free / 2**30:.1f} GiB free; use 'auto' or 'off'"
            )
        return True
    return need * DEVICE_DATA_SHARE <= free


def _free_memory(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    return 0


class GridSource:
    """Viewgrids as the training loop reads them.

    Args:
        grids: ``[n, N, M, C, H, W]`` uint8 on the host.
        device: where the episodes run.
        resident: keep a copy on ``device`` (on the CPU, ``grids`` itself).
    """

    def __init__(self, grids: Tensor, device: torch.device, *, resident: bool) -> None:
        self.host = grids
        self.device = device
        self.resident: Tensor | None = None
        if device.type == "cpu":
            self.resident = grids
        elif resident:
            self.resident = grids.to(device)

    @property
    def on_device(self) -> bool:
        """Whether the viewgrids live on the device."""
        return self.resident is not None

    def rows(self, host_indices: Tensor, device_indices: Tensor) -> Tensor:
        """The viewgrids at ``host_indices`` (same values as ``device_indices``) on the device:
        a gather there when resident, else a gather on the host copied from pinned memory
        without waiting (the caching host allocator keeps the buffer until the copy is done)."""
        if self.resident is not None:
            index = (
                device_indices if self.resident.device == device_indices.device else host_indices
            )
            return self.resident[index]
        rows = self.host[host_indices]
        return rows.pin_memory().to(self.device, non_blocking=True)


def epoch_batches(
    source: GridSource, order: Tensor, starts: Tensor, device: torch.device
) -> Iterator[Batch]:
    """The batches of one epoch on ``device``: ``order`` and ``starts`` (``[n_batches, B]``,
    host) are moved there once, and each batch's viewgrids are fetched one batch ahead, so
    that a copy from the host overlaps the step before it."""
    device_order = order.to(device)
    device_starts = starts.to(device)
    n_batches = order.shape[0]
    if n_batches == 0:
        return
    upcoming = source.rows(order[0], device_order[0])
    for b in range(n_batches):
        grids = upcoming
        if b + 1 < n_batches:
            upcoming = source.rows(order[b + 1], device_order[b + 1])
        yield Batch(device_order[b], device_starts[b], grids)
