"""Count the operators one training step dispatches, on the CPU: the figure behind the
operator counts in docs/training.md ("The training step", "Decoding once", "Measured on an
H200").

A replayed CUDA graph of a run alone is bound by its count of small kernels, and each operator
that computes is at least one kernel on a GPU. This counts, with a ``TorchDispatchMode``, every
aten operator of the second step of a fresh run (the first creates Adam's state), leaving out
Adam's own (``--with-adam`` keeps them) and the operators that only make views or metadata.

    .venv/bin/python tools/step_ops.py                      # paper-sun360 ltla, B = 32, T = 4
    .venv/bin/python tools/step_ops.py --decode-once --critic asymm-critic --top 20
    .venv/bin/python tools/step_ops.py --runs 15           # a pack of 15 runs' step

A pack (``--runs R``, R > 1) runs its convolutions as grouped calls, as it does on a GPU (on the
CPU it runs them one run after another: ``TrainConfig.packed_convs``), so that its count is a
GPU's.
"""

from __future__ import annotations

import argparse
import collections
import tempfile
import traceback
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from pyskick.checkpoint import save_checkpoint
from pyskick.config import train_preset
from pyskick.models import CompletionPolicy
from pyskick.models import preset as preset_model
from pyskick.training.data import TrainData
from pyskick.training.pack import PackMember, PackTrainer
from pyskick.training.trainer import Trainer

# Operators that make views, read metadata or allocate without computing: no kernel.
NO_KERNEL = frozenset((
    "empty", "empty_strided", "empty_like", "view", "reshape", "_reshape_alias", "as_strided",
    "t", "transpose", "expand", "expand_as", "view_as", "slice", "select", "unsqueeze",
    "squeeze", "detach", "detach_", "alias", "_unsafe_view", "resize_", "lift", "lift_fresh",
    "result_type", "unflatten", "flatten", "permute", "numpy_T", "contiguous", "unbind", "split",
    "chunk", "narrow", "is_nonzero", "item", "_local_scalar_dense", "to", "_to_copy", "set_",
    "requires_grad_", "size", "stride", "_has_compatible_shallow_copy_type", "is_same_size",
    "dim", "_nnz", "numel", "broadcast_tensors", "matrix_H", "conj", "resolve_conj",
    "resolve_neg", "_conj", "_neg_view", "sym_size", "sym_stride", "sym_numel",
    "_record_function_enter_new", "_record_function_exit",
))  # fmt: skip


class StepOperators(TorchDispatchMode):
    """Counts the computing operators dispatched while active, by name and by the innermost
    pyskick function on the Python stack (the backward pass shows as its caller)."""

    def __init__(self) -> None:
        super().__init__()
        self.by_op: collections.Counter[str] = collections.Counter()
        self.by_function: collections.Counter[str] = collections.Counter()
        self.paused = False

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = func.overloadpacket.__name__
        if not self.paused and name not in NO_KERNEL:
            self.by_op[name] += 1
            frames = [f for f in traceback.extract_stack() if "/pyskick/" in f.filename]
            where = f"{Path(frames[-1].filename).name}:{frames[-1].name}" if frames else "?"
            self.by_function[where] += 1
        return func(*args, **(kwargs or {}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="paper-sun360")
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--critic", default="average")
    parser.add_argument("--decode-once", action="store_true")
    parser.add_argument("--with-adam", action="store_true")
    parser.add_argument("--runs", type=int, default=1, help="a pack of this many runs (R > 1)")
    parser.add_argument("--top", type=int, default=0, help="also list the N commonest")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error(f"--runs must be 1 or more, got {args.runs}")
    torch.set_num_threads(1)
    config = train_preset(args.preset).replace(
        device="cpu", critic=args.critic, decode_once=args.decode_once
    )
    if args.batch_size is not None:
        config = config.replace(batch_size=args.batch_size)
    model = preset_model(config.model)
    shape = (model.n_elevations, model.n_azimuths, model.channels, model.view_size, model.view_size)
    generator = torch.Generator().manual_seed(0)
    grids = torch.randint(0, 256, (4 * config.batch_size, *shape), generator=generator)
    data = TrainData(grids.to(torch.uint8), grids[:8].to(torch.uint8), (128.0,) * model.channels)
    with tempfile.TemporaryDirectory(prefix="step-ops-") as tmp:
        count(args, config, data, model, Path(tmp))


def count(args: argparse.Namespace, config: Any, data: TrainData, model: Any, folder: Path) -> None:
    """Count and print the operators of one step of ``args``' run (or pack) in ``folder``."""
    torch.manual_seed(0)
    policy = CompletionPolicy(model)
    save_checkpoint(
        folder / "init.pt", {"model": policy.state_dict(), "model_config": model.to_dict()}
    )
    init = folder / "init.pt"
    if args.runs > 1:
        grouped = config.replace(packed_convs="grouped")
        members = [
            PackMember(grouped.replace(seed=config.seed + r), folder / f"run{r}", init=init)
            for r in range(args.runs)
        ]
        pack = PackTrainer(members, data).setup()
        pack.policy.train()
        optimizer = pack.optimizer.optimizer
        scales = torch.zeros(args.runs, dtype=torch.float64)
        batches = pack.batches(0)

        def step() -> None:
            pack.train_step(next(batches), 0, scales)

    else:
        trainer = Trainer(config, folder / "run", data, stage="train", init=init).setup()
        optimizer = trainer.optimizer
        batches = trainer.batches(0)

        def step() -> None:
            trainer.train_step(next(batches), 0)

    counter = StepOperators()
    if not args.with_adam:
        optimizer.register_step_pre_hook(lambda *_: setattr(counter, "paused", True))
        optimizer.register_step_post_hook(lambda *_: setattr(counter, "paused", False))
    step()  # Adam's state, created at the first step
    with counter:
        step()
    adam = "with" if args.with_adam else "without"
    what = f"a pack of {args.runs} runs'" if args.runs > 1 else "one"
    print(
        f"{args.preset} {config.critic} B={config.batch_size} T={config.T} "
        f"decode_once={config.decode_once}: {sum(counter.by_op.values())} operators "
        f"that compute in {what} training step ({adam} Adam's)"
    )
    if args.top:
        for title, counts in (("by function", counter.by_function), ("by operator", counter.by_op)):
            print(f"\n{title}:")
            for key, n in counts.most_common(args.top):
                print(f"{n:6d}  {key}")


if __name__ == "__main__":
    main()
