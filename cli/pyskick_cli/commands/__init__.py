"""Subcommands of ``pyskick``, one module each, imported lazily."""

from __future__ import annotations
