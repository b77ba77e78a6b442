"""``pyskick data from-meshes`` on the real CC0 sample meshes (and on broken files)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from pyskick.data import ViewgridFile
from pyskick.data.mesh_dataset import convert_meshes
from pyskick_cli.main import main


def shared_dir() -> Path:
    env = os.environ.get("PYSKICK_SHARED_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / ".." / "shared"


MESHES = shared_dir() / "data" / "meshes"
SMALL = (  # the smallest meshes of four classes, to keep the test fast
    "table/technical_table2.obj",
    "table/technical_table1.obj",
    "table/table.obj",
    "lamp/japanese_lantern.obj",
    "lamp/outdoor_lamp.obj",
    "chair/chair2.obj",
    "chair/osaka_chair.obj",
    "wardrobe/wardrobe_with_sliding_doors.obj",
)

needs_shared = pytest.mark.skipif(
    not MESHES.is_dir(), reason=f"sample meshes not found at {MESHES} (set PYSKICK_SHARED_DIR)"
)


@pytest.fixture
def mesh_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "meshes"
    for name in SMALL:
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(MESHES / name, target)
    return folder


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    return int(exc.value.code or 0), capsys.readouterr().err


@needs_shared
def test_real_meshes_convert_with_unseen_classes(
    mesh_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (mesh_folder / "chair" / "broken.obj").write_text("v 0 0 0\nf 1 2 3\n")  # bad face indices
    out = tmp_path / "objects.h5"
    code, err = run_cli(
        [
            "data",
            "from-meshes",
            str(mesh_folder),
            "--out",
            str(out),
            "--unseen-classes",
            "wardrobe",
        ],
        capsys,
    )
    assert code == 0, err
    assert "broken.obj" in err  # reported with its path, not silently dropped
    vf = ViewgridFile(out)
    assert vf.splits == ("train", "val", "test", "test_unseen")
    assert vf.spec.view_shape == (5, 9, 1, 32, 32)
    assert sum(vf.num_samples(s) for s in ("train", "val", "test")) == 7
    assert vf.sample_names("test_unseen") == ["wardrobe/wardrobe_with_sliding_doors.obj"]
    assert list(vf.attrs["classes"]) == ["chair", "lamp", "table", "wardrobe"]
    grids = np.concatenate([vf.split(s).load().numpy() for s in vf.splits])
    # Centred objects with background around: border pixels mostly white, the centre not.
    border = np.concatenate([grids[..., 0, :], grids[..., -1, :]], axis=-1)
    centre = grids[..., 12:20, 12:20]
    assert (border > 250).mean() > 0.8
    assert centre.mean() < border.mean() - 20
    # Different azimuths show different silhouettes.
    assert np.abs(grids[:, 2, 0].astype(int) - grids[:, 2, 2].astype(int)).mean() > 2


@needs_shared
def test_strict_fails_and_writes_nothing(
    mesh_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (mesh_folder / "lamp" / "broken.off").write_text("OFF\n3 1 0\n0 0 0\n")  # truncated
    out = tmp_path / "objects.h5"
    code, err = run_cli(
        ["data", "from-meshes", str(mesh_folder), "--out", str(out), "--strict"], capsys
    )
    assert code == 2
    assert "broken.off" in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_class_is_the_top_level_folder(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    off = "OFF\n4 2 0\n0 0 0\n1 0 0\n0 1 0\n0 0 1\n3 0 1 2\n3 0 1 3\n"
    for rel in ("chair/train/a.off", "chair/test/b.off", "chair/e.off", "desk/train/c.off",
                "desk/d.off", "loose.off"):  # fmt: skip
        path = tmp_path / "mn" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(off)
    out = convert_meshes(tmp_path / "mn", tmp_path / "mn.h5", unseen_classes=("desk",))
    vf = ViewgridFile(out)
    assert list(vf.attrs["classes"]) == ["chair", "desk"]
    assert sorted(vf.sample_names("test_unseen")) == ["desk/d.off", "desk/train/c.off"]
    assert "loose.off: not inside a class folder" in caplog.text  # a pyskick log warning


def test_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "m" / "cube"
    folder.mkdir(parents=True)
    (folder / "a.off").write_text("OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n")
    out = tmp_path / "x.h5"
    code, err = run_cli(
        ["data", "from-meshes", str(tmp_path / "m"), "--out", str(out), "--unseen-classes", "sofa"],
        capsys,
    )
    assert code == 2
    assert "sofa" in err
    assert "cube" in err
    # Every class held out: refused before any mesh is converted, naming the classes.
    code, err = run_cli(
        ["data", "from-meshes", str(tmp_path / "m"), "--out", str(out), "--unseen-classes", "cube"],
        capsys,
    )
    assert code == 2
    assert err.count("\n") == 1, err
    assert "holds out every class (cube)" in err
    assert "convert meshes" not in err
    with pytest.raises(ValueError, match="at least 3"):
        convert_meshes(tmp_path / "m", out)
    assert not out.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no meshes"):
        convert_meshes(empty, out)
