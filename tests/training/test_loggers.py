"""metrics.jsonl logging, resume truncation, rank-0-only writing."""

from __future__ import annotations

from pathlib import Path

from pyskick.training.loggers import JsonlLogger, NullLogger, make_logger, read_metrics


def test_jsonl_records_and_resume_truncation(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    logger = JsonlLogger(path)
    for step in range(4):
        logger.write({"train/loss": 1.0 / (step + 1), "val/error": float("nan")}, step)
    logger.close()
    records = read_metrics(path)
    assert [r["step"] for r in records] == [0, 1, 2, 3]
    assert records[1]["train/loss"] == 0.5
    assert records[0]["val/error"] is None  # non-finite values become null, the file stays JSON
    resumed = JsonlLogger(path, keep_until_step=1)
    resumed.write({"train/loss": 9.0}, 2)
    resumed.close()
    assert [(r["step"], r["train/loss"]) for r in read_metrics(path)] == [
        (0, 1.0),
        (1, 0.5),
        (2, 9.0),
    ]


def test_only_rank_zero_writes(tmp_path: Path) -> None:
    assert isinstance(make_logger(tmp_path / "r1", rank=1), NullLogger)
    assert not (tmp_path / "r1").exists()
    logger = make_logger(tmp_path / "r0", rank=0)
    logger.write({"perf/episodes_per_s": 12.5}, 0)
    logger.close()
    assert read_metrics(tmp_path / "r0" / "metrics.jsonl")[0]["perf/episodes_per_s"] == 12.5
