"""pyskick.progress (stages, nesting, quiet) and the CLI's renderer of it (bars and lines), and
the stage events of the library's long operations: evaluation, scoring, data make, converters,
training."""

from __future__ import annotations

import io
import logging
import re
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from pyskick import progress
from pyskick.progress import Stage
from pyskick_cli.progress import Renderer, advance_line, choose_mode, end_line, rendering


class Recorder:
    """A sink that keeps ``(event, name, done, depth, lines)`` of every event."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, int, int, str]] = []
        self.stages: list[Stage] = []

    def _keep(self, event: str, stage: Stage) -> None:
        self.events.append((event, stage.name, stage.done, stage.depth, stage.lines))

    def started(self, stage: Stage) -> None:
        self.stages.append(stage)
        self._keep("start", stage)

    def advanced(self, stage: Stage, n: int) -> None:
        self._keep("advance", stage)

    def finished(self, stage: Stage) -> None:
        self._keep("finish", stage)

    def names(self, event: str = "start") -> list[str]:
        return [name for kind, name, *_ in self.events if kind == event]


# ------------------------------------------------------------------------------ the protocol
def test_stages_nest_report_and_cost_nothing_without_a_sink() -> None:
    with progress.stage("alone", total=2) as alone:  # the default sink ignores it
        alone.advance(2)
    assert alone.done == 2
    assert alone.ended is not None
    assert progress.current_stage() is None
    recorder = Recorder()
    with progress.reporting(recorder):
        with progress.stage("outer", total=3, unit="step", lines="each", initial=1) as outer:
            assert progress.current_stage() is outer
            with progress.stage("inner", total=4, unit="batch", lines="none") as inner:
                inner.advance(4)
            outer.advance(label="first", metrics={"loss": 0.5})
            with progress.quiet(), progress.stage("detail", total=1) as detail:
                detail.advance()
            outer.advance(skipped=True)
        assert progress.current_stage() is None
    assert recorder.events == [
        ("start", "outer", 1, 0, "each"),
        ("start", "inner", 0, 1, "none"),
        ("advance", "inner", 4, 1, "none"),
        ("finish", "inner", 4, 1, "none"),
        ("advance", "outer", 2, 0, "each"),
        ("start", "detail", 0, 1, "none"),  # quiet: never a line
        ("advance", "detail", 1, 1, "none"),
        ("finish", "detail", 1, 1, "none"),
        ("advance", "outer", 3, 0, "each"),
        ("finish", "outer", 3, 0, "each"),
    ]
    assert inner.parent is outer
    assert outer.parent is None
    assert outer.skipped == 2  # the initial one and the skipped advance: not in the rate
    assert outer.label is None
    assert outer.metrics == {}
    with progress.stage("after"):  # the sink is gone with its block
        pass
    assert recorder.names()[-1] == "detail"


def test_a_failed_stage_is_marked_and_bad_arguments_are_refused() -> None:
    recorder = Recorder()
    with progress.reporting(recorder), pytest.raises(KeyError), progress.stage("x", 2):
        raise KeyError("boom")
    assert recorder.stages[0].failed
    assert recorder.names("finish") == ["x"]
    for kwargs, message in [
        ({"total": -1}, "total must be >= 0"),
        ({"initial": -2}, "initial must be >= 0"),
        ({"lines": "all"}, "lines must be one of end, each, none"),
    ]:
        with pytest.raises(ValueError, match=message), progress.stage("bad", **kwargs):
            pass


def test_each_thread_has_its_own_sink() -> None:
    recorder, seen = Recorder(), []

    def work() -> None:
        with progress.stage("elsewhere") as stage:
            seen.append(stage)

    with progress.reporting(recorder):
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
    assert recorder.events == []
    assert seen[0].parent is None


# ------------------------------------------------------------------------------ the renderer
def _stage(name: str, total: int | None, unit: str, lines: str, **kwargs) -> Stage:
    return Stage(name, total, unit=unit, lines=lines, parent=None, sink=progress.NULL,
                 initial=kwargs.pop("initial", 0))  # fmt: skip


def test_lines_say_count_metrics_elapsed_and_time_left() -> None:
    epochs = _stage("train", 10, "epoch", "each", initial=2)
    epochs.started -= 4.0  # two epochs of 2 s done here, two before
    epochs.advance(2, metrics={"train_error": 0.012345, "val_error": 0.011})
    line = advance_line(epochs)
    assert line == (
        "train: epoch 4/10 | train_error 0.01235, val_error 0.011 | elapsed 00:04, left 00:12 "
        "(2 s/epoch)"
    )
    steps = _stage("reproduce", 5, "step", "each")
    steps.started -= 10.0
    steps.advance(label="train ltla seed 0")
    assert advance_line(steps).startswith("reproduce: step 1/5 train ltla seed 0 | elapsed 00:10")
    assert "left 00:40" in advance_line(steps)
    scoring = _stage("score rew", 320, "grid", "end")
    scoring.started -= 8.0
    scoring.advance(320)
    scoring.ended = scoring.started + 8.0
    assert end_line(scoring) == "score rew: 320 grid in 00:08 (40 grid/s)"


def test_line_mode_writes_one_line_per_epoch_and_per_ended_stage() -> None:
    stream = io.StringIO()
    with rendering(stream, mode="lines"):
        with progress.stage("train", total=2, unit="epoch", lines="each") as epochs:
            for _ in range(2):
                with progress.stage("batches", total=3, unit="batch", lines="none") as batches:
                    batches.advance(3)
                with progress.stage("evaluate avg", total=6, unit="grid") as evaluating:
                    evaluating.advance(6)
                epochs.advance(metrics={"val_error": 0.5})
        logging.getLogger("pyskick.test").info("a message")
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    assert [line.split(" |")[0].split(":")[0] for line in lines] == [
        "evaluate avg", "train", "evaluate avg", "train", "a message",
    ]  # fmt: skip
    assert lines[1].startswith("train: epoch 1/2 | val_error 0.5 | elapsed ")
    assert re.search(r"evaluate avg: 6 grid in 00:00 \(.+ grid/s\)", lines[0])
    assert logging.getLogger("pyskick").handlers == []  # removed with the block


def test_bar_mode_draws_rate_and_time_left_and_keeps_the_lines(monkeypatch) -> None:
    stream = io.StringIO()
    clock = [100.0]
    monkeypatch.setattr("time.perf_counter", lambda: clock[0])  # the stages' clock
    monkeypatch.setattr("tqdm.std.time", lambda: clock[0])  # the bars'
    renderer = Renderer(stream, "bars", mininterval=0)
    with progress.reporting(renderer):
        with progress.stage("train epoch 1/3", total=10, unit="batch", lines="none") as batches:
            for _ in range(4):
                clock[0] += 0.5
                batches.advance()
            drawn = stream.getvalue()
        with progress.stage("train", total=3, unit="epoch", lines="each") as epochs:
            clock[0] += 2.0
            epochs.advance(metrics={"val_error": 0.25})
    text = stream.getvalue()
    last = drawn.split("\r")[-1]
    assert "train epoch 1/3" in last
    assert "4/10" in last
    assert "2.00batch/s" in last  # the rate
    assert "00:02<00:03" in last  # elapsed < time left (6 batches at 2 per second)
    assert "train: epoch 1/3 | val_error 0.25 | elapsed 00:02, left 00:04 (2 s/epoch)\n" in text
    assert renderer._bars == {}  # every bar closed with its stage


def test_the_mode_follows_the_terminal_and_the_environment() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert choose_mode(Tty(), {}) == "bars"
    assert choose_mode(io.StringIO(), {}) == "lines"
    assert choose_mode(Tty(), {"PYSKICK_PROGRESS": "lines"}) == "lines"
    assert choose_mode(io.StringIO(), {"PYSKICK_PROGRESS": "OFF"}) == "off"
    assert choose_mode(Tty(), {"RANK": "1"}) == "off"  # torchrun: rank 0 speaks for all
    with pytest.raises(ValueError, match="PYSKICK_PROGRESS='loud': expected one of bars"):
        choose_mode(io.StringIO(), {"PYSKICK_PROGRESS": "loud"})
    stream = io.StringIO()
    with rendering(stream, mode="off"), progress.stage("quiet", total=1) as stage:
        stage.advance()
    assert stream.getvalue() == ""


# ------------------------------------------------------------------- the library's stages
def test_evaluation_and_scoring_report_stages(tmp_path: Path) -> None:
    from pyskick.evaluation.evaluate import evaluate_policy
    from pyskick.models import CompletionPolicy, preset
    from pyskick.sidekicks.reward import RewardSidekick
    from pyskick.sidekicks.scores import compute_scores_sharded

    grids = torch.randint(0, 256, (5, 4, 8, 3, 32, 32), dtype=torch.uint8)
    torch.manual_seed(0)
    policy = CompletionPolicy(preset("cpu-demo"))
    _save_one_view(policy, tmp_path / "one")
    rew = RewardSidekick(tmp_path / "one", channel_mean=(120.0, 110.0, 100.0), batch_size=64)
    recorder = Recorder()
    with progress.reporting(recorder):
        evaluate_policy(policy, grids, channel_mean=None, T=1, batch_size=16)
        compute_scores_sharded(rew, grids, T=2, device=torch.device("cpu"))
    assert recorder.events[:3] == [
        ("start", "evaluate avg", 0, 0, "end"),
        ("advance", "evaluate avg", 2, 0, "end"),  # 8 starts a grid: 2 grids a batch of 16
        ("advance", "evaluate avg", 4, 0, "end"),
    ]
    assert recorder.events[4] == ("finish", "evaluate avg", 5, 0, "end")
    # Built by hand, the sidekick is named by its class (make_sidekick stamps "rew").
    stage = "score pyskick.sidekicks.reward.RewardSidekick"
    scoring = [e for e in recorder.events[5:] if e[1] == stage]
    assert scoring == [
        ("start", stage, 0, 0, "end"),
        ("advance", stage, 5, 0, "end"),
        ("finish", stage, 5, 0, "end"),
    ]
    assert ("finish", "evaluate every-start", 5, 1, "end") in recorder.events  # inside scoring


def _save_one_view(policy, folder: Path) -> None:
    from pyskick.checkpoint import save_checkpoint
    from pyskick.config import TrainConfig

    folder.mkdir()
    state = {"model": policy.state_dict(), "model_config": policy.config.to_dict()}
    save_checkpoint(
        folder / "best.pt", {**state, "config": TrainConfig().to_dict(), "stage": "pretrain"}
    )


def test_data_make_and_a_converter_report_stages(tmp_path: Path) -> None:
    from pyskick.data.builtin import make_builtin
    from pyskick.data.mesh_dataset import convert_meshes
    from pyskick.data.synthetic_objects import make_object

    recorder = Recorder()
    with progress.reporting(recorder):
        make_builtin("synthetic-scenes", tmp_path / "s.h5", 12, 3)
    assert recorder.events[0] == ("start", "make synthetic-scenes", 0, 0, "end")
    assert recorder.events[-1] == ("finish", "make synthetic-scenes", 12, 0, "end")
    renders = [e for e in recorder.events if e[0] == "finish" and e[1] == "render scenes"]
    assert [e[2] for e in renders] == [10, 1, 1]
    assert {e[3:] for e in renders} == {(1, "none")}

    folder = tmp_path / "meshes"
    for cls in ("chair", "table"):
        for i in range(2):
            vertices, faces = make_object(cls, np.random.default_rng(i))
            path = folder / cls / f"{i}.obj"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(
                "".join(f"v {x} {y} {z}\n" for x, y, z in vertices)
                + "".join(f"f {a + 1} {b + 1} {c + 1}\n" for a, b, c in faces)
            )
    (folder / "table" / "broken.obj").write_text("v 0 0\n")
    recorder = Recorder()
    with progress.reporting(recorder):
        convert_meshes(folder, tmp_path / "m.h5", split=(0.5, 0.25, 0.25),
                       report=lambda path, reason: None)  # fmt: skip
    advances = [e[2] for e in recorder.events if e[:2] == ("advance", "convert meshes")]
    assert advances == [1, 2, 3, 4, 5]  # the broken mesh counted too
    assert recorder.events[-1] == ("finish", "convert meshes", 5, 0, "end")


def test_converters_log_what_they_skip(tmp_path: Path, caplog) -> None:
    from pyskick.data.mesh_dataset import find_meshes

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.obj").write_text("v 0 0 0\n")
    (tmp_path / "stray.obj").write_text("v 0 0 0\n")
    with caplog.at_level(logging.WARNING, logger="pyskick"):
        find_meshes(tmp_path)
    assert [r.name for r in caplog.records] == ["pyskick.data.mesh_dataset"]
    assert caplog.records[0].getMessage().startswith(f"skipped {tmp_path / 'stray.obj'}: ")
