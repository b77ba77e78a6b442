"""Training: configs, rollouts, losses, the trainer, checkpoints, logging and distribution."""

from __future__ import annotations
