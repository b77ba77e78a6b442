"""``pyskick data from-meshes``: a folder of OBJ/OFF meshes, one sub-folder per class, to viewgrids.

Each mesh is normalised to the unit sphere and rendered as a ModelNet-Hard-like 5x9 grayscale
viewgrid (:func:`pyskick.data.meshes.render_viewgrid`, lights drawn per mesh from the seed).
Classes listed as unseen go to ``test_unseen``; the others are split into train/val/test by a
seeded permutation, as panoramas are.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from pyskick import progress
from pyskick.data.hdf5 import write_viewgrids
from pyskick.data.meshes import load_mesh, render_viewgrid
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


def convert_meshes(
    folder: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    split: Sequence[float] = (0.7, 0.15, 0.15),
    seed: int = 0,
    unseen_classes: Sequence[str] = (),
    strict: bool = False,
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
        report: called with ``(path, reason)`` for every skipped mesh.

    Returns:
        The written path.

    Raises:
        ValueError: an unreadable mesh under ``strict``, an unknown unseen class, or fewer than
            three readable meshes of seen classes.
    """
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
    grids: list[np.ndarray] = []
    kept: list[tuple[Path, str]] = []
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
    mean = float(splits["train"].mean(dtype=np.float64))
    spec = dataclasses.replace(MODELNET_HARD, channel_mean=(mean,))
    return write_viewgrids(
        out,
        splits,
        spec,
        source=(
            f"from-meshes {root} split={','.join(f'{f:g}' for f in split)} seed={seed} "
            f"unseen={','.join(unseen_classes) or '-'}"
        ),
        classes=classes,
        extra_attrs={"unseen_classes": list(unseen_classes)},
        sample_names=names,
    )
