"""``bench --training``'s floating-point figures: the device's matrix-product rate."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from pyskick.training import bench


def test_matmul_rate_is_the_products_flops_over_the_median_of_five_timings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The first timing's start (untimed: its end is never read), then the start and end of
    # five timed ones: 2, 6, 3, 5, 4 s.
    ticks = iter([0.0, 10.0, 12.0, 20.0, 26.0, 30.0, 33.0, 40.0, 45.0, 50.0, 54.0])
    monkeypatch.setattr(bench, "_clock", lambda: next(ticks))
    rate = bench.matmul_rate(torch.device("cpu"), torch.float32, n=8, products=3)
    assert rate == 3 * 2 * 8**3 / 4
    assert next(ticks, None) is None  # one untimed timing, five timed


class _Products(TorchDispatchMode):
    """Records every matrix product's operand shapes and dtype."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[Any, ...]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if func is torch.ops.aten.mm.default:
            self.seen.append((tuple(args[0].shape), tuple(args[1].shape), args[0].dtype))
        return func(*args, **(kwargs or {}))


def test_matmul_rate_multiplies_the_devices_size_in_the_dtype_it_is_given() -> None:
    state = torch.random.get_rng_state()
    with _Products() as products:
        rate = bench.matmul_rate(torch.device("cpu"), torch.float32)
    n = bench.MATMUL_SIZE["cpu"]
    assert products.seen == [((n, n), (n, n), torch.float32)] * 6 * bench.MATMUL_PRODUCTS["cpu"]
    assert rate > 0
    assert torch.equal(torch.random.get_rng_state(), state)  # the global generator untouched
    with _Products() as products:
        bench.matmul_rate(torch.device("cpu"), torch.bfloat16, n=16, products=2)
    assert products.seen == [((16, 16), (16, 16), torch.bfloat16)] * 12


class _CountsNothing(bench.FlopCounterMode):
    """A counter that saw no matrix product (a step whose work ran where it cannot look)."""

    def get_total_flops(self) -> int:
        return 0


def test_a_counted_step_with_no_work_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "FlopCounterMode", _CountsNothing)
    with pytest.raises(RuntimeError, match="dispatched no matrix product or convolution"):
        bench.bench_training(runs=(1,), steps=1, warmup=0, batch_size=4, T=2, view_size=16)
