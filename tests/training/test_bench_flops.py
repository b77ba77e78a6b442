"""``bench --training``'s floating-point figures: the device's matrix-product rate and a
step's counted work."""

from __future__ import annotations

import pytest
import torch

from pyskick.training import bench


def test_matmul_rate_is_a_products_flops_over_the_median_of_five_timed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The first product's start (untimed: its end is never read), then the start and end of
    # five timed products: 2, 6, 3, 5, 4 s.
    ticks = iter([0.0, 10.0, 12.0, 20.0, 26.0, 30.0, 33.0, 40.0, 45.0, 50.0, 54.0])
    monkeypatch.setattr(bench.time, "perf_counter", lambda: next(ticks, 1e9))
    assert bench.matmul_rate(torch.device("cpu"), torch.float32, n=8) == 2 * 8**3 / 4
    assert next(ticks, None) is None  # every tick read: one untimed product, five timed


def test_matmul_rate_defaults_to_the_devices_size(monkeypatch: pytest.MonkeyPatch) -> None:
    sides = []

    def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        sides.append((a.shape, b.shape, a.dtype))
        return a

    monkeypatch.setattr(bench.torch, "mm", mm)
    rate = bench.matmul_rate(torch.device("cpu"), torch.bfloat16)
    n = bench.MATMUL_SIZE["cpu"]
    assert sides == [((n, n), (n, n), torch.bfloat16)] * 6
    assert rate > 0
