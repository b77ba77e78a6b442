"""Sidekick score files, the score cache and sharded score computation.

A sidekick's scores (:meth:`~pyskick.sidekicks.base.ScoredSidekick.compute_scores`) depend
on the viewgrids, on :meth:`~pyskick.sidekicks.base.ScoredSidekick.score_options` and on the
code only, so they are identified by :func:`score_key`: SHA-256 over the class that computes them
(``module.QualName``, not the name it was registered under: a sidekick built by hand or through
an alias shares the scores), its options (JSON, sorted keys), the viewgrids' content digest,
the code's versions and a digest of its source (:func:`code_digest`: editing a plugin's
sidekick misses the cache without a version bump). A score file is an HDF5 file
(layout in ``docs/data-formats.md``) holding one group per split, each stamped with the key of
that split's viewgrids; :func:`read_scores` refuses a group whose key differs, so scores are
never stale.

:func:`cached_scores` keeps computed scores under ``$PYSKICK_CACHE_DIR/scores/<key>.h5``
(default ``~/.cache/pyskick``); a file lock makes concurrent processes compute them once.
Under torchrun (``torch.distributed`` initialised, world size > 1)
:func:`compute_scores_sharded` splits the viewgrids into contiguous rank slices and gathers the
results in sample order on every rank (a sidekick that is not ``shardable`` is computed on rank
0 and broadcast).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import inspect
import io
import json
import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import h5py
import numpy as np
import torch
from torch import Tensor

from pyskick import __version__, progress
from pyskick._io import atomic_path
from pyskick.distributed import broadcast_from_main, gather_from_ranks, world
from pyskick.errors import UserError, UserFileNotFoundError
from pyskick.files import cache_root, file_lock

_LOG = logging.getLogger(__name__)

SCORES_FORMAT_VERSION = 2
"""Value of the ``pyskick_scores`` root attribute of the files this module writes. Version 1
keyed scores by the sidekick's registry name; version 2 by the class that computes them, so
version-1 files are refused (their keys would never match)."""

CACHE_GROUP = "grids"
"""The one group of a cache entry: entries are keyed by content, not by split name."""


@runtime_checkable
class Scorer(Protocol):
    """What this module needs of a sidekick with scores: a
    :class:`~pyskick.sidekicks.base.ScoredSidekick` (a protocol, so that this module does not
    import the sidekick classes built on it)."""

    shardable: bool

    @property
    def name(self) -> str: ...

    def score_options(self, T: int) -> dict[str, Any]: ...

    def compute_scores(
        self, grids: Tensor, *, T: int, device: torch.device
    ) -> dict[str, Tensor]: ...


def has_scores(sidekick: object) -> bool:
    """Whether ``sidekick`` precomputes scores (a :class:`~pyskick.sidekicks.base.ScoredSidekick`:
    what its score trio provides); the one test of it."""
    return isinstance(sidekick, Scorer)


def class_path(sidekick: object) -> str:
    """``module.QualName`` of ``sidekick``'s class: the code that computes its scores (score
    keys) and the name of a sidekick built by hand."""
    cls = type(sidekick)
    return f"{cls.__module__}.{cls.__qualname__}"


def _options(sidekick: Scorer, T: int) -> dict[str, Any]:
    """``sidekick.score_options(T)``, checked to be a dict.

    Raises:
        ValueError: the sidekick has no scores (:func:`has_scores`).
        TypeError: its ``score_options`` returned something else than a dict.
    """
    if not has_scores(sidekick):
        raise UserError(f"sidekick {sidekick.name!r} has no scores")
    options = sidekick.score_options(T)
    if not isinstance(options, dict):
        raise TypeError(
            f"sidekick {sidekick.name!r} computes scores, so its score_options must return a "
            f"dict, got {type(options).__name__}"
        )
    return options


def grids_digest(grids: Tensor) -> str:
    """SHA-256 of a viewgrid tensor's dtype, shape and bytes (row-major)."""
    if not isinstance(grids, Tensor):
        raise TypeError(f"grids must be a torch.Tensor, got {type(grids).__name__}")
    digest = hashlib.sha256(f"{grids.dtype}{tuple(grids.shape)}".encode())
    # As flat bytes: a memoryview of a shape with a zero in it cannot be cast to bytes.
    digest.update(grids.detach().cpu().contiguous().numpy().reshape(-1).view(np.uint8).data)
    return digest.hexdigest()


def _sha256_json(payload: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def code_versions(sidekick: Scorer) -> dict[str, str]:
    """The versions of the code that computes ``sidekick``'s scores: pyskick's, and the
    distribution that defines its class when that is another one (a plugin), so upgrading a
    plugin never reuses its old scores."""
    versions = {"pyskick": __version__}
    top = type(sidekick).__module__.split(".")[0]
    for name in importlib.metadata.packages_distributions().get(top, []):
        if name != "pyskick":
            versions[name] = importlib.metadata.version(name)
    return versions


_BASE_MODULE = "pyskick.sidekicks.base"
"""The contract's module: its classes (``Sidekick``, ``ScoredSidekick``) compute nothing."""


def _scoring_classes(sidekick: Scorer) -> list[type]:
    """The classes whose code computes ``sidekick``'s scores: its class and every base that is
    a :class:`~pyskick.sidekicks.base.Sidekick` subclass, that base itself excluded (its
    generic machinery computes nothing), so a mixin such as ``torch.nn.Module`` is left out."""
    mro = type(sidekick).__mro__
    base = next((c for c in mro if c.__module__ == _BASE_MODULE and c.__name__ == "Sidekick"), None)
    if base is None:  # not a Sidekick subclass: its own class is all there is to name
        return [type(sidekick)]
    return [c for c in mro if base in c.__mro__ and c.__module__ != _BASE_MODULE]


def _module_files(cls: type) -> list[Path]:
    """The source file of the module that defines ``cls``; for a module run from a file but
    not registered in ``sys.modules`` (``importlib.util.module_from_spec``), the files its
    functions were compiled from. Empty when there is no source (an interactive session)."""
    file = getattr(sys.modules.get(cls.__module__), "__file__", None)
    if file is not None:
        return [Path(file)]
    return sorted(
        {Path(f.__code__.co_filename) for f in vars(cls).values() if inspect.isfunction(f)}
    )


def _source_files(cls: type) -> dict[str, Path]:
    """label -> source file of the code behind ``cls``, labels independent of where it is
    installed (the same code keys the same on every machine).

    pyskick's own classes: the module defining the class (the rest of pyskick is named by its
    version). Any other class (a plugin's, a research script's): every ``.py`` file of its
    top-level package, so that editing a helper module the sidekick calls misses the cache too;
    a top-level module on its own is that one file.
    """
    top = cls.__module__.partition(".")[0]
    package = sys.modules.get(top)
    folders = getattr(package, "__path__", None) if top != "pyskick" else None
    if not folders:
        return {f"{cls.__module__}:{path.name}": path for path in _module_files(cls)}
    return {
        f"{top}/{path.relative_to(folder).as_posix()}": path
        for folder in map(Path, folders)
        for path in sorted(folder.rglob("*.py"))
    }


def code_files(sidekick: Scorer) -> dict[str, Path]:
    """label -> source file, for every file :func:`code_digest` covers: those of the class
    and of each of its ``Sidekick`` bases (:class:`~pyskick.sidekicks.base.Sidekick` itself
    excluded), per class pyskick's defining module or a plugin's whole top-level package."""
    files: dict[str, Path] = {}
    for cls in _scoring_classes(sidekick):
        files.update(_source_files(cls))
    return files


def code_digest(sidekick: Scorer) -> str:
    """SHA-256 of the source code that computes ``sidekick``'s scores.

    Over the files of :func:`code_files` (labels and contents, line endings normalised), so an
    edited plugin sidekick never reuses its old scores while the same code on another machine
    or checkout keys the same. Files that cannot be read (or none: a class typed into an
    interactive session) contribute nothing; compiled extensions are named by versions only
    (:func:`code_versions`).
    """
    digest = hashlib.sha256()
    for label, path in sorted(code_files(sidekick).items()):
        try:
            text = path.read_bytes().replace(b"\r\n", b"\n")
        except OSError:
            continue
        digest.update(f"{label}\0{hashlib.sha256(text).hexdigest()}\0".encode())
    return digest.hexdigest()


def _code(sidekick: Scorer) -> dict[str, Any]:
    """What the keys say about the code: its versions and its source digest."""
    return {"versions": code_versions(sidekick), "source": code_digest(sidekick)}


def options_key(sidekick: Scorer, T: int) -> str:
    """SHA-256 over the sidekick's class, ``score_options(T)`` and the code (versions and
    source digest): the identity of the scoring, whatever the viewgrids (a score file's root
    ``key``)."""
    options = _options(sidekick, T)
    return _sha256_json(
        {"scorer": class_path(sidekick), "options": options, "code": _code(sidekick)}
    )


def score_key(sidekick: Scorer, grids: Tensor, T: int) -> str:
    """The identity of ``sidekick``'s scores of ``grids`` ``[n, N, M, C, H, W]``.

    SHA-256 over the JSON (sorted keys) of the class that computes them (``module.QualName``),
    ``score_options(T)``, the viewgrids' content digest, the code's versions
    (:func:`code_versions`) and its source digest (:func:`code_digest`). The name the sidekick
    was registered under is not part of it.

    Raises:
        ValueError: the sidekick has no scores.
    """
    return _sha256_json(
        {
            "scorer": class_path(sidekick),
            "options": _options(sidekick, T),
            "grids": grids_digest(grids),
            "code": _code(sidekick),
        }
    )


@dataclass(frozen=True)
class ScoreMeta:
    """What a score file records besides the arrays."""

    sidekick: str
    """The sidekick's name (its registry name; see :attr:`Sidekick.name`), for people: the
    keys identify the scores."""
    options: dict[str, Any]
    """Its ``score_options(T)``."""
    key: str
    """:func:`options_key` of the sidekick and options."""
    split_keys: dict[str, str]
    """Per split, :func:`score_key` of that split's viewgrids."""

    @classmethod
    def of(cls, sidekick: Scorer, T: int, split_keys: Mapping[str, str]) -> ScoreMeta:
        """The metadata of ``sidekick``'s scores of the splits keyed in ``split_keys``."""
        return cls(sidekick.name, _options(sidekick, T), options_key(sidekick, T), dict(split_keys))


def _check_scores(scores: object, n: int, who: str) -> dict[str, Tensor]:
    """``scores`` as contiguous CPU tensors, checked to be ``name -> [n, ...]``."""
    if not isinstance(scores, Mapping) or not scores:
        raise TypeError(f"{who}: scores must be a non-empty dict of tensors, got {scores!r:.60}")
    out: dict[str, Tensor] = {}
    for name, value in scores.items():
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError(f"{who}: score names must be non-empty strings without '/': {name!r}")
        if not isinstance(value, Tensor):
            raise TypeError(f"{who}: score {name!r} must be a tensor, got {type(value).__name__}")
        if value.dim() == 0 or value.shape[0] != n:
            raise ValueError(
                f"{who}: score {name!r} has shape {list(value.shape)}; its first dimension "
                f"must be the {n} samples"
            )
        out[name] = value.detach().cpu().contiguous()
    return out


def write_scores(
    path: str | os.PathLike[str], per_split: Mapping[str, Mapping[str, Tensor]], *, meta: ScoreMeta
) -> Path:
    """Write a score file atomically (a temporary file next to ``path``, then ``os.replace``).

    Args:
        path: the ``.h5`` file to write (its folder must exist).
        per_split: split -> score name -> tensor whose first dimension is the split's samples
            in file order.
        meta: the sidekick, options and keys; every split needs a key in ``meta.split_keys``.

    Returns:
        ``path``.

    Raises:
        ValueError, TypeError: bad scores, a split without a key, a missing folder.
    """
    path = Path(path)
    if not path.parent.is_dir():
        raise UserError(f"cannot write {path}: folder {path.parent} does not exist")
    if path.is_dir():
        raise UserError(f"cannot write {path}: it is a folder")
    if not per_split:
        raise ValueError("no splits to write")
    checked: dict[str, dict[str, Tensor]] = {}
    for split, scores in per_split.items():
        if split not in meta.split_keys:
            raise ValueError(f"split {split!r} has no key in the score metadata")
        lengths = {
            name: value.shape[0]
            for name, value in (scores.items() if isinstance(scores, Mapping) else ())
            if isinstance(value, Tensor) and value.dim()
        }
        if len(set(lengths.values())) > 1:
            raise ValueError(
                f"the scores of split {split!r} disagree in their first dimension (samples): "
                + ", ".join(f"{name} {n}" for name, n in lengths.items())
            )
        checked[split] = _check_scores(scores, next(iter(lengths.values()), 0), f"split {split!r}")
    # Assembled in memory, then written with plain file I/O: HDF5 never sees a failed write
    # (after one its library crashes the process at exit), and a full disk is one line.
    image = io.BytesIO()
    with h5py.File(image, "w") as f:
        f.attrs["pyskick_scores"] = SCORES_FORMAT_VERSION
        f.attrs["pyskick_version"] = __version__
        f.attrs["sidekick"] = meta.sidekick
        f.attrs["options"] = json.dumps(meta.options, sort_keys=True)
        f.attrs["key"] = meta.key
        for split, scores in checked.items():
            group = f.create_group(split)
            group.attrs["key"] = meta.split_keys[split]
            for name, value in scores.items():
                group.create_dataset(name, data=value.numpy())
    with atomic_path(path) as tmp, tmp.open("wb") as handle:
        handle.write(image.getbuffer())
    return path


def _attr_str(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def read_score_meta(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A score file's root attributes and splits: ``sidekick``, ``options``, ``key``,
    ``pyskick_version``, ``splits`` (split -> key).

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a pyskick score file, or a format version this pyskick cannot read.
    """
    path = Path(path)
    if not path.is_file():
        raise UserFileNotFoundError(f"score file {path} does not exist")
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise UserError(f"{path} is not an HDF5 score file ({exc})") from None
    with f:
        if "pyskick_scores" not in f.attrs:
            raise UserError(f"{path} is not a pyskick score file (no 'pyskick_scores' attribute)")
        version = int(f.attrs["pyskick_scores"])
        if version != SCORES_FORMAT_VERSION:
            raise UserError(
                f"{path} has score format {version}; this pyskick reads {SCORES_FORMAT_VERSION}"
            )
        return {
            "sidekick": _attr_str(f.attrs["sidekick"]),
            "options": json.loads(_attr_str(f.attrs["options"])),
            "key": _attr_str(f.attrs["key"]),
            "pyskick_version": _attr_str(f.attrs["pyskick_version"]),
            "splits": {name: _attr_str(group.attrs["key"]) for name, group in f.items()},
        }


def read_scores(path: str | os.PathLike[str], split: str, expected_key: str) -> dict[str, Tensor]:
    """One split's scores, checked against the key of the viewgrids they are for.

    Args:
        path: a score file.
        split: the group to read.
        expected_key: :func:`score_key` of the sidekick, viewgrids and glimpse budget at hand.

    Returns:
        score name -> CPU tensor (first dimension: samples in file order).

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a score file, no such split, or stale scores (another key).
    """
    meta = read_score_meta(path)
    if split not in meta["splits"]:
        splits = ", ".join(meta["splits"]) or "none"
        raise UserError(f"score file {path} has no split {split!r}; its splits: {splits}")
    if meta["splits"][split] != expected_key:
        raise UserError(
            f"stale scores: computed for other data/model/options ({path}, split {split!r}, "
            f"sidekick {meta['sidekick']!r})"
        )
    with h5py.File(path, "r") as f:
        return {name: torch.from_numpy(np.asarray(ds[()])) for name, ds in f[split].items()}


def load_scores_file(
    sidekick: Scorer,
    grids: Tensor,
    path: str | os.PathLike[str],
    *,
    T: int,
    split: str = "train",
) -> dict[str, Tensor]:
    """``sidekick``'s scores of ``grids`` from a precomputed file, refused when stale.

    Raises:
        FileNotFoundError: no such file.
        ValueError: the sidekick has no scores, the file lacks ``split``, holds another
            sidekick's scores, or its scores were computed for other viewgrids, model or
            options.
    """
    key = score_key(sidekick, grids, T)
    meta = read_score_meta(path)
    stored = meta["splits"].get(split)
    other = meta["key"] != options_key(sidekick, T) and meta["sidekick"] != sidekick.name
    if stored is not None and stored != key and other:
        raise UserError(
            f"{path} holds scores of sidekick {meta['sidekick']!r}, not {sidekick.name!r}; "
            f"score with it (pyskick score --sidekick {sidekick.name}) or leave --scores out"
        )
    if stored is not None and stored != key:
        raise UserError(
            f"stale scores in {path} (split {split!r}): {_stale_reason(meta, sidekick, T)}; "
            "compute them again (pyskick score) or leave --scores out"
        )
    scores = read_scores(path, split, key)
    return _check_scores(scores, grids.shape[0], f"score file {path}")


def _stale_reason(meta: Mapping[str, Any], sidekick: Scorer, T: int) -> str:
    """What differs between a score file and the scoring at hand: the options, the code that
    computes them (the class, its source or a version), or else the viewgrids."""
    if meta["key"] == options_key(sidekick, T):
        return "they were computed for other viewgrids (another data file or split)"
    options = json.loads(json.dumps(_options(sidekick, T)))  # as the file stores them
    if meta["options"] != options:
        return f"they were computed with options {meta['options']}, not {options}"
    return (
        f"the code of {class_path(sidekick)} changed since they were computed (its class, its "
        "source or a version: scores are keyed by the code)"
    )


# -- distribution ---------------------------------------------------------------------------


def compute_scores_sharded(
    sidekick: Scorer, grids: Tensor, *, T: int, device: torch.device
) -> dict[str, Tensor]:
    """``sidekick.compute_scores(grids)``, split over the ranks of an initialised process group.

    Reported as the progress stage ``score NAME``, with the sidekick's own stages inside it.

    With world size W > 1 and a ``shardable`` sidekick, rank r scores the r-th of W contiguous
    slices of ``grids`` and the slices are gathered (``all_gather_object``, CPU tensors) and
    concatenated in sample order on every rank; a non-shardable sidekick is scored on rank 0
    and broadcast. Every rank must call this with the same ``grids``.

    Args:
        sidekick: a sidekick with scores.
        grids: ``[n, N, M, C, H, W]`` uint8 viewgrids (CPU).
        T: the glimpse budget.
        device: where this rank computes.

    Returns:
        name -> CPU tensor ``[n, ...]``, identical on every rank.

    Raises:
        RuntimeError: a rank failed (its error is named); in one process the sidekick's own
            error propagates.
        TypeError, ValueError: no viewgrids, or the sidekick returned something else than
            ``name -> [n, ...]``.
    """
    n = int(grids.shape[0])
    if n == 0:
        raise ValueError(f"sidekick {sidekick.name!r} got no viewgrids to score")
    with progress.stage(f"score {sidekick.name}", total=n, unit="grid") as scoring:
        scores = _compute_sharded(sidekick, grids, T=T, device=device)
        scoring.advance(n)
    return scores


def _compute_sharded(
    sidekick: Scorer, grids: Tensor, *, T: int, device: torch.device
) -> dict[str, Tensor]:
    """:func:`compute_scores_sharded` without its progress stage."""
    n = int(grids.shape[0])
    who = f"sidekick {sidekick.name!r}"
    rank, size = world()
    if size == 1 or not sidekick.shardable:
        return broadcast_from_main(
            lambda: _check_scores(sidekick.compute_scores(grids, T=T, device=device), n, who),
            device,
            f"scoring with {who}",
        )
    lo, hi = n * rank // size, n * (rank + 1) // size
    gathered = gather_from_ranks(
        lambda: (
            _check_scores(sidekick.compute_scores(grids[lo:hi], T=T, device=device), hi - lo, who)
            if hi > lo
            else None
        ),
        device,
        f"scoring with {who}",
    )
    parts = [part for part in gathered if part is not None]
    names = list(parts[0])
    if any(list(part) != names for part in parts):
        raise ValueError(f"{who} returned different score names on different ranks")
    return {name: torch.cat([part[name] for part in parts]) for name in names}


# -- cache ---------------------------------------------------------------------------------


def score_cache_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """``<cache_dir>/scores``; by default under ``$PYSKICK_CACHE_DIR`` or ``~/.cache/pyskick``."""
    return (Path(cache_dir) if cache_dir is not None else cache_root()) / "scores"


def _read_entry(path: Path, key: str) -> dict[str, Tensor] | None:
    """A cache entry's scores, or None when it is missing or unreadable (then recomputed)."""
    if not path.is_file():
        return None
    try:
        return read_scores(path, CACHE_GROUP, key)
    except (OSError, ValueError, KeyError) as exc:
        _LOG.warning("ignoring unreadable score cache entry %s: %s", path, exc)
        return None


def cached_scores(
    sidekick: Scorer,
    grids: Tensor,
    *,
    T: int,
    device: torch.device,
    cache_dir: str | os.PathLike[str] | None = None,
) -> dict[str, Tensor]:
    """``sidekick``'s scores of ``grids``: read from the cache, or computed and cached.

    The entry is ``<cache>/scores/<score_key>.h5``. Rank 0 (the only process in a
    single-process run) looks it up holding ``<key>.lock``, so concurrent runs compute it
    once; on a miss every rank joins :func:`compute_scores_sharded` and rank 0 writes the
    entry; on a hit rank 0 reads it and broadcasts it.

    Args:
        sidekick: a sidekick with scores.
        grids: ``[n, N, M, C, H, W]`` uint8 viewgrids (CPU).
        T: the glimpse budget.
        device: where to compute on a miss.
        cache_dir: the cache root (default ``$PYSKICK_CACHE_DIR`` or ``~/.cache/pyskick``).

    Returns:
        name -> CPU tensor ``[n, ...]``.
    """
    key = score_key(sidekick, grids, T)
    folder = score_cache_dir(cache_dir)
    path = folder / f"{key}.h5"
    rank, _ = world()
    with contextlib.ExitStack() as stack:
        if rank == 0:
            folder.mkdir(parents=True, exist_ok=True)
            stack.enter_context(
                file_lock(
                    folder / f"{key}.lock",
                    f"waiting for another process to compute {sidekick.name} scores {path}",
                )
            )
        cached = broadcast_from_main(lambda: _read_entry(path, key), device, "score cache lookup")
        if cached is not None:
            if rank == 0:
                _LOG.info("reusing cached %s scores %s", sidekick.name, path)
            return _check_scores(cached, grids.shape[0], f"score cache entry {path}")
        if rank == 0:
            _LOG.info(
                "computing %s scores of %d viewgrids into %s", sidekick.name, grids.shape[0], path
            )
        scores = compute_scores_sharded(sidekick, grids, T=T, device=device)
        meta = ScoreMeta.of(sidekick, T, {CACHE_GROUP: key})
        broadcast_from_main(
            lambda: write_scores(path, {CACHE_GROUP: scores}, meta=meta), device, "score caching"
        )
        return scores
