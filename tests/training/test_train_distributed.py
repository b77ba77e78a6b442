"""torchrun with 2 CPU processes (gloo): identical weights on every rank, close to 1 process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from pyskick.checkpoint import load_checkpoint
from pyskick.testing import run_python
from pyskick.training.loggers import read_metrics

ENTRY = Path(__file__).with_name("ddp_entry.py")


@pytest.mark.slow
def test_two_ranks_agree_and_match_one_process(tmp_path):
    ddp, single = tmp_path / "ddp", tmp_path / "single"
    run_python(ENTRY, ddp, cwd=tmp_path, ranks=2)
    run_python(ENTRY, single, cwd=tmp_path)

    ranks = [json.loads((ddp / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["world"] for r in ranks] == [2, 2]
    assert ranks[0]["digest"] == ranks[1]["digest"]  # DDP kept the replicas identical
    assert len(read_metrics(ddp / "train" / "metrics.jsonl")) == 1  # rank 0 alone wrote

    # Same global batches, so the same updates up to BatchNorm statistics, which DDP computes
    # per rank (4 samples) instead of over the global batch (8): updates agree in direction.
    a = load_checkpoint(ddp / "pre" / "latest.pt")
    b = load_checkpoint(single / "pre" / "latest.pt")
    torch.manual_seed(a["config"]["seed"])
    init = _initial_weights(a)
    for key in ("aggregate.weight_hh_l0", "decode.0.weight"):
        da = (a["model"][key] - init[key]).flatten()
        db = (b["model"][key] - init[key]).flatten()
        cosine = float(da @ db / (da.norm() * db.norm()))
        assert cosine > 0.9, (key, cosine)
    rec_a = [r["train/rec_error"] for r in read_metrics(ddp / "pre" / "metrics.jsonl")]
    rec_b = [r["train/rec_error"] for r in read_metrics(single / "pre" / "metrics.jsonl")]
    assert rec_a == pytest.approx(rec_b, rel=0.02)


def _initial_weights(state: dict) -> dict[str, torch.Tensor]:
    from pyskick.models import CompletionPolicy, ModelConfig

    return CompletionPolicy(ModelConfig.from_dict(state["model_config"])).state_dict()
