"""GPU readiness timings of pyskick at paper-sun360 scale, written part by part to one JSON file.

Parts (``--parts``, comma-separated, run in the order given; each is caught and recorded, so a
failing part never loses the others, and the JSON is rewritten after every part):

- ``epoch``: pretrain (T = 1) and ltla (T = 4) epochs through the real Trainer, split into
  train / validate / checkpoint seconds; then ltla with the grids on the device, with the
  environment's host synchronisations patched out, and ours(rew), ours(demo), asymm-ac epochs
  (their setup time is the sidekick's scoring).
- ``eval``: evaluate_policy throughput (avg, adv) at eval batch 256 and 4096; samples_digest cost.
- ``score``: reward-sidekick scores and demo coverage of the training grids at batch 256 / 4096;
  grids_digest cost; one online greedy_coverage and nms_rewards call at B = 32.
- ``step``: the bare model step (T glimpses forward, backward, clip, Adam; no environment, no
  host sync) at B = 32 ... 4096 in fp32-strict, torch defaults, TF32, bf16 autocast and as a
  captured CUDA graph: achieved TFLOP/s from the analytic FLOP count.
- ``profile``: torch.profiler over one ltla epoch of 10 batches: kernels, host syncs and
  copies per batch, device-busy share; the tables go to ``--profile-out``.
- ``replay``: torch.profiler over training steps of ``pyskick bench --training``'s set-up
  (paper-sun360, data on the device), replayed as CUDA graphs on a GPU (eager on the CPU): a
  run alone and a pack of 15 in fp32, the pack in bf16; kernels per step, device-busy share,
  device time by kind (matrix products and convolutions, cuDNN's layout transforms, the rest)
  and the top kernels, appended to ``--profile-out``.
- ``cudnn``: ``pyskick bench --training``'s graph rows (a run alone and a pack of 15, fp32 and
  bf16) with cuDNN's algorithms picked by its heuristics and by its autotuner (``--cudnn
  heuristic`` and ``--cudnn benchmark``, ``TrainConfig.cudnn_benchmark``), each call in a
  process of its own (PyTorch keeps cuDNN's pick for a shape for the whole process). The
  replay profile of 2026-11-27 found a pack's grouped convolutions on cuDNN's default
  algorithms, a bf16 weight gradient among them at 43 % of the device time.
- ``levers``: the graph rows of a run alone and a pack of 15 with every lever that paid at
  once (the glimpses decoded once, cuDNN's autotuner; then compiled networks too, in fp32 and
  bf16) against plain graph rows of the same call, each group in a process of its own: how
  close the engine comes to its targets when it uses all it has. Channels-last, in the group
  on 2026-11-30, is left out since: alone it made a pack of 15 0.85x as fast on an H200.
- ``packval``: a pack of 15's validation at once (``PackTrainer.validate(packed=True)``, one
  ``evaluate_pack``; the default on a GPU, unmeasured there before) against its runs one by one
  (the default on the CPU, where packed only tied: 0.97-1.05x): ``pyskick bench --training
  --validation-grids``'s seconds of each and the largest relative difference of a run's figure.
- ``convs``: the graph rows of a run alone and a pack of 15 (decoding once, the autotuner; fp32
  and bf16) with the pack's convolutions grouped and run by run (``--packed-convs``): the
  H200's profiles put most of a pack's extra kernels in cuDNN's grouped convolutions.
- ``layout``: ``pyskick bench --training``'s graph rows (a run alone and a pack of 15, fp32 and
  bf16) with the convolutions contiguous and channels-last (``--layout``), and the replay
  profile of a channels-last pack of 15 in fp32 (the 2026-11-27 profile found 19 % of a pack's
  device time in cuDNN's NCHW/NHWC layout transforms).
- ``compiled``: a run alone's and a pack of 15's steps with the networks compiled by inductor
  (``TrainConfig.compile``, ``--compile``) inside the CUDA graph, against the same steps
  uncompiled: setup and compile seconds, wall time, kernels and kernel time per step.
- ``decode``: ``pyskick bench --training``'s graph rows (a run alone and a pack of 15, fp32; a
  run alone compiled too) decoding each glimpse and decoding an episode's glimpses once
  (``--decode``, ``TrainConfig.decode_once``), and the replay profile of a run alone decoding
  once: a T-th of the decoder's kernels, each on T times the samples.
- ``opcost``: what one call of each op costs, split into the host's work and the device's
  (waited for, queued, host time, device time and kernels per call from torch.profiler), for
  the op and its copy baseline; ``rotate_viewgrid``'s host time layer by layer, and a cProfile
  of its wrapper appended to ``--profile-out``.
- ``compile``: torch.compile of the policy, compile seconds and steady step time.
- ``nccl``: a one-rank process group: all_reduce of a CPU tensor under "nccl" (what
  pyskick.distributed does) and under "cpu:gloo,cuda:nccl".

    python3 perf.py --parts epoch,eval,score --out perf.json           # GPU machine
    python3 perf.py --device cpu --quick --parts epoch,eval,score,step --out /tmp/p.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

SUN360_MEAN = (119.16, 107.68, 95.12)
RESULTS: dict[str, Any] = {}


def now() -> float:
    return time.perf_counter()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def smooth_grids(n: int, seed: int, device: torch.device, chunk: int = 500) -> torch.Tensor:
    """``[n, 4, 8, 3, 32, 32]`` uint8 SUN360-shaped grids of smooth random fields (CPU tensor).

    Drawn on the CPU (same data on every machine), upsampled on ``device`` (fast on a GPU).
    """
    gen = torch.Generator().manual_seed(seed)
    out = torch.empty(n, 4, 8, 3, 32, 32, dtype=torch.uint8)
    for lo in range(0, n, chunk):
        k = min(chunk, n - lo)
        coarse = torch.rand(k, 96, 4, 4, generator=gen).to(device)
        fine = F.interpolate(coarse, size=32, mode="bilinear", align_corners=False)
        out[lo : lo + k] = (fine.view(k, 4, 8, 3, 32, 32) * 255).round().to(torch.uint8).cpu()
    return out


# ---------------------------------------------------------------------------------- FLOPs
def conv_macs(c_in: int, c_out: int, k: int, out_side: int) -> int:
    return c_in * c_out * k * k * out_side * out_side


def deconv_macs(c_in: int, c_out: int, k: int, in_side: int) -> int:
    return c_in * c_out * k * k * in_side * in_side


def policy_macs(cfg) -> dict[str, int]:
    """Forward multiply-adds of one glimpse of one sample, per module (pyskick.models)."""
    c1, c2, c3 = cfg.conv_channels
    s = cfg.view_size
    p1 = (s - 3) // 2 + 1
    p2 = (p1 - 3) // 2 + 1
    sense = (
        conv_macs(cfg.channels, c1, 5, s)
        + conv_macs(c1, c2, 5, p1)
        + conv_macs(c2, c3, 5, p2)
        + cfg.encoder_flat_size * cfg.sense_size
    )
    fuse = cfg.fuse_input_size * cfg.fuse_size + cfg.fuse_size**2
    lstm = 4 * cfg.hidden_size * (cfg.fuse_size + cfg.hidden_size)
    act = cfg.act_input_size * cfg.act_size + cfg.act_size**2 + cfg.act_size * cfg.n_actions
    d = cfg.decode_start_size
    d1, d2 = cfg.deconv_channels
    decode = (
        cfg.hidden_size * cfg.decode_linear_size
        + deconv_macs(cfg.decode_start_channels, d1, 5, d)
        + deconv_macs(d1, d2, 5, 2 * d)
        + deconv_macs(d2, cfg.decoded_channels, 5, 4 * d)
    )
    return {"sense": sense, "fuse": fuse, "lstm": lstm, "act": act, "decode": decode}


def train_gflop_per_sample_glimpse(cfg, *, frozen_sense: bool = True) -> float:
    """Forward of everything + backward (2x forward) of what gets gradients (ltla: sense and
    fuse frozen, so no backward through them)."""
    m = policy_macs(cfg)
    fwd = sum(m.values())
    bwd = 2 * (m["lstm"] + m["act"] + m["decode"])
    if not frozen_sense:
        bwd += 2 * (m["sense"] + m["fuse"])
    return 2 * (fwd + bwd) / 1e9


# ------------------------------------------------------------------------------ helpers
@contextlib.contextmanager
def no_env_syncs():
    """Patch out the environment's host synchronisations (value checks, per-reset mean copy):
    what a sync-free environment would save. Measurement only."""
    import pyskick.envs.lookaround as L

    saved = (L.LookAroundEnv._check_actions, L._check_indices, L.checked_reward_maps,
             L.channel_mean_for)  # fmt: skip
    cache: dict[Any, torch.Tensor] = {}

    def mean_for(mean, channels, device):
        key = (None if mean is None else tuple(mean.tolist()), channels, str(device))
        if key not in cache:
            cache[key] = saved[3](mean, channels, device)
        return cache[key]

    L.LookAroundEnv._check_actions = lambda self, a, B, device, **_: a.to(torch.int64)
    L._check_indices = lambda name, t, B, upper, device, **_: t.to(device=device, dtype=torch.int64)
    L.checked_reward_maps = lambda maps, B, N, M, device, **_: maps.detach().reshape(B, N * M)
    L.channel_mean_for = mean_for
    try:
        yield
    finally:
        (L.LookAroundEnv._check_actions, L._check_indices, L.checked_reward_maps,
         L.channel_mean_for) = saved  # fmt: skip


def time_stage(stage, config, out: Path, data, *, epochs: int, init=None, sidekick=None):
    """Set up a Trainer and time ``epochs`` epochs: train_epoch / validate / save seconds."""
    from pyskick.training import Trainer

    device = torch.device("cuda" if config.device == "cuda" else "cpu")
    out.mkdir(parents=True, exist_ok=True)
    t = now()
    trainer = Trainer(config, out, data, stage=stage, init=init, sidekick=sidekick,
                      loggers=["jsonl"])  # fmt: skip
    trainer.setup()
    sync(device)
    setup_s = now() - t
    rows = []
    for epoch in range(epochs):
        sync(device)
        t = now()
        metrics = trainer.train_epoch(epoch)
        sync(device)
        train_s = now() - t
        t = now()
        val = trainer.validate()
        sync(device)
        val_s = now() - t
        t = now()
        trainer.save(epoch, best=True)
        save_s = now() - t
        rows.append(
            {
                "epoch": epoch,
                "train_s": round(train_s, 4),
                "validate_s": round(val_s, 4),
                "save_s": round(save_s, 4),
                "epoch_total_s": round(train_s + val_s + save_s, 4),
                "episodes_per_s": round(metrics["perf/episodes_per_s"], 1),
                "env_share": round(metrics["perf/env_share"], 4),
                "train_rec_error": metrics["train/rec_error"],
                "val_error": val,
            }
        )
        print(f"  {stage} {out.name} epoch {epoch}: {rows[-1]}", flush=True)
    return {"setup_s": round(setup_s, 3), "epochs": rows}, trainer


# -------------------------------------------------------------------------------- parts
def part_epoch(args, device: torch.device, ctx: dict[str, Any]) -> dict[str, Any]:
    from pyskick.config import train_preset
    from pyskick.sidekicks.demo import DemoSidekick
    from pyskick.sidekicks.reward import RewardSidekick
    from pyskick.training import TrainData

    res: dict[str, Any] = RESULTS.setdefault("epoch", {})  # filled in place: saved as it goes
    t = now()
    train_g = smooth_grids(args.n_train, 1, device)
    val_g = smooth_grids(args.n_val, 2, device)
    res["data_s"] = round(now() - t, 2)
    ctx.update(train=train_g, val=val_g)
    base = train_preset("paper-sun360").replace(
        device=device.type, pretrain_epochs=args.epochs, epochs=args.epochs,
        batch_size=args.batch_size, eval_batch_size=args.eval_batch,
    )  # fmt: skip
    work = Path(args.work)
    data = TrainData(train_g, val_g, SUN360_MEAN)
    res["pretrain"], _ = time_stage("pretrain", base, work / "pre", data, epochs=args.epochs)
    init = work / "pre" / "best.pt"
    ctx["one_view"] = init
    res["ltla_host_data"], _trainer = time_stage(
        "train", base, work / "ltla", data, epochs=args.epochs, init=init
    )
    ctx["ltla"] = work / "ltla" / "best.pt"
    ctx["base"] = base
    save_json(args)
    if device.type == "cuda":
        data_dev = TrainData(train_g.to(device), val_g.to(device), SUN360_MEAN)
        res["ltla_device_data"], _ = time_stage(
            "train", base, work / "ltla-dev", data_dev, epochs=args.epochs, init=init
        )
        with no_env_syncs():
            res["ltla_device_data_no_env_syncs"], _ = time_stage(
                "train", base, work / "ltla-dev-nosync", data_dev, epochs=args.epochs, init=init
            )
        save_json(args)
    one = base.replace(epochs=1)
    os.environ["PYSKICK_CACHE_DIR"] = str(work / "cache")  # a fresh cache: setup = scoring
    rew = RewardSidekick(init, channel_mean=SUN360_MEAN)
    res["rew"], _ = time_stage("train", one, work / "rew", data, epochs=1, init=init, sidekick=rew)
    save_json(args)
    demo = DemoSidekick(init, channel_mean=SUN360_MEAN)
    res["demo"], _ = time_stage("train", one, work / "demo", data, epochs=1, init=init,
                                sidekick=demo)  # fmt: skip
    save_json(args)
    res["asymm_ac"], _ = time_stage(
        "train", one.replace(critic="asymm-critic"), work / "asymm", data, epochs=1, init=init
    )
    return res


def part_eval(args, device, ctx) -> dict[str, Any]:
    from pyskick.evaluation.evaluate import evaluate_policy, samples_digest
    from pyskick.run_dir import load_policy

    val = ctx.get("val")
    if val is None:
        val = ctx["val"] = smooth_grids(args.n_val, 2, device)
    ckpt = ctx.get("ltla")
    policy = load_policy(ckpt, device).policy if ckpt else _fresh_policy(device)
    rows = []
    for metric, starts in (("avg", 8), ("adv", 32)):
        for batch in (256, 4096):
            evaluate_policy(policy, val[:8], channel_mean=SUN360_MEAN, T=4, metric=metric,
                            batch_size=batch)  # fmt: skip  # warm-up
            sync(device)
            t = now()
            result = evaluate_policy(policy, val, channel_mean=SUN360_MEAN, T=4, metric=metric,
                                     batch_size=batch)  # fmt: skip
            sync(device)
            s = now() - t
            episodes = val.shape[0] * starts
            rows.append({"metric": metric, "batch": batch, "seconds": round(s, 4),
                         "episodes_per_s": round(episodes / s, 1),
                         "mean_x1000": result.summary.mean_x1000})  # fmt: skip
            print(f"  eval {rows[-1]}", flush=True)
    t = now()
    samples_digest(val)
    return {"evaluate": rows, "samples_digest_s": round(now() - t, 4), "n_val": val.shape[0]}


def _fresh_policy(device):
    from pyskick.models import CompletionPolicy, preset

    return CompletionPolicy(preset("paper-sun360")).to(device).eval()


def part_score(args, device, ctx) -> dict[str, Any]:
    from pyskick.ops import greedy_coverage, nms_rewards
    from pyskick.sidekicks.coverage import one_view_coverage
    from pyskick.sidekicks.reward import RewardSidekick
    from pyskick.sidekicks.scores import grids_digest

    train = ctx.get("train")
    if train is None:
        train = ctx["train"] = smooth_grids(args.n_train, 1, device)
    one_view = ctx.get("one_view")
    res: dict[str, Any] = {"n_train": train.shape[0], "rows": []}
    if one_view is not None:
        for batch in (256, 4096):
            sync(device)
            t = now()
            RewardSidekick(one_view, channel_mean=SUN360_MEAN, batch_size=batch).compute_scores(
                train, T=4, device=device
            )
            sync(device)
            rew_s = now() - t
            t = now()
            one_view_coverage(one_view, train, channel_mean=SUN360_MEAN, device=device,
                              batch_size=batch)  # fmt: skip
            sync(device)
            cov_s = now() - t
            res["rows"].append({"batch": batch, "reward_scores_s": round(rew_s, 3),
                                "coverage_s": round(cov_s, 3),
                                "episodes": train.shape[0] * 32})  # fmt: skip
            print(f"  score {res['rows'][-1]}", flush=True)
    t = now()
    grids_digest(train)
    res["grids_digest_s"] = round(now() - t, 3)
    gen = torch.Generator().manual_seed(0)
    raw = torch.rand(32, 32, 32, generator=gen)
    cov = (
        (
            (raw - raw.amin(1, keepdim=True))
            / (raw.amax(1, keepdim=True) - raw.amin(1, keepdim=True))
        )
        .clamp(0, 1)
        .to(device)
    )
    starts = torch.randint(0, 32, (32, 1), generator=gen).to(device)
    scores = torch.rand(32, 4, 8, generator=gen).to(device)
    for name, fn in (
        (
            "greedy_B32_call_us",
            lambda: greedy_coverage(cov, starts, 3, n_elevations=4, n_azimuths=8),
        ),
        ("nms_B32_call_us", lambda: nms_rewards(scores, 4, 1)),
    ):
        for _ in range(5):
            fn()
        sync(device)
        t = now()
        for _ in range(200):
            fn()
        sync(device)
        res[name] = round((now() - t) / 200 * 1e6, 1)
    return res


def part_step(args, device, ctx) -> dict[str, Any]:
    """The bare model step, no environment and no host sync, in several precisions and as a
    captured CUDA graph (the floor a sync-free, graph-captured trainer could reach)."""
    from pyskick.models import preset

    cfg = preset("paper-sun360")
    T = 4
    gflop = train_gflop_per_sample_glimpse(cfg) * T  # per sample
    modes = (["fp32-strict", "default", "tf32", "bf16", "graph-default", "graph-bf16"]
             if device.type == "cuda" else ["default"])  # fmt: skip
    batches = [int(b) for b in args.step_batches.split(",")]
    rows: list[dict[str, Any]] = []
    RESULTS["step"] = {"gflop_per_sample_T4": round(gflop, 3), "rows": rows}  # saved as it goes
    for B in batches:
        for mode in modes:
            try:
                ms = _time_step(cfg, device, B, T, mode, iters=args.step_iters)
                row = {"B": B, "mode": mode, "ms_per_step": round(ms, 3),
                       "ms_per_epoch_6000": round(ms * (6000 // B), 1),
                       "tflops": round(gflop * B / ms, 2)}  # GFLOP/ms = TFLOP/s  # fmt: skip
            except Exception as exc:  # recorded, the other modes go on
                row = {"B": B, "mode": mode, "error": f"{type(exc).__name__}: {exc}"[:300]}
            rows.append(row)
            print(f"  step {row}", flush=True)
            save_json(args)
    return {"gflop_per_sample_T4": round(gflop, 3), "macs_per_glimpse": policy_macs(cfg),
            "rows": rows}  # fmt: skip


@contextlib.contextmanager
def precision(mode: str):
    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    if mode == "fp32-strict":
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    elif mode in ("tf32", "bf16", "graph-bf16"):
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def _time_step(cfg, device, B: int, T: int, mode: str, iters: int) -> float:
    from pyskick.models import CompletionPolicy

    torch.manual_seed(0)
    policy = CompletionPolicy(cfg).to(device)
    policy.freeze_sense_and_fuse()
    policy.train()
    params = policy.trainable_parameters()
    graph = mode.startswith("graph")
    opt = torch.optim.Adam(params, lr=1e-4, weight_decay=1e-6, capturable=graph)
    views = torch.randn(T, B, cfg.channels, cfg.view_size, cfg.view_size, device=device) * 0.3
    proprio = torch.randint(-2, 3, (T, B, cfg.proprio_size), device=device).float()
    target = torch.randn(B, cfg.n_elevations, cfg.n_azimuths, cfg.channels, cfg.view_size,
                         cfg.view_size, device=device) * 0.3  # fmt: skip
    bf16 = mode.endswith("bf16")

    def forward_loss() -> torch.Tensor:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            state, loss = None, torch.zeros((), device=device)
            for t in range(T):
                out = policy(views[t], proprio[t], t, state)
                state = out.state
                loss = loss + F.mse_loss(out.decoded.float(), target)
                if t < T - 1:
                    loss = loss - 1e-3 * torch.log_softmax(out.logits.float(), 1)[:, 0].mean()
        return loss

    def step() -> None:
        loss = forward_loss()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 10.0)
        opt.step()

    with precision(mode):
        if graph:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(3):
                    opt.zero_grad(set_to_none=True)
                    step()
            torch.cuda.current_stream().wait_stream(stream)
            g = torch.cuda.CUDAGraph()
            opt.zero_grad(set_to_none=True)
            with torch.cuda.graph(g):
                step()
            run = g.replay
        else:

            def run() -> None:
                opt.zero_grad(set_to_none=True)
                step()

        for _ in range(3):
            run()
        sync(device)
        times = []
        for _ in range(iters):
            if device.type == "cuda":
                start, end = (
                    torch.cuda.Event(enable_timing=True),
                    torch.cuda.Event(enable_timing=True),
                )
                start.record()
                run()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            else:
                t = now()
                run()
                times.append((now() - t) * 1e3)
    return statistics.median(times)


def part_profile(args, device, ctx) -> dict[str, Any]:
    """One ltla epoch of 10 batches under torch.profiler: what the eager trainer launches."""
    from torch.profiler import ProfilerActivity, profile

    from pyskick.config import train_preset
    from pyskick.training import TrainData

    base = ctx.get("base") or train_preset("paper-sun360").replace(
        device=device.type, batch_size=args.batch_size, eval_batch_size=args.eval_batch
    )
    base = base.replace(epochs=2)
    n_batches = 2 if args.quick else 10
    train = ctx.get("train")
    if train is None:
        train = smooth_grids(n_batches * base.batch_size, 1, device)
    val = ctx.get("val")
    val = smooth_grids(64, 2, device) if val is None else val[:64]
    data = TrainData(train[: n_batches * base.batch_size], val, SUN360_MEAN)
    # From the one-view checkpoint of the epoch part when there is one (Sense and Fuse frozen,
    # as in ltla); else from scratch (everything trains: a few more kernels per batch).
    _, trainer = time_stage("train", base, Path(args.work) / "prof", data, epochs=1,
                            init=ctx.get("one_view"))  # fmt: skip
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    sync(device)
    t = now()
    with profile(activities=activities) as prof:
        trainer.train_epoch(1)
        sync(device)
    wall = now() - t
    events = prof.key_averages()

    def count(*names: str) -> int:
        return sum(e.count for e in events if e.key in names)

    def device_us(e) -> float:
        return float(
            getattr(e, "self_device_time_total", 0) or getattr(e, "self_cuda_time_total", 0)
        )

    kernels_us = sum(device_us(e) for e in events if getattr(e, "device_type", None) is not None
                     and "CUDA" in str(e.device_type))  # fmt: skip
    res = {
        "batches": n_batches,
        "wall_s": round(wall, 4),
        "launches_per_batch": count(
            "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx"
        )
        / n_batches,
        "stream_syncs_per_batch": count("cudaStreamSynchronize", "cudaDeviceSynchronize")
        / n_batches,
        "memcpy_per_batch": count("cudaMemcpyAsync", "cudaMemcpy") / n_batches,
        "aten_ops_per_batch": sum(e.count for e in events if e.key.startswith("aten::"))
        / n_batches,
        "device_busy_share": round(kernels_us / 1e6 / wall, 4) if kernels_us else None,
    }
    sort = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    Path(args.profile_out).write_text(
        json.dumps(res, indent=1)
        + "\n\n"
        + events.table(sort_by=sort, row_limit=40)
        + "\n\n"
        + events.table(sort_by="count", row_limit=25)
    )
    return res


def _replay_variant(device, runs: int, precision: str, graph: bool, steps: int, tmp: Path,
                    compiled: bool = False, channels_last: bool = False,
                    decode_once: bool = False):  # fmt: skip
    """Profile ``steps`` training steps after the warm-up (and capture): one variant; with
    ``compiled`` the networks are compiled (``TrainConfig.compile``); with ``channels_last``
    the convolutions compute channels-last; with ``decode_once`` an episode's glimpses are
    decoded in one batch."""
    from torch.profiler import ProfilerActivity, profile

    from pyskick.checkpoint import save_checkpoint
    from pyskick.config import train_preset
    from pyskick.models import CompletionPolicy
    from pyskick.models import preset as preset_model
    from pyskick.training.data import TrainData
    from pyskick.training.graphs import STEP_WARMUP
    from pyskick.training.pack import PackMember, PackTrainer
    from pyskick.training.trainer import Trainer

    config = train_preset("paper-sun360").replace(
        device=device.type, precision=precision, cuda_graph=graph, channels_last=channels_last,
        compile=compiled, decode_once=decode_once,
        data_on_device="on" if device.type == "cuda" else "auto",
    )  # fmt: skip
    model = preset_model(config.model)
    warm = STEP_WARMUP + 3
    n = config.batch_size * (warm + steps) * 2
    gen = torch.Generator().manual_seed(0)
    shape = (model.n_elevations, model.n_azimuths, model.channels, model.view_size, model.view_size)
    data = TrainData(torch.randint(0, 256, (n, *shape), generator=gen, dtype=torch.uint8),
                     torch.randint(0, 256, (8, *shape), generator=gen, dtype=torch.uint8),
                     SUN360_MEAN)  # fmt: skip
    folder = Path(tempfile.mkdtemp(dir=tmp))
    init = folder / "one-view.pt"
    torch.manual_seed(0)
    save_checkpoint(init, {"model": CompletionPolicy(model).state_dict(),
                           "model_config": model.to_dict()})  # fmt: skip
    if runs == 1:
        trainer = Trainer(config, folder / "run", data, stage="train", init=init).setup()
        trainer.policy.train()
        batches = trainer.batches(0)

        def step(batch) -> None:
            trainer.train_step(batch, 0)
    else:
        members = [PackMember(config.replace(seed=config.seed + r), folder / f"run{r}", init=init)
                   for r in range(runs)]  # fmt: skip
        pack = PackTrainer(members, data).setup()
        pack.policy.train()
        batches = pack.batches(0)
        scales = torch.zeros(runs, dtype=torch.float64, device=pack.device)

        def step(batch) -> None:
            pack.train_step(batch, 0, scales)

    for _ in range(warm):
        step(next(batches))
    sync(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    todo = [next(batches) for _ in range(steps)]
    with profile(activities=activities) as prof:
        t = now()
        for batch in todo:
            step(batch)
        sync(device)
        wall = now() - t
    if runs > 1:
        pack._locks.close()
    return prof, wall


# Names of convolution and matrix-product kernels (not "conv" alone: convertTensor_kernel is a
# dtype conversion; not "cudnn" alone: its layout transforms are cuDNN kernels too).
_MATMUL = ("gemm", "convolve", "convolution", "conv2d", "xmma", "cutlass", "sm90_", "sm80_",
           "wgrad", "dgrad", "fprop", "implicit_", "winograd", "cublas")  # fmt: skip


def _is_copy(name: str) -> bool:
    """A copy or fill the profiler lists among the device's activities, not a kernel."""
    return name.startswith(("Memcpy", "Memset"))


def _device_activity(prof) -> list:
    """The profile's device activities that took time (kernels, copies and fills)."""
    return [e for e in prof.events() if e.device_type is not None
            and "CUDA" in str(e.device_type) and e.device_time_total > 0]  # fmt: skip


def _busy_union_us(events) -> float:
    """Microseconds during which at least one kernel ran (overlapping kernels counted once)."""
    spans = sorted((e.time_range.start, e.time_range.end) for e in events)
    total, end = 0.0, float("-inf")
    for start, stop in spans:
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def _is_layout(name: str) -> bool:
    """cuDNN's layout transforms (NCHW <-> NHWC), not convolutions."""
    return any(m in name for m in ("nchwToNhwc", "nhwcToNchw", "tensorTransform"))


def _is_matmul(name: str) -> bool:
    """A convolution or matrix product (cuDNN, CUTLASS, cuBLAS), not a layout transform."""
    return not _is_layout(name) and any(m in name.lower() for m in _MATMUL)


def _replay_summary(prof, wall: float, steps: int) -> dict[str, Any]:
    """Kernels per step, device-busy share, device time by kind and the top kernels of a
    profile of ``steps`` replayed steps that took ``wall`` seconds."""
    activity = _device_activity(prof)
    kernels = [e for e in activity if not _is_copy(e.name)]
    by_name: dict[str, list[float]] = {}
    for e in kernels:
        by_name.setdefault(e.name, []).append(float(e.device_time_total))  # microseconds
    busy_us = sum(sum(v) for v in by_name.values())
    layout_us = sum(sum(v) for name, v in by_name.items() if _is_layout(name))
    mm_us = sum(sum(v) for name, v in by_name.items() if _is_matmul(name))
    top = sorted(by_name.items(), key=lambda kv: -sum(kv[1]))[:15]
    res = {
        "wall_ms_per_step": round(wall / steps * 1e3, 3),
        "device_kernels_per_step": round(len(kernels) / steps, 1),
        "copies_fills_per_step": round((len(activity) - len(kernels)) / steps, 1),
        # The sum of the kernels' durations (overlapping kernels each counted) and, over
        # the wall time, the share during which at least one kernel ran.
        "device_busy_ms_per_step": round(busy_us / steps / 1e3, 3),
        "kernel_time_over_wall": round(busy_us / 1e6 / wall, 4) if wall else None,
        "device_busy_share": round(_busy_union_us(kernels) / 1e6 / wall, 4)
        if wall and kernels else None,
        "matmul_conv_share_of_busy": round(mm_us / busy_us, 4) if busy_us else None,
        "layout_transform_share_of_busy": round(layout_us / busy_us, 4) if busy_us else None,
        "median_kernel_us": round(statistics.median(
            [t for v in by_name.values() for t in v]), 2) if kernels else None,
        "top_kernels": [{"name": name[:600], "calls_per_step": len(v) / steps,
                         "ms_per_step": round(sum(v) / steps / 1e3, 4)}
                        for name, v in top],
    }  # fmt: skip
    return res


def part_replay(args, device, ctx) -> dict[str, Any]:
    """Training steps replayed as CUDA graphs under torch.profiler (eager on the CPU): where a
    replay's device time goes, and how busy it keeps the GPU."""
    graph = device.type == "cuda"
    variants = [(1, "fp32"), (15, "fp32"), (15, "bf16")] if graph else [(1, "fp32"), (2, "fp32")]
    steps = 2 if args.quick else 5
    tmp = Path(tempfile.mkdtemp(prefix="replay-", dir=args.work))
    out: dict[str, Any] = {"graph": graph, "steps": steps}
    RESULTS["replay"] = out
    tables = []
    for runs, precision in variants:
        key = f"{runs}-{precision}"
        try:
            prof, wall = _replay_variant(device, runs, precision, graph, steps, tmp)
        except Exception as exc:  # recorded; the other variants go on
            out[key] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
            print(traceback.format_exc(), file=sys.stderr, flush=True)
            save_json(args)
            continue
        res = _replay_summary(prof, wall, steps)
        out[key] = res
        brief = {k: v for k, v in res.items() if k != "top_kernels"}
        print(f"  replay {key}: {json.dumps(brief)}", flush=True)
        sort = "self_device_time_total" if graph else "self_cpu_time_total"
        tables.append(f"=== replay {key} ({'graph' if graph else 'eager'}), {steps} steps\n"
                      + json.dumps(res, indent=1) + "\n"
                      + prof.key_averages().table(sort_by=sort, row_limit=30))  # fmt: skip
        save_json(args)
    with Path(args.profile_out).open("a") as f:
        f.write("\n\n".join(tables) + "\n")
    return out


def part_compiled(args, device, ctx) -> dict[str, Any]:
    """A run alone's and a pack of 15's training steps with the networks compiled by inductor
    (``TrainConfig.compile``) and replayed as CUDA graphs, against the same steps uncompiled,
    each under torch.profiler for 10 steps: wall time, kernels and kernel time per step. The
    replay profile found a run alone bound by its 1,145 kernels of ~2 µs each
    (docs/training.md)."""
    from pyskick.config import train_preset

    graph = device.type == "cuda"
    steps = 2 if args.quick else 10
    batch = train_preset("paper-sun360").batch_size  # _replay_variant's
    tmp = Path(tempfile.mkdtemp(prefix="compiled-", dir=args.work))
    out: dict[str, Any] = {"graph": graph, "steps": steps}
    RESULTS["compiled"] = out
    # The compiled pack before the plain one: a time-out then loses the plain pack, which the
    # replay part measures too.
    variants = [(1, False), (1, True)] + ([(15, True), (15, False)] if graph else [])
    for runs, compiled in variants:
        key = f"{runs}-{'compiled' if compiled else 'plain'}"
        t = now()
        try:
            prof, wall = _replay_variant(device, runs, "fp32", graph, steps, tmp, compiled)
        except Exception as exc:  # recorded; the other variants go on
            out[key] = {"error": f"{type(exc).__name__}: {exc}"[:600]}
            print(traceback.format_exc(), file=sys.stderr, flush=True)
            save_json(args)
            continue
        kernels = [e for e in _device_activity(prof) if not _is_copy(e.name)]
        out[key] = {
            "setup_and_warmup_s": round(now() - t - wall, 2),
            "wall_ms_per_step": round(wall / steps * 1e3, 3),
            "episodes_per_s": round(runs * batch * steps / wall, 1),
            "device_kernels_per_step": round(len(kernels) / steps, 1),
            "kernel_ms_per_step": round(sum(e.device_time_total for e in kernels) / steps / 1e3, 3),
        }  # fmt: skip
        print(f"  compiled {key}: {json.dumps(out[key])}", flush=True)
        save_json(args)
    return out


def _bench_rows(args, device, label: str, *flags: str, compiled: bool = False,
                steps: int = 10) -> list[dict[str, Any]]:  # fmt: skip
    """The rows of one ``pyskick bench --training`` call (paper-sun360, a run alone and a pack
    of 15, replayed as CUDA graphs; cpu-demo, eager, 1 and 2 runs in a rehearsal) with
    ``flags``, the networks ``compiled`` or not, ``steps`` timed steps (2 in a rehearsal), in
    a process of its own: PyTorch keeps the
    algorithm cuDNN picked for a convolution's shape for the rest of a process, however it
    picked it, so each way of picking needs a fresh process. Its progress lines are printed
    as it ends."""
    import subprocess

    graph = device.type == "cuda"
    mode = ("compiled-graph" if compiled else "graph") if graph else (
        "compiled" if compiled else "eager")  # fmt: skip
    if graph:
        sizes = ["--preset", "paper-sun360", "--device", "cuda", "--runs", "1,15",
                 "--steps", "2" if args.quick else str(steps)]  # fmt: skip
    else:
        sizes = ["--preset", "cpu-demo", "--device", "cpu", "--runs", "1,2", "--steps", "2"]
    command = [sys.executable, "-m", "pyskick", "bench", "--training", *sizes, "--mode", mode,
               *flags, "--json"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    for line in done.stderr.splitlines():
        print(f"  {label}: {line}", flush=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[2:])} exited with {done.returncode}")
    return json.loads(done.stdout)["rows"]


def part_cudnn(args, device, ctx) -> dict[str, Any]:
    """Training steps as CUDA graphs with cuDNN's heuristics and its autotuner, each in a
    process of its own (see the module docstring)."""
    graph = device.type == "cuda"
    out: dict[str, Any] = {"graph": graph, "rows": []}
    RESULTS["cudnn"] = out
    for precision in ("fp32", "bf16") if graph else ("fp32",):  # rows kept as they come
        for cudnn in ("heuristic", "benchmark"):
            out["rows"] += _bench_rows(args, device, "cudnn", "--precision", precision,
                                       "--cudnn", cudnn)  # fmt: skip
            save_json(args)
    return out


# Every lever of the engine that paid on its own (H200, 2026-11-30: channels-last did not, 0.85x
# for a pack of 15) but the compilation, then with it, each group in a process of its own
# (cuDNN's picks are the process's), after plain rows of the same call.
LEVERS = ("--decode", "once", "--cudnn", "benchmark")


def part_levers(args, device, ctx) -> dict[str, Any]:
    """Replayed steps with every lever at once (see the module docstring)."""
    graph = device.type == "cuda"
    out: dict[str, Any] = {"graph": graph, "rows": []}
    RESULTS["levers"] = out
    groups = [  # the compiled rows last: their compilation may time out
        ("fp32", (), False),
        ("fp32", LEVERS, False),
        ("fp32", LEVERS, True),
    ] + ([("bf16", LEVERS, True)] if graph else [])  # fmt: skip
    for precision, levers, compiled in groups:  # rows kept as they come
        out["rows"] += _bench_rows(args, device, "levers", "--precision", precision, *levers,
                                   compiled=compiled)  # fmt: skip
        save_json(args)
    return out


def part_convs(args, device, ctx) -> dict[str, Any]:
    """Replayed steps of a run alone and a pack of 15 with the pack's convolutions grouped and
    run by run (``--packed-convs``, ``TrainConfig.packed_convs``), with the levers that paid
    (decoding once, the autotuner), fp32 and bf16, in one process (see the module docstring)."""
    graph = device.type == "cuda"
    out: dict[str, Any] = {"graph": graph, "rows": []}
    RESULTS["convs"] = out
    precisions = "fp32,bf16" if graph else "fp32"
    out["rows"] += _bench_rows(args, device, "convs", "--precision", precisions, *LEVERS,
                               "--packed-convs", "grouped,per-run")  # fmt: skip
    return out


def part_layout(args, device, ctx) -> dict[str, Any]:
    """Replayed steps with the convolutions contiguous and channels-last (see the module
    docstring)."""
    from pyskick.training.bench import as_dicts, bench_training

    graph = device.type == "cuda"
    out: dict[str, Any] = {"graph": graph}
    RESULTS["layout"] = out
    out["rows"] = []
    for precision in ("fp32", "bf16") if graph else ("fp32",):  # rows kept as they come
        rows = bench_training(
            preset="paper-sun360" if graph else "cpu-demo", device=device.type,
            runs=(1, 15) if graph else (1, 2), precisions=(precision,),
            modes=("graph",) if graph else ("eager",), layouts=("contiguous", "channels-last"),
            steps=2 if args.quick else 10,
            progress=lambda line: print(f"  layout: {line}", flush=True),
        )  # fmt: skip
        out["rows"] += as_dicts(rows)
        save_json(args)
    runs = 15 if graph else 2
    key = f"replay-{runs}-fp32-channels-last"
    out[key] = _profiled_replay(args, device, key, runs, channels_last=True)
    return out


def _profiled_replay(args, device, key: str, runs: int, **switches: bool) -> dict[str, Any]:
    """The replay summary of ``runs`` runs' fp32 steps with ``switches``
    (:func:`_replay_variant`'s), printed and appended to ``--profile-out`` under ``key``."""
    graph = device.type == "cuda"
    steps = 2 if args.quick else 5
    tmp = Path(tempfile.mkdtemp(prefix="replay-", dir=args.work))
    prof, wall = _replay_variant(device, runs, "fp32", graph, steps, tmp, **switches)
    res = _replay_summary(prof, wall, steps)
    brief = {k: v for k, v in res.items() if k != "top_kernels"}
    print(f"  {key}: {json.dumps(brief)}", flush=True)
    sort = "self_device_time_total" if graph else "self_cpu_time_total"
    with Path(args.profile_out).open("a") as f:
        f.write(f"\n\n=== {key}, {steps} steps\n"
                + json.dumps(res, indent=1) + "\n"
                + prof.key_averages().table(sort_by=sort, row_limit=30) + "\n")  # fmt: skip
    return res


def part_decode(args, device, ctx) -> dict[str, Any]:
    """Replayed steps decoding each glimpse and decoding once (see the module docstring)."""
    from pyskick.training.bench import as_dicts, bench_training

    graph = device.type == "cuda"
    out: dict[str, Any] = {"graph": graph, "rows": []}
    RESULTS["decode"] = out
    groups = [(("graph",), (1, 15)), (("compiled-graph",), (1,))] if graph else [
        (("eager",), (1, 2))]  # fmt: skip
    for i, (modes, runs) in enumerate(groups):  # rows kept as they come
        rows = bench_training(
            preset="paper-sun360" if graph else "cpu-demo", device=device.type, runs=runs,
            modes=modes, decodes=("per-glimpse", "once"), steps=2 if args.quick else 10,
            progress=lambda line: print(f"  decode: {line}", flush=True),
        )  # fmt: skip
        out["rows"] += as_dicts(rows)
        save_json(args)
        if i == 0:  # the profile before the compiled rows, whose compilation may time out
            key = "replay-1-fp32-decode-once"
            out[key] = _profiled_replay(args, device, key, 1, decode_once=True)
            save_json(args)
    return out


def part_compile(args, device, ctx) -> dict[str, Any]:
    from pyskick.models import CompletionPolicy, preset

    cfg = preset("paper-sun360")
    policy = CompletionPolicy(cfg).to(device)
    policy.freeze_sense_and_fuse()
    compiled = torch.compile(policy, mode=args.compile_mode)
    B, T = 32, 4
    views = torch.randn(T, B, 3, 32, 32, device=device) * 0.3
    proprio = torch.randint(-2, 3, (T, B, 3), device=device).float()
    target = torch.randn(B, 4, 8, 3, 32, 32, device=device) * 0.3
    params = policy.trainable_parameters()
    opt = torch.optim.Adam(params, lr=1e-4)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        state, loss = None, 0.0
        for t in range(T):
            out = compiled(views[t], proprio[t], t, state)
            state = out.state
            loss = loss + F.mse_loss(out.decoded, target)
        loss.backward()
        opt.step()

    t = now()
    step()
    sync(device)
    first_s = now() - t
    for _ in range(3):
        step()
    sync(device)
    t = now()
    for _ in range(20):
        step()
    sync(device)
    return {"mode": args.compile_mode, "first_call_s": round(first_s, 2),
            "ms_per_step_B32": round((now() - t) / 20 * 1e3, 3)}  # fmt: skip


def part_nccl(args, device, ctx) -> dict[str, Any]:
    import torch.distributed as dist

    from pyskick.distributed import DistContext, all_reduce_sum

    res: dict[str, Any] = {}
    for backend in ("nccl", "cpu:gloo,cuda:nccl"):
        row: dict[str, str] = {}
        dist.init_process_group(backend=backend, store=dist.HashStore(), rank=0, world_size=1)
        tensors = (
            ("cpu", torch.ones(2, dtype=torch.float64)),
            ("cuda", torch.ones(2, dtype=torch.float64, device=device)),
        )
        for name, tensor in tensors:
            try:
                # A 2-rank context over the 1-rank group: the path trainer.py takes under torchrun.
                all_reduce_sum(tensor, DistContext(rank=0, world_size=2))
                row[name] = "ok"
            except Exception as exc:
                row[name] = f"{type(exc).__name__}: {exc}"[:200]
        dist.destroy_process_group()
        res[backend] = row
    return res


def part_ltla1(args, device, ctx) -> dict[str, Any]:
    """One ltla epoch from the epoch part's one-view checkpoint, nothing else: run K of these
    at once (separate processes, ``--work`` shared, ``--out`` each its own) to see how much
    of the GPU one eager run leaves to others."""
    from pyskick.config import train_preset
    from pyskick.training import TrainData

    base = train_preset("paper-sun360").replace(
        device=device.type, epochs=1, batch_size=args.batch_size, eval_batch_size=args.eval_batch
    )
    data = TrainData(smooth_grids(args.n_train, 1, device), smooth_grids(args.n_val, 2, device),
                     SUN360_MEAN)  # fmt: skip
    out = Path(tempfile.mkdtemp(prefix="ltla1-", dir=args.work))
    res, _ = time_stage("train", base, out, data, epochs=1, init=ctx.get("one_view"))
    return res


def part_packval(args, device, ctx) -> dict[str, Any]:
    """A pack of 15's validation (``--n-val`` random grids, untrained runs, the preset's eval
    batch) at once (``PackTrainer.validate(packed=True)``, one ``evaluate_pack``: the default on
    a GPU) against its runs one by one (the default on the CPU), through ``pyskick bench
    --training --validation-grids``: the rows' ``validation_seconds_packed``,
    ``validation_seconds_one_by_one`` and ``validation_max_rel_diff``, beside 2 replayed
    training steps each."""
    out: dict[str, Any] = {"n_val": args.n_val, "rows": []}
    RESULTS["packval"] = out
    out["rows"] = _bench_rows(args, device, "packval", "--validation-grids", str(args.n_val),
                              steps=2)  # fmt: skip
    for row in out["rows"]:
        if row["validation_seconds_packed"]:
            out["speedup"] = round(
                row["validation_seconds_one_by_one"] / row["validation_seconds_packed"], 3
            )
            out["max_rel_diff"] = row["validation_max_rel_diff"]
    return out


# (op, batch, variant): the kernel benchmark's scales, coverage_matrix at its chunk of 8 and at
# 64 (one call on 805 MB of recon).
_OPCOST_CASES = (("rotate_viewgrid", 32, "uint8"), ("rotate_viewgrid", 1024, "uint8"),
                 ("rotate_viewgrid", 1024, "float32"), ("nms_rewards", 32, None),
                 ("nms_rewards", 1024, None), ("greedy_coverage", 32, None),
                 ("greedy_coverage", 1024, None), ("coverage_matrix", 8, None),
                 ("coverage_matrix", 64, None))  # fmt: skip


def _host_s(fn, device, calls: int) -> float:
    """Median seconds the host spends in one call of ``fn`` (the device idle before each)."""
    times = []
    for _ in range(calls):
        sync(device)
        t = now()
        fn()
        times.append(now() - t)
    sync(device)
    return statistics.median(times)


def _call_cost(fn, device, calls: int) -> dict[str, Any]:
    """One callable's costs: waited for, queued, the host's share, and (on a GPU) its device
    activities per call from torch.profiler."""
    from pyskick.kernel_bench import time_callable, time_queued

    res: dict[str, Any] = {
        "waited_us": time_callable(fn, repeats=calls, warmup=3, device=device).median * 1e6,
        "queued_us": time_queued(fn, calls=calls, device=device) * 1e6,
        "host_us": _host_s(fn, device, calls) * 1e6,
    }
    if device.type == "cuda":
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        n = 10
        with torch.profiler.profile(activities=activities) as prof:
            for _ in range(n):
                fn()
            sync(device)
        activity = _device_activity(prof)
        kernels = [e for e in activity if not _is_copy(e.name)]
        res["device_us"] = sum(float(e.device_time_total) for e in activity) / n
        res["kernels_per_call"] = len(kernels) / n
        res["copies_fills_per_call"] = (len(activity) - len(kernels)) / n
        res["kernels"] = sorted({e.name[:120] for e in kernels})
    return {k: round(v, 2) if isinstance(v, float) else v for k, v in res.items()}


def part_opcost(args, device, ctx) -> dict[str, Any]:
    """What one call of each op costs, split into the host's work and the device's: the kernel
    benchmark's ``rotate_viewgrid`` and ``coverage_matrix`` rows missed their 1.5x-the-copy
    targets by about the same time at every size, and ``nms_rewards``/``greedy_coverage`` took
    the same time at B = 32 and 1,024 (2026-11-27). Per case: waited for (the benchmark's
    median), queued back to back, the host's time in a call, the device's time per call and its
    kernels (torch.profiler), for the op and for its copy baseline; then rotate_viewgrid's host
    time layer by layer (public wrapper, operator, launch, binding) and a cProfile of the
    wrapper, appended to ``--profile-out``."""
    import cProfile
    import io
    import pstats

    from pyskick import ops
    from pyskick.kernel_bench import build_workload
    from pyskick.ops._dispatch import launch
    from pyskick.ops._native import native_module

    calls = 5 if args.quick else 50
    out: dict[str, Any] = {"calls": calls}
    RESULTS["opcost"] = out
    cases = _OPCOST_CASES
    if args.quick:
        cases = tuple((op, 2, variant) for op, _, variant in cases[::2])
    for op, batch, variant in cases:
        key = f"{op} B={batch}" + (f" {variant}" if variant else "")
        try:
            work = build_workload(op, batch, variant=variant, device=device)
            row = {"native": _call_cost(lambda w=work: w.run("native"), device, calls)}
            baseline = work.baseline()
            if baseline is not None:
                row["baseline"] = _call_cost(baseline, device, calls)
                row["baseline_kind"] = work.bound.kind
            out[key] = row
            print(f"  opcost {key}: {json.dumps(row)}", flush=True)
        except Exception as exc:  # recorded; the other cases go on
            out[key] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
            print(traceback.format_exc(), file=sys.stderr, flush=True)
        save_json(args)
    # rotate_viewgrid at B = 32 (a kernel of microseconds): the host's time, layer by layer.
    work = build_workload("rotate_viewgrid", 32, variant="uint8", device=device)
    grid, shift = work.args[:2]
    dst = torch.empty_like(grid)
    lib = native_module()
    view_bytes = grid[0, 0, 0].numel() * grid.element_size()
    B, N, M = grid.shape[:3]
    pointers = (grid.data_ptr(), dst.data_ptr(), B, N, M, view_bytes, shift.data_ptr(), 0, False)
    suffix = "cuda" if device.type == "cuda" else "cpu"
    binding = getattr(lib, f"rotate_viewgrid_{suffix}")
    stream = [int(torch.cuda.current_stream(device).cuda_stream)] if device.type == "cuda" else []
    layers = {
        "public wrapper": lambda: ops.rotate_viewgrid(grid, shift),
        "operator (torch.ops.pyskick)": lambda: torch.ops.pyskick.rotate_viewgrid(
            grid, shift, None, False, "auto"),
        "launch (device context, stream)": lambda: launch("rotate_viewgrid", device, *pointers),
        "binding": lambda: binding(*pointers, *stream),
        "torch.empty_like": lambda: torch.empty_like(grid),
        "grid.clone()": lambda: grid.clone(),
    }  # fmt: skip
    out["rotate_layers_host_us"] = {
        name: round(_host_s(fn, device, calls * 4) * 1e6, 2) for name, fn in layers.items()
    }
    print(f"  opcost layers: {json.dumps(out['rotate_layers_host_us'])}", flush=True)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(300):
        ops.rotate_viewgrid(grid, shift)
    profiler.disable()
    sync(device)
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(20)
    with Path(args.profile_out).open("a") as f:
        f.write(f"=== opcost: cProfile of 300 rotate_viewgrid calls, B=32 uint8 on {device}\n"
                + text.getvalue() + "\n")  # fmt: skip
    return out


PARTS = {
    "opcost": part_opcost,
    "ltla1": part_ltla1,
    "epoch": part_epoch,
    "eval": part_eval,
    "score": part_score,
    "step": part_step,
    "profile": part_profile,
    "replay": part_replay,
    "layout": part_layout,
    "decode": part_decode,
    "cudnn": part_cudnn,
    "levers": part_levers,
    "packval": part_packval,
    "convs": part_convs,
    "compiled": part_compiled,
    "compile": part_compile,
    "nccl": part_nccl,
}


def save_json(args) -> None:
    Path(args.out).write_text(json.dumps(RESULTS, indent=1, default=str))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="epoch,eval,score,step,profile")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", default="perf.json")
    parser.add_argument("--profile-out", default="profile.txt")
    parser.add_argument("--work", default=None, help="run folders (default: a temporary one)")
    parser.add_argument("--n-train", type=int, default=6000)
    parser.add_argument("--n-val", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--eval-batch", type=int, default=256)
    parser.add_argument("--step-batches", default="32,256,1024,4096")
    parser.add_argument("--step-iters", type=int, default=10)
    parser.add_argument("--compile-mode", default="default")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="CPU rehearsal sizes: 64 train, 8 val grids, 1 epoch, B=32 steps",
    )
    args = parser.parse_args()
    if args.quick:
        args.n_train, args.n_val, args.epochs = 64, 8, 1
        args.step_batches, args.step_iters = "32", 2
    device = torch.device(args.device)
    args.work = args.work or tempfile.mkdtemp(prefix="pyskick-perf-")
    previous = Path(args.out)
    if previous.is_file():  # a second invocation (another --parts) adds to the same file
        RESULTS.update(json.loads(previous.read_text()))
    RESULTS.setdefault("meta", {
        "torch": torch.__version__, "device": torch.cuda.get_device_name(0)
        if device.type == "cuda" else "cpu", "n_train": args.n_train, "n_val": args.n_val,
        "batch_size": args.batch_size, "threads": torch.get_num_threads(),
    })  # fmt: skip
    ctx: dict[str, Any] = {}
    ctx_file = Path(args.work) / "ctx.json"
    if ctx_file.is_file():  # checkpoints of an earlier invocation with the same --work
        for key, value in json.loads(ctx_file.read_text()).items():
            ctx[key] = Path(value)
    for name in args.parts.split(","):
        print(f"part {name}", flush=True)
        t = now()
        try:
            RESULTS[name] = PARTS[name](args, device, ctx)
        except Exception as exc:  # keep what the part already recorded
            partial = RESULTS.get(name)
            RESULTS[name] = partial if isinstance(partial, dict) else {}
            RESULTS[name].update(error=f"{type(exc).__name__}: {exc}"[:500],
                                 traceback=traceback.format_exc()[-2000:])  # fmt: skip
            print(RESULTS[name]["traceback"], file=sys.stderr, flush=True)
        RESULTS[name + "_seconds"] = round(now() - t, 2)
        save_json(args)
        paths = {k: str(v) for k, v in ctx.items() if isinstance(v, Path)}
        tmp = ctx_file.with_suffix(f".{os.getpid()}.tmp")  # concurrent runs share --work
        tmp.write_text(json.dumps(paths))
        tmp.replace(ctx_file)


if __name__ == "__main__":
    main()
