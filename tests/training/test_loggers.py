"""metrics.jsonl logging, resume truncation, rank-0-only writing, loggers chosen by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyskick.registry import UnknownNameError
from pyskick.training.loggers import (
    Dispatcher,
    JsonlLogger,
    RunInfo,
    TensorBoardLogger,
    default_loggers,
    logger_names,
    make_loggers,
    read_metrics,
    tensorboard_available,
)


def test_jsonl_records_and_resume_truncation(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    logger = JsonlLogger()
    logger.start(RunInfo(tmp_path))
    for step in range(4):
        logger.log(step, {"train/loss": 1.0 / (step + 1), "val/error": float("nan")})
    logger.close()
    records = read_metrics(path)
    assert [r["step"] for r in records] == [0, 1, 2, 3]
    assert records[1]["train/loss"] == 0.5
    assert records[0]["val/error"] is None  # non-finite values become null, the file stays JSON
    # A run resumed at step 2 drops the stale records of steps 2 and 3 first.
    resumed = JsonlLogger()
    resumed.start(RunInfo(tmp_path, first_step=2))
    resumed.log(2, {"train/loss": 9.0})
    resumed.close()
    assert [(r["step"], r["train/loss"]) for r in read_metrics(path)] == [
        (0, 1.0),
        (1, 0.5),
        (2, 9.0),
    ]
    # A run that starts from scratch drops every record of an abandoned attempt.
    fresh = JsonlLogger(path)
    fresh.start(RunInfo(tmp_path / "elsewhere"))
    fresh.close()
    assert read_metrics(path) == []


def test_only_rank_zero_writes(tmp_path: Path) -> None:
    quiet = make_loggers(["jsonl"], rank=1)
    assert quiet.loggers == []
    assert quiet.names == ["jsonl"]
    quiet.start(RunInfo(tmp_path / "r1"))
    quiet.log(0, {"perf/episodes_per_s": 1.0})
    quiet.close()
    assert not (tmp_path / "r1").exists()
    logger = make_loggers(["jsonl"], rank=0)
    logger.start(RunInfo(tmp_path / "r0"))
    logger.log(0, {"perf/episodes_per_s": 12.5})
    logger.close()
    assert read_metrics(tmp_path / "r0" / "metrics.jsonl")[0]["perf/episodes_per_s"] == 12.5


def test_names_resolve_with_jsonl_always_first() -> None:
    assert default_loggers() == ["jsonl", *(["tensorboard"] if tensorboard_available() else [])]
    assert logger_names(None) == default_loggers()
    assert logger_names([]) == ["jsonl"]
    assert logger_names(["jsonl"]) == ["jsonl"]
    # Aliases resolve to the primary name, once.
    assert logger_names(["tb", "tensorboard"]) == ["jsonl", "tensorboard"]
    with pytest.raises(UnknownNameError, match=r"^unknown logger 'nope'; valid names: jsonl, "):
        logger_names(["nope"])
    with pytest.raises(TypeError, match="not a string"):
        logger_names("jsonl")


def test_tensorboard_logger_writes_events_or_names_its_missing_package(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    if not tensorboard_available():  # the optional `tb` extra
        with pytest.raises(RuntimeError, match=r"logger 'tensorboard' .* cannot start: .*tensorb"):
            make_loggers(["tensorboard"])
        return
    logger = make_loggers(["tensorboard"])
    assert [type(x) for x in logger.loggers] == [JsonlLogger, TensorBoardLogger]
    with caplog.at_level("INFO", logger="pyskick.training.loggers"):
        logger.start(RunInfo(tmp_path, stage="pretrain", steps=1))
    # Where the logs go is said (issue 26), with the command that shows them.
    folder = tmp_path / "tensorboard"
    assert f"TensorBoard logs in {folder} (view them: tensorboard --logdir {folder})" in caplog.text
    logger.log(0, {"val/rec_error": 0.5})
    logger.close()
    assert list(folder.glob("events.out.tfevents.*"))


class _Broken:
    def __init__(self, fail: str) -> None:
        self.fail = fail
        self.calls: list[str] = []

    def start(self, run: RunInfo) -> None:
        self.calls.append("start")
        if self.fail == "start":
            raise OSError("store unreachable")

    def log(self, step: int, metrics: object) -> None:
        self.calls.append("log")

    def close(self) -> None:
        self.calls.append("close")
        if self.fail == "close":
            raise OSError("cannot flush")


def test_dispatcher_releases_and_reports_failures(tmp_path: Path) -> None:
    # A logger that cannot start closes those already started, and the error propagates.
    good, bad = _Broken(""), _Broken("start")
    with pytest.raises(OSError, match="store unreachable"):
        Dispatcher([good, bad]).start(RunInfo(tmp_path))
    assert good.calls == ["start", "close"]
    # A logger that fails to close does not keep the others open.
    first, second = _Broken("close"), _Broken("")
    dispatcher = Dispatcher([first, second])
    dispatcher.start(RunInfo(tmp_path))
    with pytest.raises(OSError, match="cannot flush"):
        dispatcher.close()
    assert second.calls == ["start", "close"]
    assert dispatcher.names == []
