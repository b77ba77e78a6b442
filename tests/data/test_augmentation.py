"""``--augment K`` of the converters: turned, tilted and mirrored training copies, never leaking
a validation or test source into training, deterministic, and K = 0 unchanged."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from pyskick.data import SUN360, ViewgridFile, write_viewgrids
from pyskick.data.mesh_dataset import augmented_renders, convert_meshes
from pyskick.data.meshes import load_mesh, turn_mesh
from pyskick.data.panoramas import (
    AUGMENT_TILT_DEG,
    assign_splits,
    augmentation_draws,
    convert_panoramas,
    find_panoramas,
    panorama_viewgrid,
    panorama_viewgrids,
)
from pyskick.data.projection import (
    cubemap_to_viewgrid,
    equirect_to_cubemap,
    equirect_to_viewgrid,
    rig_transform,
)
from pyskick_cli.main import main


def _shared_dir() -> Path:
    env = os.environ.get("PYSKICK_SHARED_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / ".." / "shared"


PANORAMAS = _shared_dir() / "data" / "panoramas"
MESHES = _shared_dir() / "data" / "meshes"
needs_shared = pytest.mark.skipif(
    not (PANORAMAS.is_dir() and MESHES.is_dir()),
    reason=f"real sample data not found under {_shared_dir()} (set PYSKICK_SHARED_DIR)",
)
# Small real panoramas (512 x 256) and the smallest meshes of three classes.
SMALL_PANORAMAS = ("pmndrs_apartment", "pmndrs_bridge", "pmndrs_city", "pmndrs_dawn")
SMALL_PANORAMAS += ("pmndrs_lab", "pmndrs_lobby", "pmndrs_park", "pmndrs_studio")
SMALL_MESHES = (
    "table/technical_table2.obj",
    "table/technical_table1.obj",
    "lamp/japanese_lantern.obj",
    "lamp/outdoor_lamp.obj",
    "chair/chair2.obj",
)


def _smooth_panorama(seed: int = 0) -> torch.Tensor:
    """A smooth random 2:1 panorama ``[1, 3, 128, 256]`` that wraps around horizontally."""
    g = torch.Generator().manual_seed(seed)
    coarse = torch.rand(1, 3, 8, 16, generator=g) * 255
    wrapped = torch.cat([coarse, coarse[..., :1]], dim=-1)
    fine = torch.nn.functional.interpolate(wrapped, size=(128, 257), mode="bicubic")
    return fine[..., :256].clamp(0, 255)


def test_yaw_by_one_azimuth_step_shifts_the_grid_by_one_column() -> None:
    panorama = _smooth_panorama()
    base = equirect_to_viewgrid(panorama, SUN360).int()
    turned = equirect_to_viewgrid(panorama, SUN360, transform=rig_transform(45.0)).int()
    assert (turned - base.roll(-1, dims=2)).abs().max() <= 1
    # A yaw between two steps is new content, not a shifted grid.
    half = equirect_to_viewgrid(panorama, SUN360, transform=rig_transform(22.5)).int()
    assert min((half - base.roll(s, dims=2)).abs().float().mean() for s in range(8)) > 2


def test_mirror_reverses_azimuths_and_flips_each_view() -> None:
    panorama = _smooth_panorama(1)
    base = equirect_to_viewgrid(panorama, SUN360).int()
    mirrored = equirect_to_viewgrid(panorama, SUN360, transform=rig_transform(mirror=True)).int()
    # Column m of the mirror image is column -m of the original, seen mirrored.
    expected = base[:, :, [(-m) % 8 for m in range(8)]].flip(-1)
    assert (mirrored - expected).abs().max() <= 1
    # The same as projecting the horizontally flipped equirectangular image.
    flipped = equirect_to_viewgrid(panorama.flip(-1), SUN360).int()
    assert (flipped - mirrored).abs().max() <= 1


def test_pitch_and_roll_tilt_the_rig_and_cubemaps_follow_the_same_transform() -> None:
    panorama = _smooth_panorama(2)
    transform = rig_transform(100.0, 4.0, -3.0, mirror=True)
    from_equirect = equirect_to_viewgrid(panorama, SUN360, transform=transform).float()
    faces = equirect_to_cubemap(panorama, 96, supersample=3)
    from_cubemap = cubemap_to_viewgrid(faces, SUN360, transform=transform).float()
    assert (from_equirect - from_cubemap).abs().mean() < 2.0
    untilted = equirect_to_viewgrid(panorama, SUN360, transform=rig_transform(100.0, mirror=True))
    assert (from_equirect - untilted.float()).abs().mean() > 2.0
    # The rig pitches about its right axis at azimuth 0: there, pitching up by 30 degrees looks
    # at the row above (elevations 30 degrees apart).
    up = equirect_to_viewgrid(panorama, SUN360, transform=rig_transform(pitch_deg=30.0)).int()
    base = equirect_to_viewgrid(panorama, SUN360).int()
    assert (up[:, 1:, 0] - base[:, :-1, 0]).abs().max() <= 1
    assert (up[:, 1:, 2] - base[:, :-1, 2]).abs().float().mean() > 2.0


def test_augmentation_draws_are_continuous_seeded_and_per_copy() -> None:
    draws = augmentation_draws(seed=3, source_index=5, copies=200)
    assert draws.shape == (200, 4)
    yaw, pitch, roll, mirror = draws.T
    assert ((yaw >= 0) & (yaw < 360)).all()
    assert not np.any(np.isclose(yaw % 45.0, 0.0))  # continuous, not multiples of the step
    assert (np.abs(pitch) <= AUGMENT_TILT_DEG).all()
    assert (np.abs(roll) <= AUGMENT_TILT_DEG).all()
    assert set(mirror) == {0.0, 1.0}
    assert 0.3 < mirror.mean() < 0.7
    # Copy k depends on (seed, source, k) only: not on how many copies, nor on other sources.
    assert np.array_equal(augmentation_draws(3, 5, 7), draws[:7])
    assert not np.array_equal(augmentation_draws(4, 5, 7), draws[:7])
    assert not np.array_equal(augmentation_draws(3, 6, 7), draws[:7])


@pytest.fixture(scope="module")
def panorama_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Eight real panoramas and one unreadable file that sorts first (it shifts nothing)."""
    folder = tmp_path_factory.mktemp("panoramas")
    for name in SMALL_PANORAMAS:
        (folder / f"{name}.png").symlink_to(PANORAMAS / f"{name}.png")
    (folder / "a_broken.png").write_bytes(b"not an image")
    return folder


@needs_shared
def test_augmented_panoramas_split_per_source_before_augmenting(
    panorama_folder: Path, tmp_path: Path
) -> None:
    plain_path = convert_panoramas(panorama_folder, tmp_path / "plain.h5", seed=5)
    path = convert_panoramas(panorama_folder, tmp_path / "aug.h5", seed=5, augment=3)
    plain, aug = ViewgridFile(plain_path), ViewgridFile(path)
    n_train = plain.num_samples("train")
    assert aug.num_samples("train") == 4 * n_train
    assert aug.attrs["augment"] == 3
    assert aug.attrs["augment_columns"] == ["yaw_deg", "pitch_deg", "roll_deg", "mirror"]
    # Validation and test are never augmented: the same viewgrids as without --augment.
    for split in ("val", "test"):
        assert torch.equal(aug.split(split).load(), plain.split(split).load())
        assert aug.sample_names(split) == plain.sample_names(split)
    # The originals come first, unchanged; then each training source's copies.
    train = aug.split("train").load()
    assert torch.equal(train[:n_train], plain.split("train").load())
    sources, _ = find_panoramas(panorama_folder)
    with h5py.File(path) as f:
        index = {s: f[f"source_index/{s}"][()] for s in ("train", "val", "test")}
        poses = f["augmentation/train"][()]
    # No leakage: no validation or test file among the training sources, by index and by name.
    held_out = set(index["val"]) | set(index["test"])
    assert set(index["train"]).isdisjoint(held_out)
    assert set(aug.sample_names("train")).isdisjoint(
        set(aug.sample_names("val")) | set(aug.sample_names("test"))
    )
    # source_index points into the sorted files found (the unreadable one included).
    for split in ("train", "val", "test"):
        names = [sources[i].path.name for i in index[split]]
        assert names == aug.sample_names(split)
    assert 0 not in index["train"]  # a_broken.png
    assert np.array_equal(index["train"][n_train:], np.repeat(index["train"][:n_train], 3))
    assert (poses[:n_train] == 0).all()
    # Each copy is its source rendered with the recorded pose, drawn from (seed, source, k).
    first = sources[index["train"][0]]
    draws = augmentation_draws(5, int(index["train"][0]), 3)
    assert np.array_equal(poses[n_train : n_train + 3], draws)
    transforms = [rig_transform(y, p, r, mirror=bool(m)) for y, p, r, m in draws]
    assert torch.equal(train[n_train : n_train + 3], panorama_viewgrids(first, SUN360, transforms))
    assert not any(torch.equal(train[n_train + k], train[0]) for k in range(3))


@needs_shared
def test_augmented_conversion_is_deterministic_with_the_seed(
    panorama_folder: Path, tmp_path: Path
) -> None:
    a = convert_panoramas(panorama_folder, tmp_path / "a.h5", seed=2, augment=2)
    b = convert_panoramas(panorama_folder, tmp_path / "b.h5", seed=2, augment=2)
    c = convert_panoramas(panorama_folder, tmp_path / "c.h5", seed=3, augment=2)
    assert a.read_bytes() == b.read_bytes()
    assert not torch.equal(
        ViewgridFile(a).split("train").load(), ViewgridFile(c).split("train").load()
    )


@needs_shared
def test_augment_zero_writes_the_unaugmented_file_byte_for_byte(
    panorama_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outs = [tmp_path / "default.h5", tmp_path / "zero.h5"]
    for out, extra in zip(outs, ([], ["--augment", "0"]), strict=True):
        with pytest.raises(SystemExit) as exc:
            main(["data", "from-panoramas", str(panorama_folder), "--out", str(out), *extra])
        assert exc.value.code in (0, None)
    assert outs[0].read_bytes() == outs[1].read_bytes()
    # The converter's output before --augment existed, rebuilt from its parts.
    sources, _ = find_panoramas(panorama_folder)
    kept = sources[1:]  # a_broken.png is skipped
    parts = assign_splits(len(kept), (0.7, 0.15, 0.15), 0)
    grids = torch.stack([panorama_viewgrid(s, SUN360) for s in kept])
    rebuilt = write_viewgrids(
        tmp_path / "rebuilt.h5",
        {name: grids[torch.from_numpy(idx)] for name, idx in parts.items()},
        SUN360,
        source=f"from-panoramas {panorama_folder} split=0.7,0.15,0.15 seed=0",
        sample_names={n: [kept[i].path.name for i in idx] for n, idx in parts.items()},
    )
    assert rebuilt.read_bytes() == outs[0].read_bytes()
    with h5py.File(outs[0]) as f:
        assert "source_index" not in f
        assert "augmentation" not in f
        assert "augment" not in f.attrs


@needs_shared
def test_augmented_meshes_turn_and_mirror_only_training_objects(tmp_path: Path) -> None:
    folder = tmp_path / "meshes"
    for name in SMALL_MESHES:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(MESHES / name, folder / name)
    plain = ViewgridFile(convert_meshes(folder, tmp_path / "plain.h5", seed=1))
    path = convert_meshes(folder, tmp_path / "aug.h5", seed=1, augment=2)
    aug = ViewgridFile(path)
    n_train = plain.num_samples("train")
    assert aug.num_samples("train") == 3 * n_train
    assert aug.attrs["augment"] == 2
    for split in ("val", "test"):
        assert torch.equal(aug.split(split).load(), plain.split(split).load())
    train = aug.split("train").load()
    assert torch.equal(train[:n_train], plain.split("train").load())
    with h5py.File(path) as f:
        index = {s: f[f"source_index/{s}"][()] for s in ("train", "val", "test")}
        poses = f["augmentation/train"][()]
    assert set(index["train"]).isdisjoint(set(index["val"]) | set(index["test"]))
    assert set(aug.sample_names("train")).isdisjoint(
        set(aug.sample_names("val")) | set(aug.sample_names("test"))
    )
    assert aug.attrs["augment_columns"] == ["yaw_deg", "mirror"]
    # The copies of the first training mesh, rendered again from (seed, source index, k).
    source = folder / aug.sample_names("train")[0]
    vertices, faces = load_mesh(source)
    grids, pose = augmented_renders(vertices, faces, 1, int(index["train"][0]), 2)
    assert np.array_equal(poses[n_train : n_train + 2], pose)
    assert torch.equal(train[n_train : n_train + 2], torch.from_numpy(grids))
    assert not torch.equal(train[n_train], train[0])
    # The training mean includes the copies (what the model is trained on).
    assert aug.spec.channel_mean[0] == pytest.approx(float(train.double().mean()))


def test_turn_mesh_rotates_about_up_and_mirrors_left_right() -> None:
    v = np.array([[0.0, 0.5, 1.0], [1.0, -0.5, 0.0]], dtype=np.float32)
    turned = turn_mesh(v, 90.0)
    assert np.allclose(turned, [[1.0, 0.5, 0.0], [0.0, -0.5, -1.0]], atol=1e-6)
    assert np.allclose(turn_mesh(v, 90.0, mirror=True), [[-1.0, 0.5, 0.0], [0.0, -0.5, -1.0]])
    assert np.allclose(turn_mesh(v, 360.0), v, atol=1e-6)


def test_bad_augment_counts_are_refused_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for command in ("from-panoramas", "from-meshes"):
        out = tmp_path / f"{command}.h5"
        with pytest.raises(SystemExit) as exc:
            main(["data", command, str(folder), "--out", str(out), "--augment", "-1"])
        assert exc.value.code == 2
        assert "--augment" in capsys.readouterr().err
        assert not out.exists()
    with pytest.raises(ValueError, match="--augment"):
        convert_panoramas(folder, tmp_path / "x.h5", augment=-2)
