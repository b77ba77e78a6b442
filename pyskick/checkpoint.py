"""Atomic, weights-only-loadable checkpoints, what a training run's checkpoint holds, and
exact RNG capture.

A checkpoint is a plain dict of tensors, numbers, strings, lists and dicts, written with
``torch.save`` to a temporary file in the destination folder and renamed over the target, so a
crash never leaves a torn file; it always loads with ``torch.load(weights_only=True)``.

What a training run's checkpoint holds (format :data:`FORMAT_VERSION`) is decided by
:mod:`pyskick.training.state`.

An exported model (``pyskick export``; docs/data-formats.md, "Exported models") is a folder
marked by :data:`EXPORT_MARKER`: the policy's weights in :data:`EXPORT_WEIGHTS` (safetensors,
never unpickled) and its run's ``config.json``. :func:`load_run` reads it like a run folder, so
every loader of a run's policy takes one.
"""

from __future__ import annotations

import hashlib
import io
import os
import random
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from pyskick._io import atomic_path, read_json_object
from pyskick.errors import UserError, UserFileNotFoundError
from pyskick.models import CompletionPolicy, ModelConfig

FORMAT_VERSION = 1

EXPORT_MARKER = "pyskick-export.json"
"""The file that marks an export folder (its format, pyskick version and provenance)."""
EXPORT_WEIGHTS = "model.safetensors"
"""The policy's ``state_dict`` in an export folder."""
EXPORT_FORMAT = 1
"""The export folder format this pyskick writes and reads (up to)."""


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
    return _read_checkpoint(Path(path), map_location)[0]


def _read_checkpoint(path: Path, map_location: str | torch.device) -> tuple[dict[str, Any], str]:
    """:func:`load_checkpoint`'s state and the SHA-256 of the very bytes it was loaded from
    (read once: a file replaced meanwhile cannot pair one model's state with another's digest)."""
    if not path.is_file():
        raise UserFileNotFoundError(f"checkpoint {path} does not exist")
    data = path.read_bytes()
    try:
        state = torch.load(io.BytesIO(data), map_location=map_location, weights_only=True)
    except Exception as exc:
        # torch's messages run over several lines; name the file and the kind of damage.
        if not zipfile.is_zipfile(io.BytesIO(data)):
            why = "truncated, damaged or not a checkpoint file"
        else:
            why = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:120]}"
        raise UserError(f"{path} is not a readable pyskick checkpoint ({why})") from exc
    if not isinstance(state, dict) or "format" not in state:
        raise UserError(f"{path} is not a pyskick checkpoint (no 'format' key)")
    if state["format"] > FORMAT_VERSION:
        raise UserError(
            f"{path} has checkpoint format {state['format']}; this pyskick reads up to "
            f"{FORMAT_VERSION}: upgrade pyskick"
        )
    return state, _digest(data)


POLICY_KEYS = ("model", "model_config")
"""What a checkpoint needs to rebuild its policy (:func:`policy_from_state`)."""
RUN_KEYS = (*POLICY_KEYS, "config", "stage")
"""What every checkpoint of a training run holds (see :func:`training_state`)."""


def check_one_view(path: str | os.PathLike[str], state: Mapping[str, Any], role: str) -> None:
    """Refuse a checkpoint of a policy run where a one-view model is asked for (a run's
    ``--init``, evaluate's ``--one-view``): a checkpoint that records its stage must be a
    pretraining's (one that records none, e.g. a bare state dict's, passes).

    Args:
        path: the checkpoint (named in the error).
        state: its state.
        role: what asked for it, e.g. ``"init"`` or ``"--one-view"``.

    Raises:
        UserError: one line naming the checkpoint, its stage and the fix.
    """
    stage = state.get("stage")
    if stage is not None and stage != "pretrain":
        raise UserError(
            f"{role} {path} is a checkpoint of a {stage!r} run, not a one-view model: give a "
            "`pyskick pretrain` run (or a reproduce folder's one-view run)"
        )


def load_run(
    run_or_checkpoint: str | os.PathLike[str],
    *,
    map_location: str | torch.device = "cpu",
    keys: tuple[str, ...] = RUN_KEYS,
) -> tuple[Path, dict[str, Any]]:
    """The checkpoint of a run folder (its ``best.pt``), an export folder (its weights, see
    :func:`load_export`) or a checkpoint file, and its state.

    Args:
        run_or_checkpoint: a run folder, an export folder or a checkpoint file.
        map_location: where its tensors are loaded.
        keys: the entries it must hold (:data:`POLICY_KEYS` where only the policy is used).

    Raises:
        FileNotFoundError: no such run or checkpoint.
        ValueError: not a checkpoint of a pyskick training run (an entry is missing).
    """
    path, state, _ = read_run(run_or_checkpoint, map_location=map_location, keys=keys)
    return path, state


def read_run(
    run_or_checkpoint: str | os.PathLike[str],
    *,
    map_location: str | torch.device = "cpu",
    keys: tuple[str, ...] = RUN_KEYS,
) -> tuple[Path, dict[str, Any], str]:
    """:func:`load_run`, and the SHA-256 of the bytes the model was loaded from (the
    checkpoint file, or an export's weights: what :func:`~pyskick.sidekicks.base.
    checkpoint_digest` names the model by), read once: a record of what was evaluated."""
    path = Path(run_or_checkpoint)
    if is_export(path):
        path, state, digest = _read_export(path, map_location)
    else:
        if path.is_dir():
            path = path / "best.pt"
        state, digest = _read_checkpoint(path, map_location)
    for key in keys:
        if key not in state:
            raise UserError(f"{path} is not a pyskick training checkpoint (no {key!r})")
    return path, state, digest


def is_export(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is an export folder (it holds :data:`EXPORT_MARKER`)."""
    return (Path(path) / EXPORT_MARKER).is_file()


def save_weights(path: str | os.PathLike[str], weights: dict[str, torch.Tensor]) -> Path:
    """Write ``weights`` (a ``state_dict``) as safetensors, atomically."""
    from safetensors.torch import save_file

    path = Path(path)
    # safetensors stores each tensor on its own: no shared or strided storage.
    plain = {key: value.detach().cpu().contiguous().clone() for key, value in weights.items()}
    with atomic_path(path, fsync=True) as tmp:
        save_file(plain, str(tmp), metadata={"format": "pt"})
    return path


def load_export(
    folder: str | os.PathLike[str], *, map_location: str | torch.device = "cpu"
) -> tuple[Path, dict[str, Any]]:
    """The weights file of an export folder and a checkpoint-like state read from it
    (``model``, ``model_config``, ``config``, ``stage``, ``init`` None, and ``spec``: the
    ``GridSpec`` fields of its dataset when recorded), without unpickling anything.

    The export is verified as it is read: the bytes of the weights (read once, and those bytes
    loaded) and of ``config.json`` and ``dataset.json`` against the digests its
    ``pyskick-export.json`` recorded (exports before the config digests: the weights only), and
    the model the config describes against the weights' names and shapes.

    Raises:
        FileNotFoundError: the folder lacks its weights.
        ValueError: a damaged, changed, inconsistent or newer export (names the file).
    """
    path, state, _ = _read_export(Path(folder), map_location)
    return path, state


def _read_export(
    folder: Path, map_location: str | torch.device
) -> tuple[Path, dict[str, Any], str]:
    """:func:`load_export` and the SHA-256 of the weights' bytes it loaded."""
    from safetensors import SafetensorError
    from safetensors.torch import load

    marker = _json_object(folder / EXPORT_MARKER)
    version = marker.get("format")
    if not isinstance(version, int) or version > EXPORT_FORMAT:
        raise UserError(
            f"{folder / EXPORT_MARKER} has export format {version!r}; this pyskick reads up to "
            f"{EXPORT_FORMAT}: upgrade pyskick"
        )
    named = marker.get("weights", EXPORT_WEIGHTS)
    if named != EXPORT_WEIGHTS:
        raise UserError(
            f"{folder / EXPORT_MARKER} names its weights {named!r}; an export's weights are "
            f"{EXPORT_WEIGHTS!r}"
        )
    weights = folder / EXPORT_WEIGHTS
    if not weights.is_file():
        raise UserFileNotFoundError(f"export {folder} has no {EXPORT_WEIGHTS}")
    for name, key in (("config.json", "config_sha256"), ("dataset.json", "dataset_sha256")):
        recorded = marker.get(key)
        if recorded is not None and (
            not (folder / name).is_file() or _digest((folder / name).read_bytes()) != recorded
        ):
            raise UserError(
                f"{folder / name} is not the file this export recorded ({EXPORT_MARKER} "
                f"{key}): it was changed or replaced"
            )
    config = _json_object(folder / "config.json")
    if not isinstance(config.get("model_config"), dict) or "stage" not in config:
        raise UserError(f"{folder / 'config.json'} is not an export's config (no model_config)")
    data = weights.read_bytes()
    recorded = marker.get("weights_sha256")
    if recorded is not None and _digest(data) != recorded:
        raise UserError(
            f"{weights} is not the weights this export recorded ({EXPORT_MARKER} "
            "weights_sha256): they were changed, replaced or damaged"
        )
    try:
        model = {key: value.to(map_location) for key, value in load(data).items()}
    except (SafetensorError, OSError, ValueError) as exc:
        why = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{weights} is not a readable safetensors file ({why})") from exc
    _check_weights_fit(folder, config["model_config"], model)
    train_config = {
        key: value
        for key, value in config.items()
        if key not in ("stage", "model_config", "loggers")
    }
    dataset = _json_object(folder / "dataset.json") if (folder / "dataset.json").is_file() else {}
    return (
        weights,
        {
            "format": FORMAT_VERSION,
            "model": model,
            "model_config": config["model_config"],
            "config": train_config,
            "stage": config["stage"],
            "init": None,
            "spec": dataset.get("spec"),
        },
        _digest(data),
    )


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _check_weights_fit(
    folder: Path, model_config: dict[str, Any], weights: dict[str, torch.Tensor]
) -> None:
    """Refuse weights whose names or shapes are not those of the model ``config.json``
    describes (one line naming the first difference)."""
    try:
        config = ModelConfig.from_dict(model_config)
    except (TypeError, ValueError, KeyError) as exc:
        raise UserError(f"{folder / 'config.json'} has an invalid model_config: {exc}") from None
    with torch.random.fork_rng(devices=[]):
        expected = CompletionPolicy(config).state_dict()
    missing = sorted(set(expected) - set(weights))
    extra = sorted(set(weights) - set(expected))
    if missing or extra:
        what = f"lack {missing[0]}" if missing else f"have {extra[0]}, which the model has not"
        raise UserError(
            f"{folder / EXPORT_WEIGHTS} do not fit {folder / 'config.json'}: the weights {what}"
        )
    for key, tensor in expected.items():
        if tuple(weights[key].shape) != tuple(tensor.shape):
            raise UserError(
                f"{folder / EXPORT_WEIGHTS} do not fit {folder / 'config.json'}: {key} has shape "
                f"{list(weights[key].shape)}, the config's model {list(tensor.shape)}"
            )


def _json_object(path: Path) -> dict[str, Any]:
    """A JSON object file of an export folder.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a readable JSON object.
    """
    if not path.is_file():
        raise UserFileNotFoundError(f"{path} does not exist")
    return read_json_object(path, "JSON file")


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
        # One state per GPU visible when it was saved: a machine that shows fewer (a resume
        # elsewhere, CUDA_VISIBLE_DEVICES) restores those it has; set_rng_state_all would
        # index a device that does not exist.
        for index, device_state in enumerate(state["cuda"][: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(device_state, index)


def _python_state_to_plain(state: tuple[Any, ...]) -> list[Any]:
    version, internal, gauss = state
    return [version, list(internal), gauss]
