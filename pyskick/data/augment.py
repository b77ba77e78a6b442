"""Augmented training copies in converted datasets, and the record of where each came from.

The converters split their sources first and only then add copies of the training sources, so
no copy of a validation or test source can reach the training split. :func:`with_copies` appends
the copies to the training split and returns what the file records about them: the root
attribute ``augment`` (copies per training source), ``augment_columns`` (the names of the pose
columns) and per-sample datasets ``source_index/<split>`` (every split: the index of the source
among the sorted files found) and ``augmentation/train`` (the pose each training viewgrid was
rendered with; zeros for the originals).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

SOURCE_INDEX_GROUP = "source_index"
POSE_GROUP = "augmentation"


@dataclass(frozen=True)
class Augmented:
    """Splits with the training copies appended, and what :func:`write_viewgrids` records.

    Attributes:
        splits: split -> uint8 ``[n, N, M, C, H, W]``.
        names: split -> the source name of each viewgrid.
        sample_data: ``source_index`` and ``augmentation`` datasets (see the module docstring).
        attrs: root attributes ``augment`` and ``augment_columns``.
    """

    splits: dict[str, np.ndarray]
    names: dict[str, list[str]]
    sample_data: dict[str, dict[str, np.ndarray]]
    attrs: dict[str, Any]


def with_copies(
    splits: Mapping[str, np.ndarray],
    names: Mapping[str, Sequence[str]],
    source_index: Mapping[str, Sequence[int]],
    copies: Sequence[np.ndarray],
    poses: Sequence[np.ndarray],
    columns: Sequence[str],
) -> Augmented:
    """Append ``K`` augmented copies of each training source after the original training split.

    Args:
        splits: split -> uint8 ``[n, N, M, C, H, W]`` of the original sources.
        names: split -> source name of each viewgrid.
        source_index: split -> index of each viewgrid's source among the sorted files found.
        copies: per training source (in ``splits["train"]`` order), uint8 ``[K, N, M, C, H, W]``.
        poses: per training source, float ``[K, P]``: the pose each copy was rendered with.
        columns: the names of the ``P`` pose columns.

    Returns:
        The training split ``[n_train * (1 + K), ...]``: the originals first, in their order, then
        the ``K`` copies of the first training source, of the second, and so on. Other splits are
        unchanged.
    """
    train = splits["train"]
    if len(copies) != len(train) or len(poses) != len(train):
        raise ValueError(
            f"need copies and poses for each of the {len(train)} training sources, got "
            f"{len(copies)} and {len(poses)}"
        )
    k = copies[0].shape[0] if copies else 0
    out = dict(splits)
    out["train"] = np.concatenate([train, *copies])
    out_names = {name: list(values) for name, values in names.items()}
    out_names["train"] = [*names["train"], *(n for n in names["train"] for _ in range(k))]
    index = {name: np.asarray(values, dtype=np.int64) for name, values in source_index.items()}
    index["train"] = np.concatenate([index["train"], np.repeat(index["train"], k)])
    zeros = np.zeros((len(train), len(columns)), dtype=np.float64)
    pose = np.concatenate([zeros, *(np.asarray(p, dtype=np.float64) for p in poses)])
    return Augmented(
        splits=out,
        names=out_names,
        sample_data={SOURCE_INDEX_GROUP: index, POSE_GROUP: {"train": pose}},
        attrs={"augment": int(k), "augment_columns": list(columns)},
    )
