"""A cache of one-view models, so that ``pyskick train`` without ``--init`` pretrains once.

The cache key covers everything that decides the pretrained weights: the dataset file's
content (SHA-256), the pretraining fields of the config and the pyskick version. A cached run
that was interrupted is resumed; a finished one is reused as it is. The cache lives under
``$PYSKICK_CACHE_DIR`` (default ``~/.cache/pyskick``) in ``one-view/<key>/``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

from pyskick import __version__
from pyskick.training.config import TrainConfig
from pyskick.training.data import TrainData
from pyskick.training.trainer import pretrain

# Fields that only matter after pretraining; the cached run uses their defaults.
TRAIN_ONLY_FIELDS = (
    "T",
    "epochs",
    "critic",
    "critic_coeff",
    "actor",
    "lambda_entropy",
    "reward_scale",
    "supervised_scale",
    "fix_decode",
    "frozen_batchnorm",
    "reward_radius",
    "device",
    "eval_batch_size",
)


def cache_root() -> Path:
    """``$PYSKICK_CACHE_DIR`` or ``~/.cache/pyskick``."""
    env = os.environ.get("PYSKICK_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "pyskick"


def file_digest(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def pretrain_config(config: TrainConfig) -> TrainConfig:
    """``config`` with every train-only field at its default (device kept)."""
    defaults = TrainConfig()
    changes = {name: getattr(defaults, name) for name in TRAIN_ONLY_FIELDS if name != "device"}
    return dataclasses.replace(config, **changes)


def cache_key(dataset_path: str | os.PathLike[str], config: TrainConfig) -> str:
    """The cache key of the one-view model for a dataset file and config."""
    fields = pretrain_config(config).to_dict()
    fields.pop("device")
    payload = json.dumps(
        {"dataset": file_digest(dataset_path), "config": fields, "pyskick": __version__},
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


def cached_one_view(
    dataset_path: str | os.PathLike[str], config: TrainConfig, data: TrainData
) -> Path:
    """The run folder of the one-view model for this dataset and config, pretrained if needed.

    Args:
        dataset_path: the dataset's HDF5 file (its bytes are part of the key).
        config: the training config (its pretraining fields are used).
        data: the dataset's train and val viewgrids.

    Returns:
        A run folder with ``best.pt``, to pass as ``init`` to :func:`pyskick.training.train`.
    """
    run = cache_root() / "one-view" / cache_key(dataset_path, config)
    pretrain(pretrain_config(config), run, data, resume=(run / "latest.pt").exists())
    return run
