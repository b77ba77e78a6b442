"""Lazy matplotlib (the optional ``viz`` extra) on the non-interactive Agg backend, and atomic
figure writing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pyskick._io import atomic_path

INSTALL_HINT = "pyskick.viz needs matplotlib: pip install 'pyskick[viz]'"

FIGURE_SUFFIXES = (".png", ".pdf", ".svg")


def pyplot() -> Any:
    """``matplotlib.pyplot`` with the Agg backend (no display needed).

    Raises:
        ImportError: matplotlib is not installed (one line saying how to install it).
    """
    try:
        import matplotlib
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def check_figure_path(out: object) -> Path:
    """Validate an output figure path: a ``.png``, ``.pdf`` or ``.svg`` file name.

    Raises:
        TypeError: not a path.
        ValueError: another suffix, or an existing folder.
    """
    if not isinstance(out, str | os.PathLike):
        raise TypeError(f"out must be a path, got {type(out).__name__}")
    out = Path(out)
    if out.suffix.lower() not in FIGURE_SUFFIXES:
        raise ValueError(f"figure path must end with {', '.join(FIGURE_SUFFIXES)}, got {out}")
    if out.is_dir():
        raise ValueError(f"figure path {out} is a folder")
    return out


def save_figure(fig: Any, out: Path, *, dpi: int = 100) -> Path:
    """Write ``fig`` to ``out`` atomically (temporary file in the same folder, then rename) and
    close it."""
    plt = pyplot()
    try:
        with atomic_path(out) as tmp, tmp.open("wb") as handle:
            fig.savefig(handle, format=out.suffix.lower()[1:], dpi=dpi, bbox_inches="tight")
    finally:
        plt.close(fig)
    return out
