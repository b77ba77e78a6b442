"""The ``pyskick`` command-line interface (Click, lazily loaded subcommands)."""

from __future__ import annotations
