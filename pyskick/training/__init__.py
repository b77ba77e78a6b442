"""Training: the trainer, its losses, baselines and logging, and the one-view model cache.

The config (:mod:`pyskick.config`, re-exported here), checkpoints (:mod:`pyskick.checkpoint`),
run folders (:mod:`pyskick.run_dir`), episodes (:mod:`pyskick.envs.rollout`) and distribution
(:mod:`pyskick.distributed`) live in lower layers, which evaluation and the sidekicks share
(``docs/architecture.md``).

Entry points::

    from pyskick.training import TrainData, load_config, pretrain, train

    data = TrainData(train_grids, val_grids, channel_mean)     # uint8 [n, N, M, C, H, W]
    config = load_config(preset="cpu-demo", overrides={"epochs": 5})
    pretrain(config, "runs/one-view", data)
    train(config, "runs/ltla", data, init="runs/one-view")

See ``docs/training.md``.
"""

from __future__ import annotations

from pyskick.config import TRAIN_PRESETS, TrainConfig, load_config, train_preset
from pyskick.training.baselines import AverageBaseline
from pyskick.training.data import TrainData
from pyskick.training.losses import LossTerms, completion_loss, episode_rewards
from pyskick.training.returns import reward_to_go
from pyskick.training.trainer import Trainer, TrainResult, pretrain, train

__all__ = [
    "TRAIN_PRESETS",
    "AverageBaseline",
    "LossTerms",
    "TrainConfig",
    "TrainData",
    "TrainResult",
    "Trainer",
    "completion_loss",
    "episode_rewards",
    "load_config",
    "pretrain",
    "reward_to_go",
    "train",
    "train_preset",
]
