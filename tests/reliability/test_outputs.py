"""F7 (issue 14): an existing output file is never replaced without ``--overwrite``.

Every command of the data and figure area that writes a file (``data make``, ``from-panoramas``,
``from-meshes``, ``preview``, ``visualize``) refuses an existing output before any work (exit 2,
one line naming the file, nothing changed), and replaces it with ``--overwrite``. Writers
killed before their rename leave ``.NAME.tmp-PID`` files, which the next write removes.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from pyskick.data import ViewgridFile
from pyskick.data.builtin import make_builtin
from pyskick.data.hdf5_write import write_viewgrids
from pyskick.data.spec import GridSpec
from pyskick_cli.main import main

TETRAHEDRON = "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 2 3\nf 1 2 4\nf 1 3 4\nf 2 3 4\n"


def _run(args: list[object], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small real viewgrid file (read only by the tests)."""
    return make_builtin("synthetic-scenes", tmp_path_factory.mktemp("data") / "s.h5", 12, 1)


@pytest.fixture(scope="module")
def one_view_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-view run (``pyskick pretrain``, one epoch on 8 tiny grids)."""
    root = tmp_path_factory.mktemp("run")
    spec = GridSpec(
        n_elevations=2,
        n_azimuths=3,
        channels=1,
        view_size=16,
        elevations_deg=(20.0, -20.0),
        azimuths_deg=(0.0, 120.0, 240.0),
        fov_deg=60.0,
        channel_mean=(120.0,),
        preset="custom",
    )
    rng = np.random.default_rng(0)
    splits = {s: rng.integers(0, 256, (n, *spec.view_shape), dtype=np.uint8) for s, n in
              (("train", 8), ("val", 4), ("test", 4))}  # fmt: skip
    dataset = write_viewgrids(root / "tiny.h5", splits, spec, source="test_outputs")
    run = root / "one"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with pytest.raises(SystemExit) as exc:
            main(["pretrain", "--dataset", str(dataset), "--preset", "cpu-demo", "--epochs", "1",
                  "--batch-size", "4", "--device", "cpu", "--out", str(run)])  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    assert exc.value.code in (0, None)
    return run


def _panoramas(folder: Path) -> Path:
    """Three real 2:1 PNG panoramas and one unreadable image (reported if conversion ran)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    for k in range(3):
        Image.fromarray(rng.integers(0, 256, (24, 48, 3), dtype=np.uint8)).save(folder / f"{k}.png")
    (folder / "broken.png").write_bytes(b"not a png")
    return folder


def _meshes(folder: Path) -> Path:
    """Three meshes in one class and a broken one (reported if conversion ran)."""
    (folder / "thing").mkdir(parents=True, exist_ok=True)
    for k in range(3):
        (folder / "thing" / f"m{k}.obj").write_text(TETRAHEDRON)
    (folder / "thing" / "broken.obj").write_text("v 0 0 0\nf 1 2 3\n")
    return folder


def _existing_h5(path: Path, scenes: Path) -> Path:
    path.write_bytes(scenes.read_bytes())
    return path


def _existing_text(path: Path, _scenes: Path) -> Path:
    path.write_text("my notes, not HDF5\n")
    return path


def _dangling_link(path: Path, _scenes: Path) -> Path:
    path.symlink_to(path.with_name("nowhere.h5"))
    return path


def _existing_png(path: Path, _scenes: Path) -> Path:
    Image.new("RGB", (4, 4), (1, 2, 3)).save(path)
    return path


Existing = Callable[[Path, Path], Path]
# name -> (args before --out given the work folder and the dataset, output name, how it exists)
DATA_CASES: dict[str, tuple[Callable[[Path, Path], list[object]], str, Existing]] = {
    "make over an HDF5 file": (lambda _w, _s: ["data", "make", "synthetic-scenes"], "o.h5",
                               _existing_h5),
    "make over a file that is not HDF5": (lambda _w, _s: ["data", "make", "synthetic-scenes"],
                                          "o.h5", _existing_text),
    "make over a dangling symlink": (lambda _w, _s: ["data", "make", "synthetic-scenes"], "o.h5",
                                     _dangling_link),
    "from-panoramas over a file": (
        lambda w, _s: ["data", "from-panoramas", _panoramas(w / "pano"), "--strict"], "o.h5",
        _existing_text,
    ),
    "from-panoramas over an HDF5 file": (
        lambda w, _s: ["data", "from-panoramas", _panoramas(w / "pano")], "o.h5", _existing_h5,
    ),
    "from-meshes over a file": (
        lambda w, _s: ["data", "from-meshes", _meshes(w / "meshes")], "o.h5", _existing_text,
    ),
    "preview over a PNG": (lambda _w, s: ["data", "preview", s], "p.png", _existing_png),
    "preview over a file that is not a PNG": (lambda _w, s: ["data", "preview", s], "p.png",
                                              _existing_text),
}  # fmt: skip


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", list(DATA_CASES))
def test_data_commands_refuse_an_existing_output(
    tmp_path: Path, scenes: Path, refuse, case: str
) -> None:
    head, name, make_existing = DATA_CASES[case]
    args = head(tmp_path, scenes)
    out = make_existing(tmp_path / name, scenes)
    # The harness hashes files, so a (dangling) link is checked by hand.
    links = {p: p.readlink() for p in tmp_path.iterdir() if p.is_symlink()}
    listing = sorted(tmp_path.iterdir())
    watch = [p for p in listing if p not in links]
    refuse([*args, "--out", out], 2, str(out), "already exists", "--overwrite", watch=watch)
    assert sorted(tmp_path.iterdir()) == listing
    assert {p: p.readlink() for p in links} == links


@pytest.mark.parametrize(
    ("command", "inputs", "one"),
    [
        ("from-panoramas", _panoramas, Path("0.png")),
        ("from-meshes", _meshes, Path("thing", "m1.obj")),
    ],
)
def test_a_conversion_never_writes_over_its_inputs(
    tmp_path: Path, refuse, command: str, inputs: Callable[[Path], Path], one: Path
) -> None:
    folder = inputs(tmp_path / "in")
    target = folder / one
    assert target.is_file()
    for extra in ([], ["--overwrite"]):
        refuse(
            ["data", command, folder, "--out", target, *extra],
            2,
            f"{target} is in {folder}, whose files this command reads",
            watch=[tmp_path],
        )


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", list(DATA_CASES))
def test_overwrite_replaces_the_output(
    tmp_path: Path, scenes: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    head, name, make_existing = DATA_CASES[case]
    # The folders hold a broken input on purpose: without --strict it is skipped.
    args = [a for a in head(tmp_path, scenes) if a != "--strict"]
    if "make" in case:
        args += ["--num", "6"]
    out = make_existing(tmp_path / name, scenes)
    before = out.read_bytes() if out.exists() else None
    code, _, err = _run([*args, "--out", out, "--overwrite"], capsys)
    assert code == 0, err
    assert out.is_file()
    assert not out.is_symlink()
    assert out.read_bytes() != before
    if name.endswith(".h5"):
        assert ViewgridFile(out).splits[:3] == ("train", "val", "test")
    else:
        with Image.open(out) as image:
            assert image.format == "PNG"
            assert image.size != (4, 4)
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_output_under_a_file_is_refused(tmp_path: Path, refuse) -> None:
    blocker = tmp_path / "notes.txt"
    blocker.write_text("x")
    out = blocker / "sub" / "o.h5"
    refuse(["data", "make", "synthetic-scenes", "--out", out], 2, str(out), "not a folder",
           watch=[tmp_path])  # fmt: skip


@pytest.mark.parametrize("link", ["dangling", "to a file"])
def test_output_under_a_symlink_that_is_not_a_folder_is_refused(
    tmp_path: Path, refuse, link: str
) -> None:
    """The folder check used to climb past a dangling link: everything was generated, then the
    write failed (exit 1, ``FileExistsError``)."""
    target = tmp_path / "nowhere"
    if link == "to a file":
        target.write_text("x")
    (tmp_path / "dl").symlink_to(target)
    out = tmp_path / "dl" / "sub" / "o.h5"
    refuse(["data", "make", "synthetic-scenes", "--num", "3", "--out", out], 2, str(out),
           f"{tmp_path / 'dl'} is not a folder", watch=[tmp_path])  # fmt: skip


# name -> (options, needles): values refused before anything is generated or created.
MAKE_VALUES = {
    "seed beyond 64 bits": (["--seed", "99999999999999999999"], ["--seed", "99999999999999999999",
                                                                  "0 to 4294967295"]),
    "seed beyond the shared limit": (["--seed", "4294967296"], ["--seed", "0 to 4294967295"]),
    "num beyond 64 bits": (["--num", "99999999999999999999"], ["--num", "99999999999999999999"]),
    "num beyond the limit": (["--num", "1000001"], ["--num", "1000000"]),
}  # fmt: skip


@pytest.mark.parametrize("case", list(MAKE_VALUES))
def test_data_make_refuses_huge_values_before_writing(tmp_path: Path, refuse, case: str) -> None:
    options, needles = MAKE_VALUES[case]
    out = tmp_path / "new" / "o.h5"
    refuse(["data", "make", "synthetic-scenes", *options, "--out", out], 2, *needles,
           watch=[tmp_path])  # fmt: skip
    assert not (tmp_path / "new").exists()


def test_data_make_shares_the_seed_limit_of_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pyskick.training.setup import MAX_SEED

    code, _, err = _run(["data", "make", "synthetic-scenes", "--num", "3", "--seed", MAX_SEED,
                         "--out", tmp_path / "o.h5"], capsys)  # fmt: skip
    assert code == 0, err
    assert ViewgridFile(tmp_path / "o.h5").attrs["seed"] == MAX_SEED


def test_output_in_a_read_only_folder_is_refused(tmp_path: Path, unprivileged, disk) -> None:
    # In a subprocess that cannot override permissions, so that it also fails as root.
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        before = disk(tmp_path)
        done = unprivileged(["data", "make", "synthetic-scenes", "--out", folder / "o.h5"])
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2, done.stderr
        assert len(lines) == 1, done.stderr
        assert str(folder) in lines[0]
        assert "permission denied" in lines[0].lower()
        assert disk(tmp_path) == before
    finally:
        folder.chmod(0o755)


def _visualize(run: Path, out: Path, *extra: object) -> list[object]:
    return ["visualize", run, "--out", out, "--examples", "2", "--seed", "0", "--device", "cpu",
            *extra]  # fmt: skip


@pytest.fixture(scope="module")
def figures(one_view_run: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The figures a first ``visualize`` call writes (names depend on the drawn grids)."""
    out = tmp_path_factory.mktemp("figures")
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in _visualize(one_view_run, out)])
    assert exc.value.code in (0, None)
    written = sorted(out.iterdir())
    assert {p.name for p in written} >= {"learning_curves.png"}
    return written


@pytest.mark.timeout(120)
@pytest.mark.parametrize("which", ["an episode figure", "the learning curves"])
def test_visualize_refuses_existing_figures(
    tmp_path: Path, one_view_run: Path, figures: list[Path], refuse, which: str
) -> None:
    episode = next(p for p in figures if p.name.endswith("_episode.png"))
    existing = episode.name if which == "an episode figure" else "learning_curves.png"
    out = tmp_path / "figs"
    out.mkdir()
    (out / existing).write_bytes(b"an older figure")
    (out / "unrelated.png").write_bytes(b"left alone")
    refuse(_visualize(one_view_run, out), 2, str(out / existing), "--overwrite", watch=[tmp_path])


@pytest.mark.timeout(120)
def test_visualize_overwrite_replaces_figures_and_ignores_other_files(
    tmp_path: Path, one_view_run: Path, figures: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "figs"
    out.mkdir()
    for figure in figures:
        (out / figure.name).write_bytes(b"an older figure")
    (out / "unrelated.png").write_bytes(b"left alone")
    code, _, err = _run(_visualize(one_view_run, out, "--overwrite"), capsys)
    assert code == 0, err
    assert all((out / f.name).read_bytes() != b"an older figure" for f in figures)
    assert (out / "unrelated.png").read_bytes() == b"left alone"
    # A folder holding only other files needs no --overwrite.
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "notes.txt").write_text("x")
    code, _, err = _run(_visualize(one_view_run, fresh), capsys)
    assert code == 0, err


def _dead_pid() -> int:
    """A pid no process can have: one above the kernel's ``pid_max`` (a reaped child's pid could
    be reused by the time the test looks)."""
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ["make", "preview"])
def test_a_killed_writers_temporary_is_removed_by_the_next_write(
    tmp_path: Path, scenes: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    name = "o.h5" if command == "make" else "p.png"
    out = tmp_path / name
    stale = tmp_path / f".{name}.tmp-{_dead_pid()}"
    stale.write_bytes(b"half a file")
    live_writer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = tmp_path / f".{name}.tmp-{live_writer.pid}"
        live.write_bytes(b"being written")
        other = tmp_path / ".other.h5.tmp-1"
        other.write_bytes(b"another file's")
        args = (
            ["data", "make", "synthetic-scenes", "--num", "6"]
            if command == "make"
            else ["data", "preview", scenes]
        )
        code, _, err = _run([*args, "--out", out], capsys)
        assert code == 0, err
        assert not stale.exists()
        assert live.exists()
        assert other.exists()
    finally:
        live_writer.kill()
        live_writer.wait()
