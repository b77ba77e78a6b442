"""``no_host_syncs``: each kind of host synchronisation is refused with the caller's line, and
the device-side ways of doing the same are let through (on the CPU, where the test suite runs)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from pyskick.training.syncs import HostSyncError, no_host_syncs

x = torch.arange(12.0).reshape(3, 4)
rows = torch.arange(3)
cols = torch.tensor([0, 2, 3])
flags = torch.zeros(3, 4, dtype=torch.bool)

REFUSED: dict[str, tuple[Callable[[], object], str]] = {
    "bool": (lambda: bool(x[0, 0]), "value read"),
    "float": (lambda: float(x[0, 0]), "value read"),
    "item": (lambda: x.sum().item(), "value read"),
    "tolist": (lambda: x.tolist(), "value read"),
    "nonzero": (lambda: x.nonzero(), "depends on the values"),
    "mask read": (lambda: x[x > 3], "boolean mask"),
    "repeats": (lambda: torch.repeat_interleave(x[0], cols.new_ones(4)), "output_size"),
    "host data": (lambda: torch.tensor([1.0, 2.0]), "transfer"),
    "number at tensor indices": (lambda: flags.clone().__setitem__((rows, cols), True), "number"),
    "number at a list index": (lambda: x.clone().__setitem__([0, 2], 0.0), "number"),
}

ALLOWED: dict[str, Callable[[], object]] = {
    "arithmetic": lambda: (x * 2).sum(dim=1),
    "number in a slice": lambda: x.clone().__setitem__((slice(None), 0), 0.0),
    "number at an int": lambda: x.clone().__setitem__(1, 5.0),
    "tensor at tensor indices": lambda: x.clone().__setitem__((rows, cols), torch.ones(3)),
    "scatter_ of a number": lambda: flags.clone().scatter_(1, cols[:, None], True),
    "masked_fill_": lambda: x.clone().masked_fill_(x > 3, 0.0),
    "repeats with output_size": lambda: torch.repeat_interleave(
        x[0], cols.new_ones(4), output_size=4
    ),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_host_synchronisation_is_refused_with_its_line(name: str) -> None:
    call, why = REFUSED[name]
    with pytest.raises(HostSyncError, match=why) as raised, no_host_syncs():
        call()
    assert f"{Path(__file__).resolve()}:" in str(raised.value)


@pytest.mark.parametrize("name", list(ALLOWED))
def test_device_side_work_passes(name: str) -> None:
    with no_host_syncs():
        ALLOWED[name]()


def test_outside_the_block_nothing_is_refused() -> None:
    with no_host_syncs():
        pass
    assert float(x[0, 0]) == 0.0
    flags.clone()[rows, cols] = True
