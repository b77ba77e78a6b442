"""``bench --training``'s floating-point figures: the device's matrix-product rate."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

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


def _counted(step: Any, **mode: Any) -> dict[str, int]:
    with FlopCounterMode(display=False, **mode) as counter:
        step()
    return {str(op): n for op, n in counter.get_flop_counts()["Global"].items()}


@pytest.mark.parametrize("transposed", [False, True], ids=["conv", "transposed"])
def test_a_grouped_convolution_counts_its_groups_work_once(transposed: bool) -> None:
    # R groups of one run's convolution (a pack's layer) cost R times that convolution, forward
    # and backward; torch's own backward formula counts the weight gradient R times over.
    R, c_in, c_out, k = 5, 6, 4, 3
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, R * c_in, 7, 7, generator=gen)
    if transposed:
        w = torch.randn(R * c_in, c_out, k, k, generator=gen)
        conv = functools.partial(F.conv_transpose2d, stride=2, padding=1)
    else:
        w = torch.randn(R * c_out, c_in, k, k, generator=gen)
        conv = functools.partial(F.conv2d, stride=1, padding=1)
    one_x, one_w = x[:, :c_in], w[: c_in if transposed else c_out]

    def step(x: Tensor, w: Tensor, groups: int) -> Callable[[], None]:
        x, w = x.clone().requires_grad_(), w.clone().requires_grad_()
        return lambda: conv(x, w, groups=groups).square().sum().backward()

    formulas = {"custom_mapping": bench._FLOP_FORMULAS}
    one = _counted(step(one_x, one_w, 1), **formulas)
    pack = _counted(step(x, w, R), **formulas)
    assert one["aten.convolution_backward"] == 2 * one["aten.convolution"] > 0
    assert pack == {op: R * n for op, n in one.items()}
    # Ungrouped, the count is torch's; grouped, torch's counts R - 1 weight gradients more
    # (torch 2.11 to 2.13: where this fails, torch's formula changed, and ours may go).
    assert _counted(step(one_x, one_w, 1)) == one
    torch_pack = _counted(step(x, w, R))
    extra = torch_pack["aten.convolution_backward"] - pack["aten.convolution_backward"]
    assert extra == (R - 1) * pack["aten.convolution"]


def test_a_pack_counts_its_runs_work() -> None:
    # A pack's convolutions are grouped ones on a GPU; here too, so the count sees what a
    # GPU's does.
    rows = bench.bench_training(
        preset="cpu-demo", runs=(1, 3), steps=1, warmup=0, view_size=16, convs=("grouped",)
    )
    assert [row.convs for row in rows] == ["grouped", "grouped"]
    alone, pack = (row.gflop_per_step for row in rows)
    # Within 3 %: a run alone's LSTM is nn.LSTM's fused operator, which the counter does not
    # see, and a pack's is written as matrix products, which it does (1.7 % here). Torch's
    # own formula counted 1.65 times the runs' work here.
    assert 3 * alone <= pack <= 1.03 * 3 * alone
