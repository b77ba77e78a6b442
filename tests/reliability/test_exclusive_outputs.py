"""Issue 25, items 6 and 14: two writers of one new output cannot both succeed, and a killed
writer's temporary (a file or an export's folder) is removed by the next writer.

One temporary scheme for every writer (``pyskick._io``): ``.NAME.tmp-HOST-PID-RANDOM.SUFFIX``
beside the destination, published by a rename, or, for an output a command declared new (no
``--overwrite``), by a link that never replaces a file another writer made meanwhile.
Before, ``data make --seed 1`` and ``--seed 2`` to one new path both printed "wrote" and the
second replaced the first; an export killed three times left three ``.OUT.export-PID/``
folders, and figures' temporaries were never removed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import h5py
import pytest

from pyskick._io import (
    OutputExistsError,
    atomic_path,
    declare_outputs,
    publish,
    temporaries,
    temporary_path,
)
from pyskick.data import ViewgridFile
from pyskick.data.builtin import make_builtin
from pyskick.experiments.export import export_run
from pyskick.training import TrainData
from pyskick.training.trainer import pretrain


def _dead_pid() -> int:
    """A pid no process can have (above the kernel's ``pid_max``)."""
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


def test_a_new_output_is_never_published_over_another_writers(tmp_path: Path) -> None:
    out = tmp_path / "grids.h5"
    declare_outputs([out], new=True)

    def write_while_another_finishes() -> None:
        with atomic_path(out) as tmp:
            tmp.write_text("mine")
            out.write_text("the other writer's, finished first")

    with pytest.raises(OutputExistsError, match="created by another writer"):
        write_while_another_finishes()
    assert out.read_text() == "the other writer's, finished first"
    assert temporaries(out) == []
    declare_outputs([out], new=False)  # --overwrite: replaced as usual
    with atomic_path(out) as tmp:
        tmp.write_text("mine")
    assert out.read_text() == "mine"


def test_a_new_folder_is_never_published_over_another_writers(tmp_path: Path) -> None:
    out = tmp_path / "export"
    tmp = temporary_path(out)
    tmp.mkdir()
    (tmp / "model").write_text("mine")
    out.mkdir()
    (out / "model").write_text("theirs")
    with pytest.raises(OutputExistsError):
        publish(tmp, out, exclusive=True)
    assert (out / "model").read_text() == "theirs"
    publish(tmp, out, exclusive=False)
    assert (out / "model").read_text() == "mine"
    assert temporaries(out) == []


@pytest.mark.timeout(300)
def test_two_data_makes_of_one_new_file_do_not_both_succeed(tmp_path: Path) -> None:
    out = tmp_path / "grids.h5"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYSKICK_PROGRESS": "off"}
    make = [sys.executable, "-m", "pyskick", "data", "make", "synthetic-scenes", "--num", "24"]
    writers = [
        subprocess.Popen(
            [*make, "--seed", str(seed), "--out", str(out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for seed in (1, 2)
    ]
    results = [(w.returncode, out_, err) for w in writers for out_, err in [w.communicate()]]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 2], results
    (winner,) = [seed for seed, (code, _, _) in zip((1, 2), results, strict=True) if code == 0]
    (_, _, loser_err) = next(r for r in results if r[0] == 2)
    # Refused by the check before any work, or, when both passed it, at the publish.
    assert len(loser_err.strip().splitlines()) == 1, loser_err
    assert str(out) in loser_err
    with h5py.File(out, "r") as f:  # whole, and the winner's
        assert f.attrs["source"] == f"synthetic-scenes v1 num=24 seed={winner}"
    assert len(ViewgridFile(out).split("train")) > 0
    assert temporaries(out) == []


def _written_by(path: Path, pid: int, host: str | None = None) -> Path:
    """The name a writer ``pid`` (on ``host``; default this one) gives ``path``'s temporary."""
    name = temporary_path(path).name.replace(f"-{os.getpid()}-", f"-{pid}-")
    if host is not None:
        name = name.replace(name.split(".tmp-")[1].rsplit("-", 2)[0], host, 1)
    return path.with_name(name)


def test_a_dead_writers_temporary_is_removed_and_a_live_ones_kept(tmp_path: Path) -> None:
    out = tmp_path / "grids.h5"
    dead = _written_by(out, _dead_pid())
    live = _written_by(out, os.getpid())
    elsewhere = _written_by(out, _dead_pid(), host="another-machine")  # a shared folder
    earlier = tmp_path / f".grids.h5.tmp-{_dead_pid()}"  # an earlier version's data writer
    for path in (dead, live, elsewhere, earlier):
        path.write_text("half a file")
    assert temporaries(out) == sorted([dead, live, elsewhere, earlier])
    make_builtin("synthetic-scenes", out, 12, 1)
    assert not dead.exists()
    assert not earlier.exists()
    assert live.exists()
    assert elsewhere.exists()


@pytest.fixture(scope="module")
def one_view_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("export")
    data_file = make_builtin("synthetic-scenes", root / "s.h5", 12, 1)
    from pyskick.config import train_preset

    config = train_preset("cpu-demo").replace(pretrain_epochs=1, batch_size=4, T=2)
    pretrain(config, root / "run", TrainData.from_file(data_file))
    return root / "run"


def test_a_killed_exports_folder_is_removed_by_the_next_export(
    tmp_path: Path, one_view_run: Path
) -> None:
    out = tmp_path / "exp"
    killed = [_written_by(out, _dead_pid() + k) for k in range(2)]
    killed.append(tmp_path / f".exp.export-{_dead_pid()}")  # an earlier version's name
    for folder in killed:
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"half")
    export_run(one_view_run, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp"]
    with pytest.raises(ValueError, match="already exists"):
        export_run(one_view_run, out)
    export_run(one_view_run, out, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp"]


def test_a_new_output_is_one_file_however_spelled_and_this_processs_once_written(
    tmp_path: Path,
) -> None:
    (tmp_path / "a").mkdir()
    out = tmp_path / "x.txt"
    declare_outputs([tmp_path / "a" / ".." / "x.txt"], new=True)
    out.write_text("another writer's")
    with pytest.raises(OutputExistsError):
        publish_text(out, "mine")
    out.unlink()
    publish_text(out, "mine")
    publish_text(out, "mine again")  # written by this process: replaced as usual
    assert out.read_text() == "mine again"


def publish_text(out: Path, text: str) -> None:
    with atomic_path(out) as tmp:
        tmp.write_text(text)
