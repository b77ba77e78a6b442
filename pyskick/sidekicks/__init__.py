"""Sidekicks: helpers that shape or demonstrate the policy's training (paper §3.2–3.3)."""

from __future__ import annotations

from pyskick.sidekicks.base import Demonstrations, NoSidekick, Sidekick
from pyskick.sidekicks.hybrid import HybridSupervision

__all__ = ["Demonstrations", "HybridSupervision", "NoSidekick", "Sidekick"]
