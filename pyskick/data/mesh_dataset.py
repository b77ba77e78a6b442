"""``pyskick data from-meshes``: a folder of OBJ/OFF meshes, one sub-folder per class, to viewgrids.

Each mesh is normalised to the unit sphere and rendered as a ModelNet-Hard-like 5x9 grayscale
viewgrid (:func:`pyskick.data.meshes.render_viewgrid`, lights drawn per mesh from the seed).
Classes listed as unseen go to ``test_unseen``; the others are split into train/val/test by a
seeded permutation, as panoramas are. ``augment`` then adds copies of the training meshes only,
turned about the up axis and mirrored (:func:`augmented_renders`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from pyskick import progress
from pyskick.data.augment import with_copies
from pyskick.data.hdf5_write import write_viewgrids
from pyskick.data.meshes import load_mesh, normalize_mesh, render_viewgrid, turn_mesh
from pyskick.data.panoramas import assign_splits
from pyskick.data.spec import MODELNET_HARD
from pyskick.errors import UserError, UserFileNotFoundError

MESH_SUFFIXES = (".obj", ".off")

Reporter = Callable[[Path, str], None]

_LOG = logging.getLogger(__name__)


def _log_skipped(path: Path, reason: str) -> None:
    _LOG.warning("skipped %s: %s", path, reason)


def find_meshes(
    folder: str | os.PathLike[str], report: Reporter = _log_skipped
) -> list[tuple[Path, str]]:
    """Every ``.obj``/``.off`` file under ``folder`` (sorted) with its class.

    The class is the top-level sub-folder it lies in (``chair/train/a.off`` is a chair, as in
    ModelNet's layout); meshes directly in ``folder`` have no class and are reported.
    """
    root = Path(folder)
    if not root.is_dir():
        raise UserFileNotFoundError(f"mesh folder {root} does not exist")
    paths = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in MESH_SUFFIXES)
    found = []
    for path in paths:
        parts = path.relative_to(root).parts
        if len(parts) == 1:
            report(path, "not inside a class folder")
            continue
        found.append((path, parts[0]))
    return found


# Columns of the ``augmentation/train`` dataset of an augmented mesh file.
AUGMENT_COLUMNS = ("yaw_deg", "mirror")


def augmented_renders(
    vertices: np.ndarray, faces: np.ndarray, seed: int, source_index: int, copies: int
) -> tuple[np.ndarray, np.ndarray]:
    """Render ``copies`` augmented viewgrids of one mesh.

    Copy ``k`` (1-based) draws from ``numpy.random.default_rng([seed, source_index, k])``: a yaw
    uniform in [0, 360) degrees about the up axis, a mirror image with probability 1/2, then the
    lights (:func:`~pyskick.data.meshes.random_lights`). It depends on nothing but the seed, the
    mesh's place among the sorted files found and ``k``.

    Returns:
        uint8 ``[copies, N, M, 1, H, W]`` and the poses ``[copies, 2]`` (yaw, mirror 0/1).
    """
    unit = normalize_mesh(vertices)
    grids, poses = [], []
    for k in range(1, copies + 1):
        rng = np.random.default_rng([seed, source_index, k])
        yaw, mirror = rng.uniform(0.0, 360.0), bool(rng.random() < 0.5)
        turned = turn_mesh(unit, yaw, mirror)
        grids.append(render_viewgrid(turned, faces, rng=rng, normalize=False))
        poses.append((yaw, float(mirror)))
    return np.stack(grids), np.array(poses, dtype=np.float64)


def convert_meshes(
    folder: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    split: Sequence[float] = (0.7, 0.15, 0.15),
    seed: int = 0,
    unseen_classes: Sequence[str] = (),
    strict: bool = False,
    augment: int = 0,
    report: Reporter = _log_skipped,
) -> Path:
    """Render every mesh under ``folder`` into a viewgrid file.

    Args:
        folder: searched recursively; a mesh's class is its top-level sub-folder.
        out: the ``.h5`` file to write (only once everything succeeded).
        split: train, val, test fractions of the seen classes.
        seed: seed of the split permutation and of each mesh's lights.
        unseen_classes: classes held out as ``test_unseen`` (each must exist).
        strict: fail on the first unreadable mesh instead of skipping it.
        augment: augmented copies added per training mesh (:func:`augmented_renders`);
            validation, test and unseen-class meshes are never augmented.
        report: called with ``(path, reason)`` for every skipped mesh.

    Returns:
        The written path.

    Raises:
        ValueError: an unreadable mesh under ``strict``, an unknown unseen class, every class
            held out, or fewer than three readable meshes of seen classes.
    """
    if augment < 0:
        raise UserError(f"--augment must be 0 or more copies per mesh, got {augment}")
    sources = find_meshes(folder, report)
    if not sources:
        raise UserError(f"no meshes (.obj or .off) under {folder}")
    classes = sorted({cls for _, cls in sources})
    unknown = sorted(set(unseen_classes) - set(classes))
    if unknown:
        raise UserError(
            f"--unseen-classes names classes with no meshes: {', '.join(unknown)}; "
            f"classes found: {', '.join(classes)}"
        )
    if set(classes) <= set(unseen_classes):
        raise UserError(
            f"--unseen-classes holds out every class ({', '.join(classes)}): none is left "
            "for the train, val and test splits"
        )
    grids: list[np.ndarray] = []
    kept: list[tuple[Path, str]] = []
    found: list[int] = []  # index of each kept mesh among the sources
    with progress.stage("convert meshes", total=len(sources), unit="mesh") as converting:
        for index, (path, cls) in enumerate(sources):
            try:
                vertices, faces = load_mesh(path)
                if len(faces) == 0:
                    raise ValueError("the mesh has no faces")
                grid = render_viewgrid(vertices, faces, rng=np.random.default_rng([seed, index]))
            except (ValueError, OSError) as exc:
                if strict:
                    raise UserError(f"{path}: {exc}") from exc
                report(path, str(exc))
            else:
                grids.append(grid)
                kept.append((path, cls))
                found.append(index)
            converting.advance()
    root = Path(folder)
    seen = [i for i, (_, cls) in enumerate(kept) if cls not in unseen_classes]
    unseen = [i for i, (_, cls) in enumerate(kept) if cls in unseen_classes]
    parts = {
        name: [seen[j] for j in idx] for name, idx in assign_splits(len(seen), split, seed).items()
    }
    if unseen:
        parts["test_unseen"] = unseen
    splits = {name: np.stack([grids[i] for i in idx]) for name, idx in parts.items()}
    names = {name: [str(kept[i][0].relative_to(root)) for i in idx] for name, idx in parts.items()}
    description = (
        f"from-meshes {root} split={','.join(f'{f:g}' for f in split)} seed={seed} "
        f"unseen={','.join(unseen_classes) or '-'}"
    )
    extra: dict[str, object] = {"unseen_classes": list(unseen_classes)}
    sample_data = None
    if augment:
        train = [kept[i][0] for i in parts["train"]]
        copies, poses = _augmented_copies(train, [found[i] for i in parts["train"]], seed, augment)
        indices = {name: [found[i] for i in idx] for name, idx in parts.items()}
        result = with_copies(splits, names, indices, copies, poses, AUGMENT_COLUMNS)
        splits, names, sample_data = result.splits, result.names, result.sample_data
        extra.update(result.attrs)
        description += f" augment={augment}"
    # The training mean, copies included: the views the model is trained on.
    mean = float(splits["train"].mean(dtype=np.float64))
    spec = dataclasses.replace(MODELNET_HARD, channel_mean=(mean,))
    return write_viewgrids(
        out,
        splits,
        spec,
        source=description,
        classes=classes,
        extra_attrs=extra,
        sample_names=names,
        sample_data=sample_data,
    )


def _augmented_copies(
    train: list[Path], found: list[int], seed: int, copies: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Load each training mesh again and render its augmented copies (:func:`augmented_renders`).

    Returns:
        Per mesh: uint8 ``[copies, N, M, 1, H, W]`` and its poses ``[copies, 2]``.
    """
    grids, poses = [], []
    with progress.stage("augment meshes", total=len(train), unit="mesh") as augmenting:
        for path, index in zip(train, found, strict=True):
            try:
                vertices, faces = load_mesh(path)
                rendered, pose = augmented_renders(vertices, faces, seed, index, copies)
            except (ValueError, OSError) as exc:  # changed on disk since the first pass
                raise UserError(f"{path}: {exc}") from None
            grids.append(rendered)
            poses.append(pose)
            augmenting.advance()
    return grids, poses
