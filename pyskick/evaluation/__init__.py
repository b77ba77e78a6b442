"""Evaluation: the paper's avg and adv metrics and their statistics."""

from __future__ import annotations
