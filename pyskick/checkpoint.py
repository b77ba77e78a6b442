"""Atomic, weights-only-loadable checkpoints and exact RNG capture.

A checkpoint is a plain dict of tensors, numbers, strings, lists and dicts, written with
``torch.save`` to a temporary file in the destination folder and renamed over the target, so a
crash never leaves a torn file; it always loads with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import os
import random
import zipfile
from pathlib import Path
from typing import Any

import torch

from pyskick._io import atomic_path
from pyskick.models import CompletionPolicy, ModelConfig

FORMAT_VERSION = 1


def save_checkpoint(path: str | os.PathLike[str], state: dict[str, Any]) -> Path:
    """Write ``state`` atomically to ``path`` (temp file in the same folder, then rename).

    Args:
        path: destination file.
        state: plain-typed dict; a ``format`` key with :data:`FORMAT_VERSION` is added.

    Returns:
        The destination path.
    """
    path = Path(path)
    with atomic_path(path, fsync=True) as tmp:
        torch.save({"format": FORMAT_VERSION, **state}, tmp)
    return path


def load_checkpoint(
    path: str | os.PathLike[str], *, map_location: str | torch.device = "cpu"
) -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint` (``weights_only=True``).

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a pyskick checkpoint, or from a newer format.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:
        # torch's messages run over several lines; name the file and the kind of damage.
        if not zipfile.is_zipfile(path):
            why = "truncated, damaged or not a checkpoint file"
        else:
            why = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:120]}"
        raise ValueError(f"{path} is not a readable pyskick checkpoint ({why})") from exc
    if not isinstance(state, dict) or "format" not in state:
        raise ValueError(f"{path} is not a pyskick checkpoint (no 'format' key)")
    if state["format"] > FORMAT_VERSION:
        raise ValueError(
            f"{path} has checkpoint format {state['format']}; this pyskick reads up to "
            f"{FORMAT_VERSION}: upgrade pyskick"
        )
    return state


POLICY_KEYS = ("model", "model_config")
"""What a checkpoint needs to rebuild its policy (:func:`policy_from_state`)."""
RUN_KEYS = (*POLICY_KEYS, "config", "stage")
"""What every checkpoint of a training run holds (see :meth:`Trainer.state_dict`)."""


def load_run(
    run_or_checkpoint: str | os.PathLike[str],
    *,
    map_location: str | torch.device = "cpu",
    keys: tuple[str, ...] = RUN_KEYS,
) -> tuple[Path, dict[str, Any]]:
    """The checkpoint of a run folder (its ``best.pt``) or a checkpoint file, and its state.

    Args:
        run_or_checkpoint: a run folder or a checkpoint file.
        map_location: where its tensors are loaded.
        keys: the entries it must hold (:data:`POLICY_KEYS` where only the policy is used).

    Raises:
        FileNotFoundError: no such run or checkpoint.
        ValueError: not a checkpoint of a pyskick training run (an entry is missing).
    """
    path = Path(run_or_checkpoint)
    if path.is_dir():
        path = path / "best.pt"
    state = load_checkpoint(path, map_location=map_location)
    for key in keys:
        if key not in state:
            raise ValueError(f"{path} is not a pyskick training checkpoint (no {key!r})")
    return path, state


def policy_from_state(
    state: dict[str, Any], device: str | torch.device = "cpu"
) -> CompletionPolicy:
    """The policy saved in a run's checkpoint ``state``, on ``device``, in eval mode.

    Torch's global RNG is left as it was (building a policy draws initial weights from it,
    which the saved ones then replace).
    """
    with torch.random.fork_rng(devices=[]):
        policy = CompletionPolicy(ModelConfig.from_dict(state["model_config"]))
    policy.load_state_dict(state["model"])
    return policy.to(device).eval()


def capture_rng_state() -> dict[str, Any]:
    """The global RNGs, as plain types. pyskick itself draws only from torch's RNGs; Python's
    ``random`` is captured too for plugins that use it."""
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "python": _python_state_to_plain(random.getstate()),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`capture_rng_state` captured."""
    torch.set_rng_state(state["torch"])
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _python_state_to_plain(state: tuple[Any, ...]) -> list[Any]:
    version, internal, gauss = state
    return [version, list(internal), gauss]
