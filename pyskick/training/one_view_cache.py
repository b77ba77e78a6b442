"""A cache of one-view models, so that ``pyskick train`` without ``--init`` pretrains once.

The cache key covers the dataset file's content (SHA-256), the pretraining fields of the config
and the pyskick version (not the runtime fields such as the device, nor code edits within one
version: clear the cache after changing the model code). A cached run that was interrupted is
resumed; a finished one is reused as it is. The cache lives under ``$PYSKICK_CACHE_DIR``
(default ``~/.cache/pyskick``) in ``one-view/<key>/``; a file lock serialises processes that
want the same model (under torchrun rank 0 holds it, reads the folder, and every rank follows
what it read).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
from pathlib import Path

from pyskick import __version__
from pyskick.config import RUNTIME_FIELDS, TRAIN_ONLY_FIELDS, TrainConfig
from pyskick.distributed import broadcast_from_main, init_distributed, is_main, resolve_device
from pyskick.files import cache_root, file_lock
from pyskick.run_dir import Dataset, RunDir, dataset_digest
from pyskick.training.data import TrainData
from pyskick.training.setup import check_request
from pyskick.training.trainer import pretrain

_LOG = logging.getLogger(__name__)


def pretrain_config(config: TrainConfig) -> TrainConfig:
    """``config`` with every train-only field at its default."""
    defaults = TrainConfig()
    return dataclasses.replace(
        config, **{name: getattr(defaults, name) for name in TRAIN_ONLY_FIELDS}
    )


def cache_key(dataset: Dataset, config: TrainConfig) -> str:
    """The cache key of the one-view model for a dataset file (a path, or an opened
    :class:`~pyskick.data.ViewgridFile`, hashed once) and config."""
    fields = pretrain_config(config).to_dict()
    for name in RUNTIME_FIELDS:  # where and how fast it computes, not what
        fields.pop(name)
    payload = json.dumps(
        {"dataset": dataset_digest(dataset), "config": fields, "pyskick": __version__},
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


def cache_folder(dataset: Dataset, config: TrainConfig) -> Path:
    """Where the one-view model for a dataset file and config is (or will be) cached."""
    return cache_root() / "one-view" / cache_key(dataset, config)


def cached_one_view(dataset: Dataset, config: TrainConfig, data: TrainData) -> Path:
    """The run folder of the one-view model for this dataset and config, pretrained if needed.

    Args:
        dataset: the dataset's HDF5 file, a path or opened (its bytes are part of the key).
        config: the training config (its pretraining fields are used).
        data: the dataset's train and val viewgrids.

    Returns:
        A run folder with ``best.pt``, to pass as ``init`` to :func:`pyskick.training.train`.
    """
    run = cache_folder(dataset, config)
    if RunDir(run).epochs_done() < config.pretrain_epochs:
        # What would refuse the pretraining to come, before the cache's folder and lock are
        # made for it (a finished model is reused whatever the runtime settings ask for).
        check_request(pretrain_config(config), data)
    run.parent.mkdir(parents=True, exist_ok=True)
    # Under torchrun the process group first: every rank follows what rank 0 read under the
    # lock. A rank reading the folder itself could resume a pretraining that rank 0, after
    # waiting for another process, finds finished, and the ranks would meet in different
    # collectives.
    device = resolve_device(config.device)
    init_distributed(device)
    main_rank = is_main()
    with contextlib.ExitStack() as stack:
        if main_rank:
            waiting = f"waiting for another process to pretrain {run}"
            stack.enter_context(file_lock(run.parent / f"{run.name}.lock", waiting))
        done = broadcast_from_main(
            lambda: RunDir(run).epochs_done(), device, "reading the one-view model cache"
        )
        if done >= config.pretrain_epochs:
            # Finished: reused as it is, by any number of processes (resuming it would compare
            # the process count with the one it was trained with).
            if main_rank:
                _LOG.info("reusing one-view model %s", run)
            return run
        if main_rank:
            _LOG.info("%s one-view model %s", "resuming" if done else "pretraining", run)
        pretrain(pretrain_config(config), run, data, resume=done > 0)
    return run
