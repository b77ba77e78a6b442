"""Generating a built-in dataset on first use says so: one ``pyskick`` log line (what, how
many viewgrids, where) and the progress stage ``make NAME``; a cached file says nothing. Seen
from the library (a recorder, ``logging``), from the CLI (its stderr) and from Gymnasium."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from pyskick import progress
from pyskick.data import BUILTIN_DATASETS
from pyskick.data.builtin import builtin_dataset
from pyskick.data.synthetic_scenes import generate_synthetic_scenes
from pyskick.progress import Stage
from pyskick_cli.main import main


class Recorder:
    """The names of the stages started."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def started(self, stage: Stage) -> None:
        self.names.append(stage.name)

    def advanced(self, stage: Stage, n: int) -> None:
        pass

    def finished(self, stage: Stage) -> None:
        pass


@pytest.fixture
def tiny_scenes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The built-in ``synthetic-scenes`` at 6 viewgrids (seed 5): the same path, fast."""
    monkeypatch.setitem(BUILTIN_DATASETS, "synthetic-scenes", (generate_synthetic_scenes, 6, 5))


def _generating(records: list[logging.LogRecord]) -> list[str]:
    return [
        r.getMessage()
        for r in records
        if r.name.startswith("pyskick") and r.getMessage().startswith("generating dataset")
    ]


def test_first_use_logs_one_line_and_reports_progress(
    tiny_scenes: None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pyskick")
    recorder = Recorder()
    with progress.reporting(recorder):
        path = builtin_dataset("synthetic-scenes", tmp_path)
    assert _generating(caplog.records) == [
        f"generating dataset synthetic-scenes (6 viewgrids) into {path}; once, then cached"
    ]
    assert [r.levelno for r in caplog.records if r.getMessage().startswith("generating")] == [
        logging.INFO
    ]
    assert recorder.names[0] == "make synthetic-scenes"
    assert "render scenes" in recorder.names  # the generator's own stages, inside it

    caplog.clear()
    recorder.names.clear()
    with progress.reporting(recorder):
        assert builtin_dataset("synthetic-scenes", tmp_path) == path
    assert _generating(caplog.records) == []  # cached: nothing to say, nothing to report
    assert recorder.names == []

    path.write_bytes(b"truncated")
    builtin_dataset("synthetic-scenes", tmp_path)
    (line,) = _generating(caplog.records)
    assert line.startswith(f"generating dataset synthetic-scenes (6 viewgrids) into {path} again")
    assert "the cached file is damaged" in line


def test_the_cli_shows_the_line_on_stderr(
    tiny_scenes: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("PYSKICK_DATA_DIR", str(tmp_path))
    expected = tmp_path / "synthetic-scenes-v1-n6-s5.h5"
    for first in (True, False):
        with pytest.raises(SystemExit) as exit_info:
            main(["data", "info", "synthetic-scenes", "--json"])
        _, err = capsys.readouterr()
        assert exit_info.value.code == 0, err
        line = (
            f"generating dataset synthetic-scenes (6 viewgrids) into {expected}; once, then cached"
        )
        assert (line in err) is first, err
    assert expected.is_file()


def test_gymnasium_users_see_it_once_logging_is_configured(
    tiny_scenes: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """What docs/environment.md tells a Gymnasium user: ``logging.basicConfig(level=INFO)``
    shows the line (caplog stands for the root handler that call installs)."""
    import gymnasium

    import pyskick.envs  # noqa: F401  (registers pyskick/LookAround-v0)

    monkeypatch.setenv("PYSKICK_DATA_DIR", str(tmp_path))
    caplog.set_level(logging.INFO)  # the root logger's level, as basicConfig sets it
    env = gymnasium.make("pyskick/LookAround-v0")
    env.close()
    assert _generating(caplog.records) == [
        "generating dataset synthetic-scenes (6 viewgrids) into "
        f"{tmp_path / 'synthetic-scenes-v1-n6-s5.h5'}; once, then cached"
    ]


def test_first_use_is_seen_in_plain_python_without_logging_set_up(tmp_path: Path) -> None:
    """No handler configured (a script, `gymnasium.make`): the line still reaches stderr."""
    import subprocess
    import sys

    script = (
        "from pathlib import Path\n"
        "from pyskick.data import BUILTIN_DATASETS\n"
        "from pyskick.data.builtin import builtin_dataset\n"
        "from pyskick.data.synthetic_scenes import generate_synthetic_scenes\n"
        "BUILTIN_DATASETS['synthetic-scenes'] = (generate_synthetic_scenes, 6, 5)\n"
        f"builtin_dataset('synthetic-scenes', Path({str(tmp_path)!r}))\n"
        f"builtin_dataset('synthetic-scenes', Path({str(tmp_path)!r}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("generating dataset")]
    assert len(lines) == 1, proc.stderr  # once: the second call finds the cached file
    assert "synthetic-scenes (6 viewgrids)" in lines[0]
