"""``pyskick bench --training``: episodes per second of training steps, one run against packs
(docs/training.md, "Measuring training speed").

Every variant trains real steps of the real trainer (:meth:`Trainer.train_step`, or a pack's
:meth:`~pyskick.training.pack.PackTrainer.train_step`) on random viewgrids of a preset's shape,
from a one-view model (Sense and Fuse frozen, as in the paper's training stage): ``warmup``
steps, then ``steps`` timed between two synchronisations. A variant is a pack size (1: a run
alone, through the solo trainer), a precision and where the data live. The ratios of one
call are comparable; absolute figures depend on the machine and what else runs on it.

Each variant's floating-point work is counted on one more, untimed step
(``torch.utils.flop_counter``: the matrix products and convolutions of the forward and
backward passes, a grouped convolution's weight gradient counted once: see
:func:`conv_backward_flop`) and its rate set against the device's own rate on a large square matrix
product of the same precision, measured in the same call: how much of what the device can
compute the training step uses. With ``validation_grids``, each variant's validation is timed
too: its runs one by one and, a pack's, at once (:meth:`~pyskick.training.pack.PackTrainer.
validate`), every call of one bench call at one eval batch size (``"auto"`` resolved once).
"""

from __future__ import annotations

import dataclasses
import platform
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch.utils.flop_counter import FlopCounterMode, conv_flop_count

from pyskick.checkpoint import save_checkpoint
from pyskick.config import train_preset
from pyskick.distributed import resolve_device
from pyskick.errors import UserError
from pyskick.evaluation.evaluate import resolve_eval_batch_size
from pyskick.models import CompletionPolicy
from pyskick.models import preset as preset_model
from pyskick.models.packed import PACKED_CONVS
from pyskick.timing import synchronize
from pyskick.training.data import TrainData
from pyskick.training.graphs import STEP_WARMUP
from pyskick.training.pack import PackMember, PackTrainer
from pyskick.training.trainer import Trainer

LAYOUTS = ("contiguous", "channels-last")
"""The convolutions' memory formats a variant may use."""

DECODES = ("per-glimpse", "once")
"""When a variant decodes an episode's glimpses: one batch per glimpse, or all of them in one
batch at the last (``TrainConfig.decode_once``)."""

CONVS = PACKED_CONVS
"""How a variant's packs compute their convolutions (``TrainConfig.packed_convs``):
``"auto"`` (run by run on the CPU, grouped on a GPU), ``"grouped"`` or ``"per-run"``. A run
alone computes its own either way."""

CUDNN = ("heuristic", "benchmark")
"""How a call's convolutions pick cuDNN's algorithms: by cuDNN's heuristics, or by timing them
(its autotuner, ``TrainConfig.cudnn_benchmark``). One per call: PyTorch keeps the algorithm
it picked for a convolution's shape for the rest of the process, whichever way it picked it,
so two ways compared in one process would run the first one's picks twice. No effect on the
CPU."""

_MODE_WORDS = {
    "eager": "",
    "graph": ", CUDA graph",
    "compiled": ", compiled",
    "compiled-graph": ", compiled, CUDA graph",
}
MODES = tuple(_MODE_WORDS)
"""How a variant's step runs: eagerly, replayed as a CUDA graph (``TrainConfig.cuda_graph``),
with its networks compiled (``TrainConfig.compile``), or both."""
_GRAPH_MODES = ("graph", "compiled-graph")

PAPER_EPOCH_GRIDS = 6000
"""Training viewgrids of a SUN360 epoch (the paper's 56 s on a GTX 1080)."""

MATMUL_SIZE = {"cpu": 2048, "cuda": 8192}
"""Side of the square matrix product whose rate a variant's is set against, per device type:
large enough to reach the device's sustained rate (a 2048² float32 product takes ≈ 50 ms on
two CPU cores, an 8192² one ≈ 20 ms on an H100)."""

MATMUL_PRODUCTS = {"cpu": 1, "cuda": 10}
"""Products per timing between two synchronisations: on a GPU, enough that the launch and the
wait are a small part of it (an 8192² bf16 product takes ≈ 1.5 ms on an H200)."""

_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
_Result = TypeVar("_Result")

_clock = time.perf_counter  # the timings' clock (a test replaces it)


@dataclass(frozen=True)
class TrainingBench:
    """One measured variant."""

    preset: str
    device: str
    runs: int
    """Runs trained together (1: a run alone, through the solo trainer)."""
    precision: str
    data: str
    """``"device"``: the viewgrids live on the device; ``"host"``: copied per batch."""
    step: str
    """One of :data:`MODES`: ``"eager"``, ``"graph"`` (replayed as a CUDA graph,
    ``TrainConfig.cuda_graph``), ``"compiled"`` (the networks compiled by inductor,
    ``TrainConfig.compile``) or ``"compiled-graph"`` (both)."""
    layout: str
    """The convolutions' memory format: ``"contiguous"`` (NCHW), or ``"channels-last"``
    (NHWC, ``TrainConfig.channels_last``)."""
    decode: str
    """One of :data:`DECODES`: ``"per-glimpse"``, or ``"once"`` (``TrainConfig.decode_once``)."""
    cudnn: str
    """One of :data:`CUDNN`: ``"heuristic"``, or ``"benchmark"`` (cuDNN's autotuner,
    ``TrainConfig.cudnn_benchmark``)."""
    convs: str
    """One of :data:`CONVS`: how a pack computes its convolutions (``"auto"``, ``"grouped"``,
    ``"per-run"``: ``TrainConfig.packed_convs``)."""
    batch_size: int
    T: int
    view_size: int
    """Side of every view in pixels (the preset's data, or ``bench_training(view_size=)``)."""
    step_seconds: float
    """Median seconds of one step of all the runs."""
    episodes_per_s: float
    """Episodes per second, all runs together."""
    speedup: float | None
    """``episodes_per_s`` over the same precision and data's run alone."""
    epoch_seconds_per_run: float
    """Seconds one run's 6,000-grid epoch takes, its share of the step time."""
    gflop_per_step: float
    """Floating-point work of one step of all the runs, in GFLOP: the matrix products and
    convolutions of the forward and backward passes, as ``torch.utils.flop_counter`` counts
    them, a convolution's backward pass by :func:`conv_backward_flop`. It does not count a
    fused LSTM kernel, which a run alone's ``nn.LSTM`` is on oneDNN and cuDNN, while a pack's
    LSTM, written with ``bmm``, counts: a pack of ``cpu-demo`` runs counts 0.25 % more per run
    than a run alone with 32-pixel views, 1.5 % with 16-pixel ones."""
    tflop_per_s: float
    """``gflop_per_step`` over ``step_seconds``, in TFLOP/s."""
    matmul_tflop_per_s: float
    """The device's rate on a square matrix product of ``MATMUL_SIZE`` in the variant's
    precision (float32 under the process's TF32 setting, PyTorch's default: off for matrix
    products, on for cuDNN's convolutions), measured in the same call, in TFLOP/s."""
    matmul_size: int
    """The side of that matrix product (``MATMUL_SIZE`` of the device's type)."""
    matmul_share: float
    """``tflop_per_s`` over ``matmul_tflop_per_s``. It can pass 1 where the step's
    convolutions use faster units than the float32 matrix product (TF32 on a GPU)."""
    validation_grids: int = 0
    """Validation viewgrids whose validation was timed (0: not timed)."""
    validation_batch: int = 0
    """Episodes per validation pass, all runs together where they validate at once (the
    preset's ``eval_batch_size``, ``"auto"`` resolved once per call; 0: not timed)."""
    validation_seconds_packed: float | None = None
    """Median seconds of one validation of all the runs at once (``PackTrainer.validate(
    packed=True)``); None for a run alone, when not timed, or where the pack can only
    validate one by one (``PackTrainer.packed_validation_batch``)."""
    validation_seconds_one_by_one: float | None = None
    """Median seconds of one validation of all the runs, one after the other (a run alone's
    :meth:`Trainer.validate`; a pack's ``validate(packed=False)``); None when not timed."""
    validation_max_rel_diff: float | None = None
    """The largest relative difference between a run's validation figure at once and one by
    one, over the pack's runs (how closely the packed pass repeats the runs alone); None
    where ``validation_seconds_packed`` is."""


def environment() -> dict[str, Any]:
    """Where the figures were measured: torch, CUDA and driver versions, devices, threads."""
    info: dict[str, Any] = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
        "threads": torch.get_num_threads(),
        "cuda": torch.version.cuda,
    }
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
        info["gpu_capability"] = list(torch.cuda.get_device_capability())
        driver = getattr(torch.cuda, "driver_version", None)
        info["driver"] = driver() if callable(driver) else None
    return info


def bench_training(
    *,
    preset: str = "cpu-demo",
    device: str = "cpu",
    runs: Sequence[int] = (1, 4),
    precisions: Sequence[str] = ("fp32",),
    data: Sequence[str] = ("device",),
    modes: Sequence[str] = ("eager",),
    layouts: Sequence[str] = ("contiguous",),
    decodes: Sequence[str] = ("per-glimpse",),
    convs: Sequence[str] = ("auto",),
    cudnn: str = "heuristic",
    grids: int | None = None,
    validation_grids: int = 0,
    steps: int = 5,
    warmup: int = 2,
    batch_size: int | None = None,
    T: int | None = None,
    view_size: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[TrainingBench]:
    """Time training steps of every variant (see the module docstring).

    Args:
        preset: a training preset (its model, batch size and T unless given).
        device: ``"cpu"``, ``"cuda"`` or ``"auto"``.
        runs: pack sizes (1: a run alone).
        precisions: ``"fp32"``, ``"bf16"``.
        data: ``"device"``, ``"host"`` (the same on the CPU).
        modes: :data:`MODES`: ``"eager"``, ``"graph"`` (the step replayed as a CUDA graph;
            CUDA only), ``"compiled"`` (the networks compiled; compilation in the untimed
            steps), ``"compiled-graph"`` (both).
        layouts: ``"contiguous"``, ``"channels-last"`` (the convolutions' memory format).
        decodes: :data:`DECODES`: ``"per-glimpse"``, ``"once"``.
        convs: :data:`CONVS`: ``"auto"``, ``"grouped"``, ``"per-run"`` (how packs compute
            their convolutions; a run alone's row is measured once per way all the same,
            so that every pack's speed-up is against a run alone of its call).
        cudnn: one of :data:`CUDNN`, for every variant: ``"heuristic"`` or ``"benchmark"``
            (set for each variant, the process's setting restored after it).
        grids: random training viewgrids (default: enough for every step of every run).
        validation_grids: time each variant's validation on this many random viewgrids too,
            its runs at once and one by one (0: not timed; the median of 3 calls after one
            untimed).
        steps, warmup: timed and untimed steps per variant.
        batch_size, T: override the preset's.
        view_size: side of every view in pixels (default: the preset's data, 32), e.g. 16 for
            the demo's scenes (``pyskick demo``).
        progress: called with one line per variant.

    Returns:
        One :class:`TrainingBench` per variant, in the order measured.
    """
    base = train_preset(preset).replace(device=device)
    if batch_size is not None:
        base = base.replace(batch_size=batch_size)
    if T is not None:
        base = base.replace(T=T)
    target = resolve_device(base.device)
    unknown = sorted(set(layouts) - set(LAYOUTS))
    if unknown:
        raise UserError(f"bench: unknown layout {unknown[0]!r} (choose from {', '.join(LAYOUTS)})")
    unknown = sorted(set(decodes) - set(DECODES))
    if unknown:
        raise UserError(f"bench: unknown decode {unknown[0]!r} (choose from {', '.join(DECODES)})")
    unknown = sorted(set(convs) - set(CONVS))
    if unknown:
        raise UserError(f"bench: unknown convs {unknown[0]!r} (choose from {', '.join(CONVS)})")
    if cudnn not in CUDNN:
        raise UserError(f"bench: unknown cudnn {cudnn!r} (choose from {', '.join(CUDNN)})")
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        raise UserError(f"bench: unknown mode {unknown[0]!r} (choose from {', '.join(MODES)})")
    if set(modes) & set(_GRAPH_MODES) and target.type != "cuda":
        raise UserError(f"bench: a CUDA graph needs a CUDA device, not {target.type}")
    # A graph's eager steps and its capture are untimed too.
    graph_warmup = warmup + STEP_WARMUP + 1
    n = grids or base.batch_size * (steps + graph_warmup) * 2
    model = preset_model(base.model)  # its grid: SUN360's (4 x 8 x 3 x 32²) or ModelNet's
    if view_size is not None:
        model = dataclasses.replace(model, view_size=view_size)
    gen = torch.Generator().manual_seed(0)
    shape = (model.n_elevations, model.n_azimuths, model.channels, model.view_size, model.view_size)
    viewgrids = TrainData(
        torch.randint(0, 256, (n, *shape), generator=gen, dtype=torch.uint8),
        torch.randint(0, 256, (validation_grids or 8, *shape), generator=gen, dtype=torch.uint8),
        tuple(128.0 for _ in range(model.channels)),
    )
    rows: list[TrainingBench] = []
    matmul: dict[str, float] = {}  # FLOP/s per precision, measured once
    # One batch for every validation of the call: "auto" follows the free memory, which the
    # variants before would move.
    eval_batch = resolve_eval_batch_size(base.eval_batch_size, model, target)
    if validation_grids:
        base = base.replace(eval_batch_size=eval_batch)
    with tempfile.TemporaryDirectory(prefix="pyskick-bench-") as tmp:
        init = Path(tmp) / "one-view.pt"
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            policy = CompletionPolicy(model)
        save_checkpoint(init, {"model": policy.state_dict(), "model_config": model.to_dict()})
        variants = [
            (p, d, m, layout, decode, way)
            for p in precisions
            for d in data
            for m in modes
            for layout in layouts
            for decode in decodes
            for way in convs
        ]
        for precision, placement, mode, layout, decode, way in variants:
            alone: float | None = None
            for size in runs:
                config = base.replace(
                    precision=precision,
                    data_on_device="on" if placement == "device" else "off",
                    cuda_graph=mode in _GRAPH_MODES,
                    compile=mode.startswith("compiled"),
                    channels_last=layout == "channels-last",
                    decode_once=decode == "once",
                    cudnn_benchmark=cudnn == "benchmark",
                    packed_convs=way,
                )
                if target.type == "cpu":
                    config = config.replace(data_on_device="auto")
                untimed = graph_warmup if mode in _GRAPH_MODES else warmup
                autotune = torch.backends.cudnn.benchmark
                torch.backends.cudnn.benchmark = cudnn == "benchmark"
                try:
                    seconds, flops, (packed_s, one_by_one_s, differs) = _time_steps(
                        config, viewgrids, init, size, Path(tmp), steps, untimed,
                        validate=validation_grids > 0,
                    )  # fmt: skip
                finally:  # the trainer turns it on for the process: back for the next
                    torch.backends.cudnn.benchmark = autotune
                if precision not in matmul:
                    matmul[precision] = matmul_rate(target, _DTYPES[precision])
                episodes = size * config.batch_size / seconds
                if size == 1:
                    alone = episodes
                row = TrainingBench(
                    preset=preset,
                    device=str(target),
                    runs=size,
                    precision=precision,
                    data=placement,
                    step=mode,
                    layout=layout,
                    decode=decode,
                    cudnn=cudnn,
                    convs=way,
                    batch_size=config.batch_size,
                    T=config.T,
                    view_size=model.view_size,
                    step_seconds=seconds,
                    episodes_per_s=episodes,
                    speedup=None if alone is None else episodes / alone,
                    epoch_seconds_per_run=PAPER_EPOCH_GRIDS / config.batch_size * seconds / size,
                    gflop_per_step=flops / 1e9,
                    tflop_per_s=flops / seconds / 1e12,
                    matmul_tflop_per_s=matmul[precision] / 1e12,
                    matmul_size=matmul_size(target),
                    matmul_share=flops / seconds / matmul[precision],
                    validation_grids=validation_grids,
                    validation_batch=eval_batch if validation_grids else 0,
                    validation_seconds_packed=packed_s,
                    validation_seconds_one_by_one=one_by_one_s,
                    validation_max_rel_diff=differs,
                )
                rows.append(row)
                if progress is not None:
                    progress(_describe(row))
    return rows


def matmul_size(device: torch.device) -> int:
    """The side of the square matrix product :func:`matmul_rate` times on ``device``."""
    return MATMUL_SIZE.get(device.type, MATMUL_SIZE["cpu"])


def matmul_rate(
    device: torch.device, dtype: torch.dtype, n: int | None = None, products: int | None = None
) -> float:
    """The device's rate on a square matrix product: the median of 5 timings, after one
    untimed, each of ``products`` products of two ``n × n`` matrices between two
    synchronisations.

    Args:
        device: where to compute.
        dtype: the matrices' dtype (``torch.float32``: the process's TF32 setting applies).
        n: the side (default: ``MATMUL_SIZE`` of the device's type).
        products: products per timing (default: ``MATMUL_PRODUCTS`` of the device's type).

    Returns:
        Floating-point operations per second (``2 n³`` per product).
    """
    n = matmul_size(device) if n is None else n
    if products is None:
        products = MATMUL_PRODUCTS.get(device.type, MATMUL_PRODUCTS["cpu"])
    gen = torch.Generator(device=device).manual_seed(0)  # the global generator left alone
    a = torch.empty(n, n, device=device, dtype=dtype).normal_(generator=gen)
    b = torch.empty(n, n, device=device, dtype=dtype).normal_(generator=gen)
    times = []
    for i in range(6):
        synchronize(device)
        tick = _clock()
        for _ in range(products):
            torch.mm(a, b)
        synchronize(device)
        if i:
            times.append(_clock() - tick)
    return 2 * n**3 * products / sorted(times)[len(times) // 2]


def conv_backward_flop(
    grad_out_shape: list[int],
    x_shape: list[int],
    w_shape: list[int],
    _bias: Any,
    _stride: Any,
    _padding: Any,
    _dilation: Any,
    transposed: bool,
    _output_padding: Any,
    _groups: int,
    output_mask: list[bool],
    *args: Any,
    **kwargs: Any,
) -> int:
    """The multiplications of a convolution's backward pass, for ``FlopCounterMode``.

    Each gradient it computes (of the input, of the weight) makes every product of the forward
    pass once more, so it costs the forward's count. torch's own formula (2.11 to 2.13) counts
    the weight gradient of a grouped convolution ``groups`` times: a pack of R runs, whose
    convolutions are grouped R ways, would count its weight gradients R times over (a pack of
    15 at ``paper-sun360``: 5.5 times its runs' work).

    Args:
        grad_out_shape: The gradient of the output, ``[B, C_out, ...]``: the forward's output.
        x_shape: The forward's input ``[B, C_in, ...]``.
        w_shape: The weight, ``[C_out, C_in / groups, k, k]`` (transposed: ``[C_in, C_out /
            groups, k, k]``).
        transposed: Whether the convolution is transposed.
        output_mask: Which of the input's, weight's and bias's gradients are computed.

    Returns:
        The forward's count times the input's and weight's gradients computed.
    """
    forward = conv_flop_count(x_shape, w_shape, grad_out_shape, transposed)
    return forward * (int(output_mask[0]) + int(output_mask[1]))


_FLOP_FORMULAS = {torch.ops.aten.convolution_backward: conv_backward_flop}
"""``FlopCounterMode``'s formulas that replace torch's own."""


def _time_steps(
    config: Any,
    data: TrainData,
    init: Path,
    runs: int,
    tmp: Path,
    steps: int,
    warmup: int,
    *,
    validate: bool = False,
) -> tuple[float, int, tuple[float | None, float | None, float | None]]:
    """Median seconds of one training step of ``runs`` runs (a solo trainer for 1), the
    floating-point operations of one step, counted on an extra step before the others, and,
    with ``validate``, the median seconds of a validation of all the runs at once and one by
    one, and the largest relative difference of a run's figure between the two (None where
    not timed)."""
    folder = Path(tempfile.mkdtemp(dir=tmp))
    if runs == 1:
        trainer: Any = Trainer(config, folder / "run", data, stage="train", init=init).setup()
        trainer.policy.train()

        def step(batch: Any) -> None:
            trainer.train_step(batch, 0)

        batches = trainer.batches(0)
    else:
        members = [
            PackMember(config.replace(seed=config.seed + r), folder / f"run{r}", init=init)
            for r in range(runs)
        ]
        pack = PackTrainer(members, data).setup()
        pack.policy.train()
        scales = torch.zeros(runs, dtype=torch.float64, device=pack.device)

        def step(batch: Any) -> None:
            pack.train_step(batch, 0, scales)

        batches = pack.batches(0)
    device = torch.device(resolve_device(config.device))
    # First, so that the counted step runs eagerly: a step replayed as a CUDA graph dispatches
    # nothing the counter could see, nor do compiled kernels (compiled networks run eagerly
    # here, and compile in the untimed steps that follow).
    with warnings.catch_warnings():
        # The counter's module hooks are global, which a compiled network warns of (they fire
        # for its wrapper and for it): the count is of operations, whichever module runs them.
        warnings.filterwarnings("ignore", "Using `torch.compile\\(module\\)` when there are global")
        eager = torch.compiler.set_stance("force_eager") if config.compile else nullcontext()
        with eager, FlopCounterMode(display=False, custom_mapping=_FLOP_FORMULAS) as counter:
            step(next(batches))
    if not counter.get_total_flops():
        raise RuntimeError(
            "bench: the counted training step dispatched no matrix product or convolution"
        )
    times = []
    for i in range(warmup + steps):
        batch = next(batches)
        synchronize(device)
        tick = _clock()
        step(batch)
        synchronize(device)
        if i >= warmup:
            times.append(_clock() - tick)
    validation: tuple[float | None, float | None, float | None] = (None, None, None)
    try:
        if validate and runs == 1:
            validation = (None, _median_seconds(trainer.validate, device)[0], None)
        elif validate:
            pack.write_runs()  # the runs' weights, as fit hands them over before validating
            one_by_one_s, alone = _median_seconds(lambda: pack.validate(packed=False), device)
            if pack.packed_validation_batch() is None:
                validation = (None, one_by_one_s, None)
            else:
                packed_s, together = _median_seconds(lambda: pack.validate(packed=True), device)
                differs = max(
                    abs(a - b) / max(abs(b), 1e-30) for a, b in zip(together, alone, strict=True)
                )
                validation = (packed_s, one_by_one_s, differs)
    finally:
        if runs > 1:
            pack._locks.close()
    return sorted(times)[len(times) // 2], counter.get_total_flops(), validation


def _median_seconds(
    call: Callable[[], _Result], device: torch.device, calls: int = 3
) -> tuple[float, _Result]:
    """Median seconds of ``calls`` calls of ``call``, after one untimed, each between two
    synchronisations of ``device``, and what the last call returned."""
    times = []
    for i in range(calls + 1):
        synchronize(device)
        tick = _clock()
        result = call()
        synchronize(device)
        if i:
            times.append(_clock() - tick)
    return sorted(times)[len(times) // 2], result


def _describe(row: TrainingBench) -> str:
    speed = "" if row.speedup is None else f", {row.speedup:.2f}x a run alone"
    mode = _MODE_WORDS[row.step]
    layout = ", channels-last" if row.layout == "channels-last" else ""
    decode = ", decoding once" if row.decode == "once" else ""
    cudnn = ", cuDNN autotuned" if row.cudnn == "benchmark" else ""
    convs = f", packed convolutions {row.convs}" if row.convs != "auto" else ""
    validation = ""
    if row.validation_seconds_one_by_one is not None:
        validation = f"; validation of {row.validation_grids} grids: "
        if row.validation_seconds_packed is not None:
            validation += f"{row.validation_seconds_packed * 1e3:.1f} ms at once, "
        validation += f"{row.validation_seconds_one_by_one * 1e3:.1f} ms one by one"
    return (
        f"{row.preset} {row.device} {row.precision}{mode}{layout}{decode}{cudnn}{convs} "
        f"data on {row.data}, "
        f"{row.runs} run{'s' if row.runs > 1 else ''}: {row.episodes_per_s:.0f} episodes/s"
        f"{speed}, {row.epoch_seconds_per_run:.2f} s per run's 6,000-grid epoch, "
        f"{row.tflop_per_s * 1e3:.0f} GFLOP/s ({row.matmul_share:.2f} of a matrix product's)"
        f"{validation}"
    )


def as_dicts(rows: Sequence[TrainingBench]) -> list[dict[str, Any]]:
    """The rows as JSON-ready dicts."""
    return [asdict(row) for row in rows]
