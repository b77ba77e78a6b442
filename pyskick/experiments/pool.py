"""``pyskick pool``: one table over the seeds of several reproduce folders.

A claim that is not resolved needs more seeds (its verdict says how many). They can be run
later, into the same folder (``reproduce --seed-offset K``) or into another one — on another
machine, where CPU runs differ anyway (docs/reproduce.md, "Determinism") — and judged together:
:func:`pool` builds the table (paired gaps, verdicts, learning speed) over every seed of the
folders, seed j of each method still paired with seed j of the others (the same folder and
seed index).

The folders must share every recorded setting (the dataset by content, the preset, the epochs,
the configs, the sidekick options, the evaluation split); the dataset's path may differ. Their
seed indices must not overlap: seed index k trains with the same data order and starts
wherever it runs, so a seed counted twice would fake a replication. The one-view row is the
first folder's run (it is trained once per folder and no claim rests on it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyskick._io import check_writable_folder, read_json_object
from pyskick.errors import UserError
from pyskick.experiments.claims import row_role
from pyskick.experiments.layout import SETTINGS_FILE
from pyskick.experiments.power_plan import (
    PowerPlan,
    folder_plan,
    make_plan,
    plan_mismatch,
    read_plan,
    shared_plan,
)
from pyskick.experiments.selection import ONE_VIEW
from pyskick.experiments.table import build_table, write_table

TABLE_FILE = "table.json"
# Recorded settings that may differ between pooled folders: where the dataset file lives (its
# content is compared) and the options a sidekick resolved (compared through the others).
_FREE = ("dataset", "resolved_sidekick_options")


def pool(
    folders: Sequence[str | Path], out: str | Path, plan: str | Path | None = None
) -> dict[str, Any]:
    """Build the table over the seeds of ``folders`` and write ``table.md``/``table.json``
    into ``out`` (created; a folder an earlier pool wrote is rewritten, any other non-empty
    folder refused).

    Args:
        folders: reproduce folders, each with its ``reproduce.json`` and ``table.json``.
        out: the folder of the pooled table (not one of ``folders``).
        plan: a power plan file to judge the claims with (:mod:`pyskick.experiments.
            power_plan`), copied into ``out``; None: the plan every folder holds, if they
            hold the same one (none otherwise).

    Returns:
        The table; its ``settings`` say which folders it pools, and ``seed_runs`` each seed.

    Raises:
        ValueError: fewer than two folders, a folder that is not a finished reproduce folder,
            settings that differ, overlapping seeds, no method common to all, a plan made
            for other settings; nothing is written then.
    """
    paths = [Path(folder) for folder in folders]
    if len(paths) < 2:
        raise UserError("pool needs at least two reproduce folders")
    out = Path(out)
    if out.resolve() in {p.resolve() for p in paths}:
        raise UserError(f"pool: --out {out} is one of the pooled folders; choose a new folder")
    check_writable_folder(out)
    if (out / SETTINGS_FILE).exists():
        raise UserError(f"pool: --out {out} is a reproduce folder; choose a new folder")
    if out.is_dir() and any(out.iterdir()) and not _is_pool_folder(out):
        # Its plan.json (a plan the user made, say) would be replaced or removed, its files
        # mixed with the table's: only an earlier pool's folder is rewritten.
        raise UserError(
            f"pool: --out {out} is not empty and holds no pooled table; choose a new folder"
        )
    given = None if plan is None else read_plan(plan)
    judged_with = given if given is not None else shared_plan(paths)
    table = pooled_table(paths, plan=judged_with)
    different = [] if given is None else plan_mismatch(given, table["settings"])
    if different:  # the folders' settings, checked by pooled_table; nothing written yet
        raise UserError(
            f"pool: power plan {plan} was made for other settings ({', '.join(different)})"
        )
    out.mkdir(parents=True, exist_ok=True)
    # The table first (its table.json before its table.md): a pool stopped before its
    # table.json leaves only what the next pool recognises as its own (_is_pool_folder).
    write_table(out, table)
    folder_plan(out, judged_with, drop=judged_with is None)
    return table


def _is_pool_folder(folder: Path) -> bool:
    """Whether ``folder`` holds a table :func:`pool` wrote (its settings name the pooled
    folders), or only what a pool stopped before its ``table.json`` leaves (that file's
    temporaries: the table's record is written first)."""
    if all(p.name.startswith(".table.json.tmp-") for p in folder.iterdir()):
        return True
    try:
        table = json.loads((folder / "table.json").read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    settings = table.get("settings") if isinstance(table, dict) else None
    return isinstance(settings, dict) and "pooled" in settings


def pooled_table(
    folders: Sequence[str | Path], what: str = "pool", plan: PowerPlan | None = None
) -> dict[str, Any]:
    """The table over the seeds of ``folders`` (one or more), written nowhere: what
    :func:`pool` writes (its claims judged with ``plan``), and what a power plan
    (:mod:`pyskick.experiments.power_plan`) is made from. ``what`` names the command in the
    errors.

    Raises:
        ValueError: as :func:`pool` (a single folder's own table is returned as it is).
    """
    paths = [Path(folder) for folder in folders]
    if len({p.resolve() for p in paths}) < len(paths):
        raise UserError(f"{what}: a folder is named twice")
    records = [_read(path, what) for path in paths]
    if len(paths) == 1:
        return records[0][1]
    first_settings = records[0][0]
    for path, (settings, _) in zip(paths[1:], records[1:], strict=True):
        different = sorted(
            key
            for key in set(first_settings) | set(settings)
            if key not in _FREE and first_settings.get(key) != settings.get(key)
        )
        if different:
            raise UserError(
                f"{what}: {path} was run with other settings than {paths[0]} "
                f"({', '.join(different)}); only folders of the same settings pool"
            )
    seen: dict[int, Path] = {}
    runs: list[tuple[Path, int]] = []
    for path, (_, table) in zip(paths, records, strict=True):
        for k in _seed_indices(table):
            if k in seen:
                raise UserError(
                    f"{what}: {seen[k]} and {path} both hold seed {k}; pool disjoint seeds "
                    "(reproduce --seed-offset)"
                )
            seen[k] = path
            runs.append((path, k))
    methods = [row["method"] for row in records[0][1]["rows"]]
    for _, table in records[1:]:
        present = {row["method"] for row in table["rows"]}
        methods = [m for m in methods if m in present]
    if ONE_VIEW not in methods or len(methods) < 2:
        raise UserError(f"{what}: the folders have no trained method in common")
    roles = {row["method"]: row_role(row) for row in records[0][1]["rows"]}
    settings = {
        **first_settings,
        "pooled": [str(p) for p in paths],
    }
    table = build_table(paths[0], methods, runs=runs, settings=settings, roles=roles, plan=plan)
    # Written into another folder than the first: every seed's folder by its absolute path.
    table["seed_runs"] = [[str(folder.resolve()), k] for folder, k in runs]
    return table


def plan_from_folders(folders: Sequence[str | Path]) -> PowerPlan:
    """The power plan (:func:`~pyskick.experiments.power_plan.make_plan`) of the pilot
    ``folders``: finished reproduce folders of one design on the validation split, pooled as
    :func:`pool` pools them when there are several (``pyskick plan``).

    Raises:
        ValueError: no folder, a folder that is not a finished reproduce folder, folders of
            other settings or overlapping seeds, or a pilot :func:`make_plan` refuses.
    """
    if not folders:
        raise UserError("plan needs at least one pilot folder")
    return make_plan(pooled_table(folders, what="plan"), folders)


def _read(folder: Path, what: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A finished reproduce folder's settings and table."""
    settings_path, table_path = folder / SETTINGS_FILE, folder / TABLE_FILE
    if not settings_path.is_file() or not table_path.is_file():
        raise UserError(
            f"{what}: {folder} is not a finished reproduce folder (no {SETTINGS_FILE} and "
            f"{TABLE_FILE})"
        )
    try:
        return (
            read_json_object(settings_path, "reproduce settings record"),
            read_json_object(table_path, "Table 1 record"),
        )
    except OSError as exc:
        raise UserError(f"{what}: cannot read {folder}'s records: {exc}") from None


def _seed_indices(table: dict[str, Any]) -> list[int]:
    """The seed indices a folder's table is of (tables before ``seed_runs``: 0..K-1)."""
    if "seed_runs" in table:
        if any(folder != "." for folder, _ in table["seed_runs"]):
            raise UserError("a pooled table cannot be pooled again; pool its folders")
        return [int(k) for _, k in table["seed_runs"]]
    trained = [row["seeds"] for row in table["rows"] if row["method"] != ONE_VIEW]
    return list(range(trained[0] if trained else 0))
