"""``pyskick export``: a training run as a self-contained, shareable model folder.

The folder (docs/data-formats.md, "Exported models") holds the policy's weights as
safetensors, the run's ``config.json`` with its model's architecture, the training data's
geometry, channel mean and SHA-256 (``dataset.json``), the provenance
(``pyskick-export.json``, which marks the folder) and a model card (``README.md``) generated
from them by :func:`model_card`. :func:`pyskick.run_dir.load_policy` loads it without
unpickling anything, so every command that takes a run folder takes an export.

The card's numbers come from evaluations of the exported checkpoint only: ``pyskick
evaluate RUN`` records them in ``RUN/eval/``, ``pyskick reproduce`` in its ``eval/`` folder;
an evaluation of another (earlier) ``best.pt`` is left out, and without any the card says
"not evaluated".
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pyskick import __version__
from pyskick._io import (
    check_writable_folder,
    disk_full_error,
    publish,
    remove_stale_temporaries,
    temporary_path,
)
from pyskick.checkpoint import (
    EXPORT_FORMAT,
    EXPORT_MARKER,
    EXPORT_WEIGHTS,
    RUN_KEYS,
    is_export,
    load_checkpoint,
    read_run,
    save_weights,
)
from pyskick.config import RUNTIME_FIELDS, TRAIN_ONLY_FIELDS, TRAIN_PRESETS, TrainConfig
from pyskick.errors import UserError, UserFileNotFoundError
from pyskick.files import file_digest
from pyskick.run_dir import BEST, LATEST, RunDir

CARD = "README.md"
"""The model card's file name."""

# pyskick pretrain/train options that set a TrainConfig field (pretrain's --epochs sets
# pretrain_epochs); every other field that differs from the preset goes in a --config file.
_PRETRAIN_FLAGS = {
    "pretrain_epochs": "--epochs",
    "batch_size": "--batch-size",
    "lr": "--lr",
    "seed": "--seed",
}
_TRAIN_FLAGS = {
    "epochs": "--epochs",
    "batch_size": "--batch-size",
    "lr": "--lr",
    "seed": "--seed",
    "T": "-T",
    "critic": "--critic",
    "actor": "--actor",
    "sidekick": "--sidekick",
}
_RUN_EVAL = re.compile(r"(?P<split>.+)-(?P<metric>[^-]+)-[0-9a-f]{12}")
_REPRODUCE_SEED = re.compile(r"seed-(\d+)")


def export_run(
    run: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    dataset: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
) -> Path:
    """Export the ``best.pt`` of a run folder to the folder ``out``.

    Everything is checked before anything is written; the folder is written under a temporary
    name beside ``out`` and renamed into place, so ``out`` is either complete or absent (or,
    with ``overwrite``, still the previous export).

    Args:
        run: a training run's folder.
        out: the export folder to create.
        dataset: the data file the run was trained on, where it no longer lies at the path
            ``RUN/dataset.json`` records (its SHA-256 must be the recorded one).
        overwrite: replace an existing export folder at ``out``.

    Returns:
        ``out``.

    Raises:
        FileNotFoundError: no such run, or no ``best.pt``.
        ValueError: not a run folder, no or another data file, or an ``out`` in the way.
    """
    run, out = Path(run), Path(out)
    _check_out(run, out, overwrite=overwrite)
    # The digest of the bytes exported (a best.pt replaced meanwhile is not named for them).
    _, state, checkpoint_sha256 = read_run(run, keys=RUN_KEYS)
    data_path, sha256 = _training_data(run, dataset)
    from pyskick.data import ViewgridFile

    spec = ViewgridFile(data_path).spec
    recorded_path = (RunDir(run).dataset_record() or {})["path"]
    config = TrainConfig.from_dict(state["config"])
    stage = str(state["stage"])
    latest = run / LATEST
    last = load_checkpoint(latest) if latest.is_file() else state
    files: dict[str, Any] = {
        "config.json": {"stage": stage, **config.to_dict(), "model_config": state["model_config"]},
        "dataset.json": {
            "path": recorded_path,
            "name": Path(recorded_path).name,
            "sha256": sha256,
            "spec": dataclasses.asdict(spec),
        },
    }
    remove_stale_temporaries(out)  # of exports killed before they finished
    tmp = temporary_path(out)
    tmp.mkdir(parents=True)
    try:
        save_weights(tmp / EXPORT_WEIGHTS, state["model"])
        files[EXPORT_MARKER] = {
            "format": EXPORT_FORMAT,
            "pyskick_version": __version__,
            "weights": EXPORT_WEIGHTS,
            "weights_sha256": file_digest(tmp / EXPORT_WEIGHTS),
            # Of the files exactly as written below, checked when the export is loaded.
            "config_sha256": _text_digest(files["config.json"]),
            "dataset_sha256": _text_digest(files["dataset.json"]),
            "checkpoint_sha256": checkpoint_sha256,
            "stage": stage,
            "method": method_name(stage, config),
            "best_epoch": int(state["epoch"]) + 1,
            "epochs_trained": int(last["epoch"]) + 1,
            "best_val": float(state["best_val"]),
            "evaluations": run_evaluations(run, checkpoint_sha256),
        }
        for name, payload in files.items():
            (tmp / name).write_text(_json_text(payload))
        card = model_card(files[EXPORT_MARKER], files["config.json"], files["dataset.json"])
        (tmp / CARD).write_text(card)
        # Without --overwrite, never over an export another process finished meanwhile.
        publish(tmp, out, exclusive=not overwrite)
    except BaseException as exc:
        full = disk_full_error(exc, out, tmp)
        shutil.rmtree(tmp, ignore_errors=True)
        if full is not None:
            raise full from exc
        raise
    return out


def _check_out(run: Path, out: Path, *, overwrite: bool) -> None:
    """Refuse an ``out`` that exists (without ``overwrite``), that is no export folder to
    replace, that holds the run, or that cannot be written."""
    if not run.is_dir():
        raise UserFileNotFoundError(f"{run} is not a run folder")
    if is_export(run):
        raise UserError(f"{run} is an export already, not a run folder")
    if not (run / BEST).is_file():
        raise UserFileNotFoundError(f"{run} has no {BEST} (no epoch finished yet?)")
    if out.resolve() == run.resolve() or run.resolve().is_relative_to(out.resolve()):
        raise UserError(f"{out} holds the run {run}; choose another --out")
    if out.exists() or out.is_symlink():
        if not overwrite:
            raise UserError(f"{out} already exists; pass --overwrite to replace it")
        if not out.is_dir() or out.is_symlink() or not (is_export(out) or not any(out.iterdir())):
            raise UserError(
                f"{out} is not an export folder; --overwrite replaces only an export or an "
                "empty folder"
            )
    check_writable_folder(out.parent)


def _training_data(run: Path, dataset: str | os.PathLike[str] | None) -> tuple[Path, str]:
    """The data file the run was trained on and its SHA-256 (checked against the record)."""
    record = RunDir(run).dataset_record()
    if record is None:
        raise UserError(f"{run} does not record the data it was trained on (no dataset.json)")
    path = Path(record["path"]) if dataset is None else Path(dataset)
    if not path.is_file():
        raise UserFileNotFoundError(
            f"{run} was trained on {record['path']}, which is not here; pass --dataset with a "
            f"copy (SHA-256 {record['sha256']})"
        )
    if file_digest(path) != record["sha256"]:
        raise UserError(f"{path} is not the data {run} was trained on (SHA-256 {record['sha256']})")
    return path, record["sha256"]


def method_name(stage: str, config: TrainConfig) -> str:
    """The Table 1 row a run trained: ``one-view`` for a pretrained model, else the
    registered method with the run's actor, critic, sidekick and fixed sidekick options
    (``""`` when none matches)."""
    from pyskick.experiments.selection import ONE_VIEW, registered_methods

    if stage == "pretrain":
        return ONE_VIEW
    for method in registered_methods():
        if (
            method.trained
            and (method.actor, method.critic, method.sidekick)
            == (config.actor, config.critic, config.sidekick)
            and all(
                str(config.sidekick_options.get(key)) == str(value)
                for key, value in method.sidekick_options.items()
            )
        ):
            return method.name
    return ""


def run_evaluations(run: Path, checkpoint_sha256: str) -> list[dict[str, Any]]:
    """The summaries of every evaluation of the checkpoint ``checkpoint_sha256``: those
    ``pyskick evaluate`` recorded in ``RUN/eval/`` and, for a run of a ``pyskick reproduce``
    folder, those it recorded in the folder's ``eval/``; sorted by split and metric."""
    found: list[dict[str, Any]] = []
    for path in sorted((run / "eval").glob("*.npz")):
        match = _RUN_EVAL.fullmatch(path.stem)
        scalars = _npz_scalars(path)
        if match and scalars.get("checkpoint_sha256") == checkpoint_sha256:
            found.append(_summary(match["split"], scalars))
    found += _reproduce_evaluations(run, checkpoint_sha256)
    unique = {(e["split"], e["metric"], e["samples_sha256"], e["actor"]): e for e in found}
    return [unique[key] for key in sorted(unique)]


def _reproduce_evaluations(run: Path, checkpoint_sha256: str) -> list[dict[str, Any]]:
    """Evaluations ``pyskick reproduce`` recorded of ``run`` (a run of its output folder)."""
    from pyskick.experiments.layout import SETTINGS_FILE, eval_path, eval_split_of
    from pyskick.experiments.selection import ONE_VIEW

    run = run.resolve()
    seed = _REPRODUCE_SEED.fullmatch(run.name)
    if seed and (run.parent.parent / SETTINGS_FILE).is_file():
        folder, method, k = run.parent.parent, run.parent.name, int(seed[1])
    elif run.name == ONE_VIEW and (run.parent / SETTINGS_FILE).is_file():
        folder, method, k = run.parent, ONE_VIEW, 0
    else:
        return []
    try:
        settings = json.loads((folder / SETTINGS_FILE).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return []
    split = eval_split_of(settings)
    found = []
    for path in sorted((folder / "eval").glob(f"{method}-seed{k}-*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue
        expected = eval_path(folder, method, k, str(record.get("metric")))
        if path == expected and record.get("checkpoint_sha256") == checkpoint_sha256:
            found.append(_summary(split, record))
    return found


def _npz_scalars(path: Path) -> dict[str, Any]:
    """The scalar entries of an evaluation ``.npz`` (an unreadable file has none)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key].item() for key in data.files if data[key].ndim == 0}
    except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile):
        return {}


def _summary(split: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """What the card shows of one evaluation."""
    return {
        "split": split,
        "metric": str(record.get("metric")),
        "actor": str(record.get("actor")),
        "T": int(record.get("T", 0)),
        "n_samples": int(record.get("n_samples", 0)),
        "mean_x1000": float(record.get("mean_x1000", float("nan"))),
        "stderr_x1000": float(record.get("stderr_x1000", float("nan"))),
        "samples_sha256": str(record.get("samples_sha256")),
    }


# ---- the model card -------------------------------------------------------------------------


def training_command(config: Mapping[str, Any], data_name: str) -> tuple[str, dict[str, Any]]:
    """The command that trains a run with this ``config.json`` again, and the fields it
    needs in a ``--config`` TOML file (those that differ from the preset and have no option).

    The preset is the one the config differs from in the fewest fields (the first of
    :data:`~pyskick.config.TRAIN_PRESETS` on a tie): ``config.json`` records the fields,
    not the preset they came from.
    """
    stage = config["stage"]
    fields = TrainConfig.from_dict(_train_fields(config)).to_dict()

    def changed(name: str) -> list[str]:
        # Runtime fields (the device, batch sizes of evaluation, ...) say where and how fast
        # the run computed, not what: the recipe leaves them to the machine that runs it.
        base = TRAIN_PRESETS[name].to_dict()
        return [
            key
            for key in fields
            if key != "sidekick_options" and key not in RUNTIME_FIELDS and fields[key] != base[key]
        ]

    preset = min(TRAIN_PRESETS, key=lambda name: len(changed(name)))
    flags = _PRETRAIN_FLAGS if stage == "pretrain" else _TRAIN_FLAGS
    words = ["pyskick", stage, "--dataset", data_name, "--preset", preset]
    toml: dict[str, Any] = {}
    for key in changed(preset):
        if key in flags:
            words += [flags[key], str(fields[key])]
        elif stage == "train" or key not in TRAIN_ONLY_FIELDS:
            toml[key] = fields[key]
    if stage == "train":
        for key, value in sorted(fields["sidekick_options"].items()):
            words += ["--sidekick-option", f"{key}={_option_text(value)}"]
    if toml:
        words += ["--config", "config.toml"]
    if stage == "train":
        words += ["--init", "ONE_VIEW_RUN"]
    words += ["--out", "RUN"]
    return " ".join(words), toml


def _train_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k not in ("stage", "model_config", "loggers")}


def _option_text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


CARD_POLICY_RECIPE = (
    "import json",
    "from pathlib import Path",
    "from safetensors.torch import load_file",
    "from pyskick.models import CompletionPolicy, ModelConfig",
    "",
    'config = json.loads(Path("config.json").read_text())',
    'policy = CompletionPolicy(ModelConfig.from_dict(config["model_config"]))',
    'policy.load_state_dict(load_file("model.safetensors"))',
    "policy.eval()",
)
"""The model card's recipe that loads an export's weights into pyskick's policy (run by the
tests in an export folder)."""

CARD_TORCH_RECIPE = (
    "import json, struct",
    "from pathlib import Path",
    "import torch",
    "",
    "DTYPES = {'F32': torch.float32, 'F16': torch.float16, 'BF16': torch.bfloat16,",
    "          'I64': torch.int64, 'I32': torch.int32, 'U8': torch.uint8, 'BOOL': torch.bool}",
    "",
    "def read_safetensors(path):",
    "    data = Path(path).read_bytes()",
    "    (n,) = struct.unpack('<Q', data[:8])",
    "    header = json.loads(data[8 : 8 + n])",
    "    header.pop('__metadata__', None)",
    "    body = bytearray(data[8 + n :])",
    "    tensors = {}",
    "    for name, info in header.items():",
    "        start, end = info['data_offsets']",
    "        dtype = DTYPES[info['dtype']]",
    "        flat = torch.frombuffer(body, dtype=dtype, count=(end - start) // dtype.itemsize,",
    "                                offset=start) if end > start else torch.empty(0, dtype=dtype)",
    "        tensors[name] = flat.reshape(info['shape']).clone()",
    "    return tensors",
    "",
    "weights = read_safetensors('model.safetensors')  # name -> tensor",
    "architecture = json.loads(Path('config.json').read_text())['model_config']",
)
"""The model card's recipe that reads an export's tensors and architecture with torch alone
(the tests run it where neither pyskick nor safetensors can be imported)."""


def model_card(
    marker: Mapping[str, Any], config: Mapping[str, Any], dataset: Mapping[str, Any]
) -> str:
    """The ``README.md`` of an export: Markdown made from its three JSON files only, so the
    same export always has the same card.

    Args:
        marker: ``pyskick-export.json``.
        config: ``config.json``.
        dataset: ``dataset.json``.
    """
    stage = marker["stage"]
    method = marker["method"] or "a method no registered Table 1 row names"
    spec = dataset["spec"]
    command, toml = training_command(config, dataset["name"])
    if stage == "pretrain":
        what = "the one-view model (pretrained: one glimpse, T = 1)"
    else:
        options = ", ".join(f"{k}={_option_text(v)}" for k, v in config["sidekick_options"].items())
        what = (
            f"a look-around policy, T = {config['T']} glimpses: actor `{config['actor']}`, "
            f"critic `{config['critic']}`, sidekick `{config['sidekick']}`"
            + (f" ({options})" if options else "")
        )
    lines = [
        f"# pyskick model: {method}",
        "",
        f"Exported by pyskick {marker['pyskick_version']} from a `{stage}` run: {what}.",
        "Sidekick policy learning for active visual exploration (Ramakrishnan & Grauman, "
        "ECCV 2018).",
        "",
        "## Method",
        "",
        f"- Table 1 row: `{method}`" if marker["method"] else f"- Table 1 row: {method}",
        f"- Stage: `{stage}`; model preset `{config['model']}`",
        "",
        "## Data",
        "",
        f"- Trained on `{dataset['name']}`, SHA-256 `{dataset['sha256']}`",
        f"- Geometry: {spec['n_elevations']} x {spec['n_azimuths']} views of "
        f"{spec['channels']} x {spec['view_size']} x {spec['view_size']} pixels "
        f"(preset `{spec['preset']}`), field of view {spec['fov_deg']:g} deg",
        f"- Elevations (deg): {', '.join(f'{v:g}' for v in spec['elevations_deg'])}",
        f"- Azimuths (deg): {', '.join(f'{v:g}' for v in spec['azimuths_deg'])}",
        f"- Channel mean (0-255): {', '.join(f'{v:g}' for v in spec['channel_mean'])}",
        "",
        "## Training",
        "",
        "The command, reconstructed from `config.json` (the fields that differ from the "
        "nearest preset):",
        "",
        "```",
        command,
        "```",
        "",
    ]
    if toml:
        lines += [
            "with `config.toml`:",
            "",
            "```toml",
            *(f"{key} = {json.dumps(value)}" for key, value in toml.items()),
            "```",
            "",
        ]
    lines += [
        f"- Seed: {config['seed']}",
        f"- Epochs: {marker['epochs_trained']} trained of "
        f"{config['pretrain_epochs' if stage == 'pretrain' else 'epochs']}; these weights are "
        f"the best of epoch {marker['best_epoch']} (validation {config['val_metric']} error "
        f"x1000: {marker['best_val'] * 1000:.2f})",
        "",
        "## Evaluation",
        "",
    ]
    evaluations = marker["evaluations"]
    if not evaluations:
        lines += [
            "Not evaluated: the run recorded no evaluation of these weights "
            "(`pyskick evaluate RUN` records one).",
            "",
        ]
    else:
        lines += [
            "Final-step reconstruction error x1000 (mean and standard error over samples):",
            "",
            "| split | metric | samples | T | actor | error x1000 | SE x1000 |",
            "|---|---|---|---|---|---|---|",
            *(
                f"| {e['split']} | {e['metric']} | {e['n_samples']} | {e['T']} | {e['actor']} "
                f"| {e['mean_x1000']:.2f} | {e['stderr_x1000']:.2f} |"
                for e in evaluations
            ),
            "",
        ]
    lines += [
        "## Use",
        "",
        "```",
        "pyskick evaluate THIS_FOLDER --dataset DATA",
        "pyskick visualize THIS_FOLDER --dataset DATA --out FIGURES",
        "```",
        "",
        "In Python, `pyskick.run_dir.load_policy(THIS_FOLDER)` returns the policy, its config "
        "and the data's geometry; nothing is unpickled.",
        "",
        f"pyskick is not on PyPI: install pyskick {marker['pyskick_version']} from a clone of "
        "its repository (`pip install ./pyskick`) or from a wheel built there "
        "(`pip wheel ./pyskick`, then `pip install pyskick-*.whl`). The weights load into its "
        "`CompletionPolicy` by hand as well:",
        "",
        "```python",
        *CARD_POLICY_RECIPE,
        "```",
        "",
        "Without pyskick, torch alone reads the tensors and the architecture (safetensors is a "
        "JSON header and raw little-endian arrays):",
        "",
        "```python",
        *CARD_TORCH_RECIPE,
        "```",
        "",
        "## Files",
        "",
        f"- `{marker['weights']}`: the policy's weights (safetensors), SHA-256 "
        f"`{marker['weights_sha256']}`",
        "- `config.json`: the run's training config and the model's architecture",
        "- `dataset.json`: the training data's file name, SHA-256, geometry and channel mean",
        f"- `{EXPORT_MARKER}`: export format {marker['format']}, provenance and evaluations",
        "",
    ]
    return "\n".join(lines)


def _json_text(payload: dict[str, Any]) -> str:
    """An export's JSON file, as written."""
    return json.dumps(payload, indent=2) + "\n"


def _text_digest(payload: dict[str, Any]) -> str:
    """SHA-256 of the JSON file ``payload`` is written as."""
    return hashlib.sha256(_json_text(payload).encode()).hexdigest()
