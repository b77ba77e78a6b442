"""Power plans: which of the paper's claims a design can resolve, decided before its runs.

A claim judged on too few seeds for its effect is resolved on one set of seeds and not on the
next: its verdict does not replicate. A *power plan* says in advance which claims a design
(its settings and number of seeds) has the power to judge:

1. A **pilot**: ``pyskick reproduce --eval-split val`` with the design's settings, on seeds
   that the judged runs will not use (``--seed-offset``), one folder or several.
2. ``pyskick plan PILOT... --out plan.json`` (:func:`make_plan`): per claim, the pilot's
   per-seed gaps of its parts (:func:`~pyskick.experiments.claims.claim_seed_gaps`), and the
   seeds each claim needs for 90 % power (:func:`~pyskick.evaluation.power.joint_power`: the
   pilot's seeds as draws of a multivariate normal, every part's interval above zero).
3. ``reproduce --plan plan.json`` (or ``pool --plan``) judges the table's claims with it
   (:func:`apply_plan`): a claim with at least 90 % planned power at the table's seeds is
   judged by its intervals; an **under-powered** one is *not resolved at this budget*, with
   the seeds the plan says it needs, whatever its intervals say — unless they contradict it,
   which is never hidden. Its intervals are still shown, and say what they say.

So an under-powered claim is *not resolved* on every seed set (unless contradicted) instead of
holding on one and not on the next, and the claims a table judges are those with at least 90 %
power to be found again. The plan carries its pilot's uncertainty: a gap and spread estimated
from few seeds are uncertain (a d near 1 from 16 seeds by about ± 30 %), hence a pilot of at
least :data:`MIN_PILOT_SEEDS` seeds. The pilot must be on the validation split (a plan from
test-split runs would choose the design on the test split), and the plan applies only to
tables of the pilot's settings (the seeds, the dataset's file and the evaluation split aside).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pyskick._io import read_json_object, write_json
from pyskick.errors import UserError, UserFileNotFoundError
from pyskick.evaluation.power import (
    DEFAULT_ALPHA,
    DEFAULT_POWER,
    MAX_PLANNED_SEEDS,
    joint_power,
    seeds_for_joint_power,
)
from pyskick.experiments.claims import (
    CONTRADICTED,
    HOLDS,
    NOT_RESOLVED,
    Claim,
    claim_seed_gaps,
)
from pyskick.experiments.layout import eval_split_of

PLAN_FORMAT = "pyskick power plan"
PLAN_VERSION = 1
PLAN_FILE = "plan.json"
"""A reproduce folder's copy of the plan its table is judged with."""
MIN_PILOT_SEEDS = 4
"""The fewest pilot seeds a plan is made from: a spread from fewer says little."""
SHOWN_SEEDS = (4, 8, 12, 16, 20, 24, 32)
"""The seed counts ``pyskick plan`` prints the power of."""
_FREE = ("dataset", "dataset_sha256", "eval_split", "n_test", "pooled")
"""Settings a plan's pilot may differ in from the judged table: the data's file (a pilot on
another copy of the data is still a pilot) and the split and its size, which differ by design.
The rest — preset, epochs, pretraining, batch size, configs, sidekick options — is the design."""
_RESOLVED = "resolved_sidekick_options"
"""The setting known only once the runs are made: compared when the table is judged."""


@dataclass(frozen=True)
class PowerPlan:
    """A design's power plan (see the module docstring).

    Attributes:
        claims: per claim name, per part, the pilot's per-seed gaps in the claimed direction.
        seeds_needed: per claim, the seeds for ``target_power`` (None: more than
            :data:`MAX_PLANNED_SEEDS`).
        settings: the pilot's recorded settings (``reproduce.json``).
        pilot: where the pilot came from: ``folders``, ``seeds``, ``eval_split``.
        target_power: the power a judged claim needs (0.9).
        alpha: the level of the claims' intervals (0.05: 95 % intervals).
        digest: SHA-256 of the plan file's bytes (None for a plan not read from a file).
    """

    claims: dict[str, list[list[float]]]
    seeds_needed: dict[str, int | None]
    settings: dict[str, Any]
    pilot: dict[str, Any]
    target_power: float = DEFAULT_POWER
    alpha: float = DEFAULT_ALPHA
    digest: str | None = None

    def power(self, claim: str, seeds: int) -> float:
        """The planned power of ``claim`` judged on ``seeds`` seeds."""
        return joint_power(self.claims[claim], seeds, alpha=self.alpha)

    def to_json(self) -> dict[str, Any]:
        """The plan as written to its file (the per-part summaries are for readers)."""
        summary = {
            name: [{"mean": _mean(part), "sd": _sd(part)} for part in parts]
            for name, parts in self.claims.items()
        }
        return {
            "format": PLAN_FORMAT,
            "version": PLAN_VERSION,
            "target_power": self.target_power,
            "alpha": self.alpha,
            "pilot": self.pilot,
            "settings": self.settings,
            "seeds_needed": self.seeds_needed,
            "parts": summary,
            "seed_gaps": self.claims,
        }


def make_plan(table: Mapping[str, Any], folders: Sequence[str | Path]) -> PowerPlan:
    """The power plan of a pilot: ``table`` is its table (one folder's, or several pooled:
    :func:`pyskick.experiments.pool.plan_from_folders` does both), ``folders`` where it came
    from (recorded).

    Raises:
        ValueError: a pilot on the test split, without a claim of the paper, or of fewer than
            :data:`MIN_PILOT_SEEDS` seeds.
    """
    # Where the pilot's data lay says nothing about the design (and a plan travels).
    settings = {k: v for k, v in table["settings"].items() if k not in ("dataset", "pooled")}
    split = eval_split_of(settings)
    if split != "val":
        raise UserError(
            f"plan: the pilot {', '.join(str(f) for f in folders)} was evaluated on the "
            f"{split} split; a pilot runs on the validation split (reproduce --eval-split val), "
            "so that no design is chosen on the test split"
        )
    gaps = claim_seed_gaps(table)
    if not gaps:
        raise UserError("plan: the pilot has no claim of the paper to plan (its methods)")
    seeds = len(next(iter(gaps.values()))[0])
    if seeds < MIN_PILOT_SEEDS:
        raise UserError(
            f"plan: the pilot has {seeds} seeds; a plan needs at least {MIN_PILOT_SEEDS} "
            "(reproduce --seeds), and is surer with more"
        )
    needed = {
        name: seeds_for_joint_power(parts, max_seeds=MAX_PLANNED_SEEDS)
        for name, parts in gaps.items()
    }
    pilot = {"folders": [str(Path(f)) for f in folders], "seeds": seeds, "eval_split": split}
    return PowerPlan(gaps, needed, settings, pilot)


def write_plan(plan: PowerPlan, path: str | Path) -> PowerPlan:
    """Write ``plan`` to ``path`` (atomically); the plan with its file's digest."""
    path = Path(path)
    write_json(path, plan.to_json())
    return replace(plan, digest=_digest(path))


_PLAN_MAX_BYTES = 1 << 20
"""Larger files are not power plans (check_plan_out does not read them)."""


def check_plan_out(out: str | Path, folders: Sequence[str | Path]) -> None:
    """Refuse a plan file ``out`` that would replace something other than a plan, or a file
    inside one of the pilot ``folders`` (a folder's own plan copy, its record, its table).

    Raises:
        UserError: one line naming ``out`` and why; nothing is written.
    """
    out = Path(out)
    target = out.resolve()
    for folder in folders:
        if target.is_relative_to(Path(folder).resolve()):
            raise UserError(
                f"plan: --out {out} is inside the pilot folder {folder}; write the plan outside it"
            )
    if out.is_dir():
        raise UserError(f"plan: --out {out} is a folder; give the plan file's path")
    if out.exists():
        data: dict[str, Any] = {}
        # A plan is a few kB: a large file (a dataset, say) is not read to find that out.
        if out.stat().st_size <= _PLAN_MAX_BYTES:
            with contextlib.suppress(UserError):  # not JSON, not an object: not a plan
                data = read_json_object(out, "power plan")
        if data.get("format") != PLAN_FORMAT:
            raise UserError(
                f"plan: --out {out} exists and is not a power plan, which alone it may replace; "
                "choose another file"
            )


def read_plan(path: str | Path) -> PowerPlan:
    """A plan written by :func:`write_plan` (``pyskick plan``).

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a readable power plan (each defect named in one line).
    """
    path = Path(path)
    if not path.is_file():
        raise UserFileNotFoundError(f"power plan {path} does not exist")
    data = read_json_object(path, "power plan")
    if data.get("format") != PLAN_FORMAT or data.get("version") != PLAN_VERSION:
        raise UserError(
            f"{path} is not a power plan of this pyskick (format {data.get('format')!r} "
            f"version {data.get('version')!r}); make one with `pyskick plan`"
        )
    try:
        claims = {
            str(name): [[float(x) for x in part] for part in parts]
            for name, parts in data["seed_gaps"].items()
        }
        needed = {str(name): _seed_count(n) for name, n in data["seeds_needed"].items()}
        target, alpha = float(data["target_power"]), float(data["alpha"])
        settings, pilot = dict(data["settings"]), dict(data["pilot"])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UserError(f"power plan {path} is damaged ({exc!r})") from None
    for name, parts in claims.items():
        finite = all(math.isfinite(x) for part in parts for x in part)
        if not parts or len({len(p) for p in parts}) != 1 or len(parts[0]) < 2 or not finite:
            raise UserError(f"power plan {path}: claim {name!r} has no usable pilot gaps")
    if set(needed) != set(claims) or not (0 < target < 1 and 0 < alpha < 1):
        raise UserError(f"power plan {path} is damaged (its claims or levels disagree)")
    return PowerPlan(claims, needed, settings, pilot, target, alpha, _digest(path))


def _seed_count(value: object) -> int | None:
    """A plan's recorded seeds needed: None or an int of at least 2."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise ValueError(f"seeds needed {value!r}")
    return value


def folder_plan(folder: Path, plan: PowerPlan | None, *, drop: bool = False) -> None:
    """Record in ``folder`` the plan its table was judged with: ``plan`` is copied there
    (:data:`PLAN_FILE`), so that later calls keep judging with it; with ``drop`` the folder's
    copy is removed (judged without a plan); else the copy stays as it is."""
    copy = folder / PLAN_FILE
    if plan is not None:
        write_plan(plan, copy)
    elif drop:
        copy.unlink(missing_ok=True)


def shared_plan(folders: Sequence[Path]) -> PowerPlan | None:
    """The plan every one of ``folders`` holds, byte for byte (pooled folders of one design
    judged with one plan); None when one has none or they differ."""
    copies = [folder / PLAN_FILE for folder in folders]
    if not all(copy.is_file() for copy in copies):
        return None
    if len({copy.read_bytes() for copy in copies}) != 1:
        return None
    return read_plan(copies[0])


def plan_mismatch(
    plan: PowerPlan, settings: Mapping[str, Any], *, include_resolved: bool = False
) -> list[str]:
    """The design settings in which ``settings`` differ from the plan's pilot (sorted). With
    ``include_resolved``, also the options the sidekicks resolved (they exist once the runs
    do), compared for the sidekicks both trained: a table of fewer methods is of the design."""
    keys = set(plan.settings) | set(settings)
    different = [
        k for k in keys if k not in (*_FREE, _RESOLVED) and plan.settings.get(k) != settings.get(k)
    ]
    if include_resolved:
        mine, theirs = plan.settings.get(_RESOLVED) or {}, settings.get(_RESOLVED) or {}
        if any(mine[name] != theirs[name] for name in set(mine) & set(theirs)):
            different.append(_RESOLVED)
    return sorted(different)


def apply_plan(claims: Sequence[Claim], table: Mapping[str, Any], plan: PowerPlan) -> list[Claim]:
    """``claims`` judged with ``plan`` at the table's seeds (see the module docstring): each
    claim of the plan gets its planned power; an under-powered one (fewer seeds than the plan
    says it needs; one seed always is) that its intervals do not contradict is *not resolved*
    at this budget. Claims the plan does not know (a plugin's sidekick) are judged by their
    intervals alone, and say so; so is every claim of a table of other settings than the
    pilot's, which says why."""
    different = plan_mismatch(plan, table["settings"], include_resolved=True)
    gaps = claim_seed_gaps(table)
    judged = []
    for claim in claims:
        if different:
            note = (
                f"power plan not applied: this table differs from its pilot in "
                f"{', '.join(different)}; judged by its intervals alone"
            )
            judged.append(replace(claim, notes=[*claim.notes, note]))
            continue
        if claim.name not in plan.claims:
            note = "not in the power plan: judged by its intervals alone"
            judged.append(replace(claim, notes=[*claim.notes, note]))
            continue
        # A claim of the plan without per-seed gaps here is of one seed: no power at all.
        seeds = len(gaps[claim.name][0]) if claim.name in gaps else 1
        power = plan.power(claim.name, seeds) if seeds > 1 else 0.0
        needed = plan.seeds_needed[claim.name]
        # "Needs N seeds" decides (the simulated power at N - 1 and N straddles the target).
        under = needed is None or seeds < needed
        verdict = NOT_RESOLVED if under and claim.verdict != CONTRADICTED else claim.verdict
        need = f"≈ {needed}" if needed is not None else f"more than {MAX_PLANNED_SEEDS}"
        note = (
            f"power plan ({plan.pilot['seeds']} pilot seeds on {plan.pilot['eval_split']}): "
            f"{power:.0%} at {seeds} seed{'s' if seeds > 1 else ''}; "
            f"{plan.target_power:.0%} needs {need} seeds"
        )
        if under and verdict != claim.verdict:
            note += (
                f"; under-powered at this budget, so not judged: its intervals alone say "
                f"{claim.verdict}"
            )
        elif under:
            note += f"; under-powered at this budget, and its intervals say {claim.verdict}"
        judged.append(
            replace(
                claim,
                verdict=verdict,
                holds=verdict == HOLDS,
                notes=[*claim.notes, note],
                planned_power=power,
                plan_seeds_needed=needed,
                under_powered=under,
                interval_verdict=claim.verdict,
            )
        )
    return judged


def plan_record(plan: PowerPlan, settings: Mapping[str, Any]) -> dict[str, Any]:
    """What a table records of the plan it was judged with (``table.json`` ``plan``)."""
    different = plan_mismatch(plan, settings, include_resolved=True)
    return {
        "file": PLAN_FILE,
        "sha256": plan.digest,
        "pilot": plan.pilot,
        "target_power": plan.target_power,
        "applied": not different,
        "differs_in": different,
        # Not a design setting (a copy of the data may differ in its file's bytes), but said.
        "same_data": plan.settings.get("dataset_sha256") == settings.get("dataset_sha256"),
    }


def plan_lines(plan: PowerPlan, seeds: Sequence[int] = SHOWN_SEEDS) -> list[str]:
    """The plan as a Markdown table: per claim, its parts' pilot mean and sd, its power at
    ``seeds`` seeds and the seeds it needs."""
    lines = [
        "| claim | parts: mean, sd (pilot) | "
        + " | ".join(f"{n} seeds" for n in seeds)
        + f" | {plan.target_power:.0%} needs |",
        "|---" * (len(seeds) + 3) + "|",
    ]
    for name, parts in plan.claims.items():
        shown = "; ".join(f"{_mean(p):+.2f}, {_sd(p):.2f}" for p in parts)
        powers = " | ".join(f"{plan.power(name, n):.2f}" for n in seeds)
        needed = plan.seeds_needed[name]
        need = str(needed) if needed is not None else f"> {MAX_PLANNED_SEEDS}"
        lines.append(f"| {name} | {shown} | {powers} | {need} |")
    return lines


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _sd(values: Sequence[float]) -> float:
    mean = _mean(values)
    return math.sqrt(sum((x - mean) ** 2 for x in values) / (len(values) - 1))


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
