"""Issue 25, item 8: sizes decided before allocating. ``data make --num 1000000`` (the CLI's
documented maximum) tried to allocate 78 GB at once and failed as an "internal error"; it is
now refused before any work with the memory it needs and the memory available (exit 2,
nothing written). ``write_viewgrids``, which every converter uses, checks the same before it
assembles the file in memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyskick import memory
from pyskick_cli.main import main


@pytest.mark.parametrize(
    ("name", "needs", "fewer"),
    [("synthetic-scenes", "183.1", "scenes"), ("synthetic-objects", "85.8", "objects")],
)
def test_a_data_file_that_cannot_fit_in_memory_is_refused_up_front(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    needs: str,
    fewer: str,
) -> None:
    # What the machine has is pinned, so that the refusal does not depend on the test host.
    monkeypatch.setattr(memory, "available_memory", lambda: 24 << 30)
    out = tmp_path / "huge.h5"
    with pytest.raises(SystemExit) as exited:
        main(["data", "make", name, "--num", "1000000", "--out", str(out)])
    assert exited.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"Error: {name} --num 1000000 needs about {needs} GiB")
    assert f"24.0 GiB are available; make fewer {fewer} (--num)" in line
    assert list(tmp_path.iterdir()) == []


def test_too_few_synthetic_objects_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["data", "make", "synthetic-objects", "--num", "3", "--out", str(tmp_path / "o.h5")])
    assert exited.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == "Error: synthetic-objects needs num >= 4 (one object per split), got 3"
    assert list(tmp_path.iterdir()) == []
