"""``pyskick data``: make, info, preview, from-panoramas, and one-line errors with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
from PIL import Image

from pyskick_cli.main import main


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    out, err = capsys.readouterr()
    return int(exit_info.value.code), out, err


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pyskick.data.synthetic_scenes import generate_synthetic_scenes

    return generate_synthetic_scenes(tmp_path_factory.mktemp("s") / "s.h5", num=8, seed=2)


def test_make_writes_the_requested_dataset(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "s.h5"
    code, _, err = _run(
        ["data", "make", "synthetic-scenes", "--out", str(out), "--num", "5"], capsys
    )
    assert code == 0, err
    assert "wrote" in err
    with h5py.File(out) as f:
        assert f["train"].shape == (3, 4, 8, 3, 32, 32)
        assert f.attrs["seed"] == 0


def test_make_takes_a_view_size_for_scenes_only(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "s.h5"
    args = ["data", "make", "synthetic-scenes", "--out", str(out), "--num", "5"]
    code, _, err = _run([*args, "--view-size", "16"], capsys)
    assert code == 0, err
    with h5py.File(out) as f:
        assert f["train"].shape == (3, 4, 8, 3, 16, 16)
    bad = tmp_path / "bad.h5"
    for given, message in [
        (["synthetic-scenes", "--view-size", "20"], "20 is not a multiple of 8"),
        (["synthetic-scenes", "--view-size", "8"], "8 is not in the range 16<=x<=1024"),
        (["synthetic-objects", "--view-size", "16"], "only synthetic-scenes takes a view size"),
    ]:
        code, _, err = _run(["data", "make", *given, "--out", str(bad), "--num", "5"], capsys)
        assert code == 2, given
        assert message in err
        assert err.count("\n") == 1, err
    assert not bad.exists()


def test_make_unknown_name_lists_valid_names(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code, _, err = _run(["data", "make", "sun360", "--out", str(tmp_path / "x.h5")], capsys)
    assert code == 2
    assert err.count("\n") == 1
    assert "synthetic-scenes" in err
    assert not (tmp_path / "x.h5").exists()


def test_info_json_reports_splits_and_statistics(
    scenes: Path, capsys: pytest.CaptureFixture
) -> None:
    code, out, _ = _run(["data", "info", str(scenes), "--json"], capsys)
    assert code == 0
    report = json.loads(out)
    assert report["preset"] == "sun360"
    assert report["splits"]["train"]["shape"] == [6, 4, 8, 3, 32, 32]
    assert report["grid"]["fov_deg"] == 60.0
    assert report["attributes"]["generator"] == "synthetic-scenes"
    stats = report["splits"]["test"]
    assert len(stats["mean"]) == 3
    assert all(
        0 <= lo <= m <= hi <= 255
        for lo, m, hi in zip(stats["min"], stats["mean"], stats["max"], strict=True)
    )
    code, text, _ = _run(["data", "info", str(scenes)], capsys)
    assert code == 0
    assert "preset sun360" in text
    assert "train: shape (6, 4, 8, 3, 32, 32) uint8" in text


def test_preview_lays_out_grids(
    scenes: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "p.png"
    code, _, err = _run(
        [
            "data",
            "preview",
            str(scenes),
            "--out",
            str(out),
            "--split",
            "train",
            "--num",
            "3",
            "--scale",
            "1",
        ],
        capsys,
    )
    assert code == 0, err
    image = np.asarray(Image.open(out))
    # Two grids per row, two rows: each grid 4x32+3x2 by 8x32+7x2, 10-pixel margins.
    assert image.shape == (2 * 134 + 3 * 10, 2 * 270 + 3 * 10, 3)
    first = image[10 : 10 + 134, 10 : 10 + 270]
    assert (first[32:34] == 255).all()  # gap between elevation rows
    assert first[:32, :32].std() > 0
    from pyskick.data import ViewgridFile

    view = ViewgridFile(scenes).split("train")[0][0, 1].permute(1, 2, 0).numpy()
    assert np.array_equal(first[:32, 34:66], view)  # row 0 = top elevation, column 1 = azimuth 45


def _grid(n: int = 1, dtype: type = np.uint8, fill: float = 0) -> np.ndarray:
    return np.full((n, 4, 8, 3, 32, 32), fill, dtype)


MALFORMED = {
    "missing split": ({"train": _grid(), "val": _grid()}, "missing split(s) test"),
    "wrong rank": ({"train": _grid(), "val": _grid(), "test": _grid()[0]}, "6 dimensions"),
    "wrong dtype": ({"train": _grid(), "val": _grid(), "test": _grid(dtype=bool)}, "dtype bool"),
    "inconsistent": (
        {"train": _grid(), "val": _grid(), "test": _grid()[:, :, :4]},
        "same [N, M, C, H, W]",
    ),
    "empty split": ({"train": _grid(), "val": _grid(0), "test": _grid()}, "'val' is empty"),
    "nan": ({"train": _grid(), "val": _grid(), "test": _grid(1, np.float32, np.nan)}, "non-finite"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_file_exits_2_with_one_line(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    arrays, message = MALFORMED[case]
    bad = tmp_path / "bad.h5"
    with h5py.File(bad, "w") as f:
        for name, array in arrays.items():
            f[name] = array
    for args in (
        ["data", "info", str(bad)],
        ["data", "preview", str(bad), "--out", str(tmp_path / "p.png")],
    ):
        code, _, err = _run(args, capsys)
        assert code == 2
        assert err.startswith("Error: ")
        assert err.count("\n") == 1
        assert message in err
        assert str(bad) in err
    assert not (tmp_path / "p.png").exists()


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code, _, err = _run(["data", "info", str(tmp_path / "absent.h5")], capsys)
    assert code == 2
    assert err.count("\n") == 1


def test_from_panoramas_reports_and_strict_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for k in range(3):
        Image.fromarray(rng.integers(0, 256, (32, 64, 3), dtype=np.uint8)).save(
            folder / f"p{k}.jpg"
        )
    (folder / "bad.png").write_bytes(b"nope")
    out = tmp_path / "o.h5"
    code, _, err = _run(
        ["data", "from-panoramas", str(folder), "--out", str(out), "--strict"], capsys
    )
    assert code == 2
    assert err.count("\n") == 1
    assert str(folder / "bad.png") in err
    assert not out.exists()
    code, _, err = _run(
        [
            "data",
            "from-panoramas",
            str(folder),
            "--out",
            str(out),
            "--split-fractions",
            "1,1,1",
            "--seed",
            "3",
        ],
        capsys,
    )
    assert code == 0
    assert f"skipped {folder / 'bad.png'}: unreadable image" in err
    with h5py.File(out) as f:
        assert [f[s].shape[0] for s in ("train", "val", "test")] == [1, 1, 1]
    code, _, err = _run(
        ["data", "from-panoramas", str(folder), "--out", str(out), "--split-fractions", "1,1"],
        capsys,
    )
    assert code == 2
    assert "--split-fractions" in err
    # An input (or any file under FOLDER, new or not) as --out: refused, --overwrite or not,
    # the image kept.
    image = folder / "p0.jpg"
    before = image.read_bytes()
    for extra in ([], ["--overwrite"]):
        code, _, err = _run(
            ["data", "from-panoramas", str(folder), "--out", str(image), *extra], capsys
        )
        assert code == 2
        assert err.count("\n") == 1
        assert f"{image} is in {folder}, whose files this command reads" in err
        assert image.read_bytes() == before
    inside = folder / "sub" / "data.h5"
    code, _, err = _run(["data", "from-panoramas", str(folder), "--out", str(inside)], capsys)
    assert code == 2
    assert f"{inside} is in {folder}, whose files this command reads" in err
    assert not inside.parent.exists()
