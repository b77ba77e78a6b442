"""Count what one eager ltla training batch (paper-sun360 widths) dispatches, on the CPU.

aten leaf ops that would launch a CUDA kernel (metadata-only ops excluded), host-sync ops
(item/_local_scalar_dense/is_nonzero), and the same for one validation chunk.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from pyskick.config import train_preset
from pyskick.training import TrainData, Trainer

torch.set_num_threads(1)
META = {
    "aten::empty",
    "aten::empty_strided",
    "aten::view",
    "aten::reshape",
    "aten::_reshape_alias",
    "aten::as_strided",
    "aten::t",
    "aten::transpose",
    "aten::expand",
    "aten::slice",
    "aten::select",
    "aten::unsqueeze",
    "aten::squeeze",
    "aten::detach",
    "aten::alias",
    "aten::_unsafe_view",
    "aten::resize_",
    "aten::lift_fresh",
    "aten::result_type",
    "aten::unflatten",
    "aten::flatten",
    "aten::permute",
    "aten::numpy_T",
    "aten::contiguous",
    "aten::unbind",
    "aten::split",
    "aten::chunk",
    "aten::narrow",
    "aten::expand_as",
    "aten::view_as",
    "aten::is_nonzero",
    "aten::item",
    "aten::_local_scalar_dense",
    "aten::to",
    "aten::_to_copy",
    "aten::set_",
    "aten::empty_like",
    "aten::detach_",
    "aten::requires_grad_",
    "aten::size",
    "aten::stride",
    "aten::lift",
    "aten::_has_compatible_shallow_copy_type",
    "aten::is_same_size",
    "aten::dim",
    "aten::_nnz",
    "aten::numel",
    "aten::broadcast_tensors",
    "aten::matrix_H",
    "aten::conj",
    "aten::resolve_conj",
    "aten::resolve_neg",
    "aten::_conj",
    "aten::_neg_view",
    "aten::sym_size",
    "aten::sym_stride",
    "aten::sym_numel",
}
SYNC = {"aten::_local_scalar_dense"}


def smooth(n, seed):
    g = torch.Generator().manual_seed(seed)
    coarse = torch.rand(n, 96, 4, 4, generator=g)
    fine = torch.nn.functional.interpolate(coarse, size=32, mode="bilinear", align_corners=False)
    return (fine.view(n, 4, 8, 3, 32, 32) * 255).round().to(torch.uint8)


def tally(prof, n):
    leaves, syncs, copies = {}, 0, 0
    for e in prof.events():
        if not e.name.startswith("aten::"):
            continue
        if e.name in SYNC:
            syncs += 1
        if e.name == "aten::copy_":
            copies += 1
        if any(c.name.startswith("aten::") for c in e.cpu_children):
            continue
        if e.name in META:
            continue
        leaves[e.name] = leaves.get(e.name, 0) + 1
    total = sum(leaves.values())
    top = sorted(leaves.items(), key=lambda kv: -kv[1])[:25]
    return {
        "kernel_like_ops_per_unit": total / n,
        "syncs_per_unit": syncs / n,
        "copy_ops_per_unit": copies / n,
        "top": [(k, v / n) for k, v in top],
    }


B = int(sys.argv[1]) if len(sys.argv) > 1 else 4
nb = 3
work = Path(tempfile.mkdtemp())
data = TrainData(smooth(B * nb, 1), smooth(8, 2), (119.16, 107.68, 95.12))
cfg = train_preset("paper-sun360").replace(
    device="cpu", batch_size=B, pretrain_epochs=1, epochs=2, eval_batch_size=64
)
pre = Trainer(cfg, work / "pre", data, stage="pretrain", loggers=["jsonl"]).setup()
(work / "pre").mkdir(exist_ok=True)
pre.train_epoch(0)
pre.save(0, best=True)
tr = Trainer(
    cfg, work / "ltla", data, stage="train", init=work / "pre" / "best.pt", loggers=["jsonl"]
).setup()
tr.train_epoch(0)
with profile(activities=[ProfilerActivity.CPU]) as prof:
    t = time.perf_counter()
    tr.train_epoch(1)
    wall = time.perf_counter() - t
res = {"B": B, "train_batch": tally(prof, nb), "train_batch_wall_s": wall / nb}
with profile(activities=[ProfilerActivity.CPU]) as prof:
    tr.validate()
# 8 val grids x 8 starts = 64 episodes = 1 chunk at eval batch 64
res["validate_chunk"] = tally(prof, 1)
print(json.dumps(res, indent=1))
