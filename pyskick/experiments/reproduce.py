"""The paper's Table 1 on one dataset, end to end and resumable (docs/paper-reference.md §6).

:func:`reproduce` pretrains the one-view model, trains every selected method for every seed
from it, evaluates each run on the test split with the avg and adv metrics and writes the table
and the report. Layout of the output folder::

    reproduce.json                 settings (a rerun must agree with them)
    timings.jsonl                  seconds spent per stage, one record per stage run
    one-view/                      the pretrained run
    <method>/seed-<k>/             the runs
    eval/<method>-seed<k>-<metric>.json/.npz   evaluations (EvalResult.save)
    table.md, table.json           the table (see :mod:`pyskick.experiments.report`)
    curves.png, figures/, index.html

A rerun skips what is finished: runs whose ``latest.pt`` reached the epochs, evaluations whose
recorded ``best.pt`` digest is the run's current one. An interrupted run continues from its
``latest.pt``. More ``epochs`` than before extend the runs (evaluations of a run whose
``best.pt`` changed are redone); any other change of the recorded settings is refused.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pyskick import progress
from pyskick._io import read_json_object, write_json
from pyskick.config import RUNTIME_FIELDS, paper_preset
from pyskick.errors import UserError, UserFileNotFoundError
from pyskick.evaluation.evaluate import EvalResult
from pyskick.experiments.layout import (
    SETTINGS_FILE,
    TIMINGS_FILE,
    eval_path,
    run_dir,
)
from pyskick.experiments.power_plan import (
    PLAN_FILE,
    PowerPlan,
    folder_plan,
    plan_mismatch,
    read_plan,
)
from pyskick.experiments.report import write_report
from pyskick.experiments.selection import (
    ONE_VIEW,
    Method,
    check_available,
    method_sidekick_options,
    select_methods,
)
from pyskick.experiments.table import build_table, write_table
from pyskick.metrics import METRICS

if TYPE_CHECKING:
    from torch import Tensor

    from pyskick.data import ViewgridFile
    from pyskick.data.spec import GridSpec
    from pyskick.training import TrainConfig, TrainData
    from pyskick.training.pack import PackMember

# Settings that decide every result; ``epochs`` may grow (runs are extended).
_FIXED_SETTINGS = (
    "dataset_sha256",
    "preset",
    "pretrain_epochs",
    "batch_size",
    "n_test",
    "eval_split",
    "seed",
    "sidekick_options",
    "train_config",
)
# TrainConfig fields that each method of Table 1 sets (a config file may not).
_PER_METHOD = ("actor", "critic", "sidekick", "sidekick_options")

Log = Callable[[str], None]
_T = TypeVar("_T")


@dataclass(frozen=True)
class ReproduceResult:
    """What :func:`reproduce` wrote."""

    out_dir: Path
    """The output folder."""
    table: dict[str, Any]
    """The content of ``table.json``."""
    index: Path | None
    """``index.html`` (None when the report was not asked for)."""
    seconds: float
    """Wall time of this call."""


def reproduce(
    dataset: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    preset: str | None = None,
    config: str | os.PathLike[str] | None = None,
    epochs: int | None = None,
    pretrain_epochs: int | None = None,
    batch_size: int | None = None,
    methods: Sequence[str] | None = None,
    seeds: int = 3,
    seed_offset: int = 0,
    num_test: int | None = None,
    eval_split: str = "test",
    device: str | None = None,
    sidekick_options: Mapping[str, Any] | None = None,
    report: bool = True,
    log: Log | None = None,
    loggers: Sequence[str] | None = None,
    pack: str = "auto",
    plan: str | os.PathLike[str] | Literal[False] | None = None,
    plan_optional: bool = False,
) -> ReproduceResult:
    """Run Table 1 on ``dataset`` into ``out_dir`` (resumable; see the module docstring).

    Args:
        dataset: a viewgrid HDF5 file with train, val and test splits.
        out_dir: the output folder (created).
        preset: training preset (default: ``paper-modelnet`` for a ``modelnet-hard`` dataset,
            else ``paper-sun360``).
        config: a TOML file of :class:`~pyskick.training.TrainConfig` fields applied over the
            preset (``lr``, ``start_zeroing``, ...), as ``pyskick train --config``; every
            method gets them. Not ``sidekick``/``actor``/``critic`` (each method sets its own)
            nor sidekick options (``sidekick_options`` below).
        epochs, pretrain_epochs, batch_size: override the preset's.
        methods: names of registered methods (Table 1 rows, :mod:`pyskick.methods`) to run
            (``one-view`` is always added); None: all of them.
        seeds: training seeds per method (seed index k trains and evaluates with the config's
            seed + k).
        seed_offset: the first seed index: seeds ``seed_offset .. seed_offset + seeds - 1``
            (more seeds for a claim, into this folder or another one that
            :func:`~pyskick.experiments.pool.pool` then pools). The table is of these seeds.
        num_test: evaluate on the first this many viewgrids of ``eval_split`` (None: all).
        eval_split: the split the table is computed on: ``"test"`` (the paper's), or
            ``"val"`` to choose settings without looking at the test split (a study).
        device: ``"auto"``, ``"cpu"`` or ``"cuda"`` (not part of the recorded settings).
        sidekick_options: options of the methods' sidekicks: ``"KEY": value`` sets KEY of
            every selected sidekick that declares it, ``"NAME.KEY": value`` of sidekick NAME
            only (it wins). Recorded: a rerun must give the same.
        report: also draw the figures and write ``index.html``.
        log: called with one line per step as it starts (its progress goes to
            :mod:`pyskick.progress`: the stage ``reproduce`` with one advance per step).
        loggers: registered logger names of every run (``--logger``; ``jsonl`` is always on);
            None: :func:`~pyskick.training.loggers.default_loggers`. Not recorded in
            ``reproduce.json``: they do not change results.
        pack: ``"auto"``: train the runs that can share a pack together
            (:mod:`pyskick.training.pack`: same architecture, stage, settings and progress),
            where packing pays (:func:`packs_pay`); ``"on"``: wherever they can; ``"off"``:
            one run at a time. Not recorded: a pack changes results only by float rounding,
            and a run continues in the pack it started in (refused otherwise).
        plan: a power plan file (``pyskick plan``, :mod:`pyskick.experiments.power_plan`)
            the claims are judged with; copied into the folder (``plan.json``), whose copy a
            later call without ``plan`` keeps using. None: the folder's copy, if any;
            False: no plan (the folder's copy is removed).
        plan_optional: a ``plan`` made for other settings is set aside with a log line
            (the demo's built-in plan) instead of refused.

    Returns:
        :class:`ReproduceResult`.

    Raises:
        FileNotFoundError: no such dataset.
        ValueError, TypeError: bad arguments, a method whose plugin is not installed, or
            settings that disagree with the folder's ``reproduce.json``; nothing is written then.
    """
    start = time.perf_counter()
    call = _prepare(
        dataset, out_dir, preset=preset, config=config, epochs=epochs,
        pretrain_epochs=pretrain_epochs, batch_size=batch_size, methods=methods, seeds=seeds,
        seed_offset=seed_offset, num_test=num_test, eval_split=eval_split, device=device,
        sidekick_options=sidekick_options, loggers=loggers, pack=pack,
        power_plan=plan, plan_optional=plan_optional,
    )  # fmt: skip
    table, index = _run(call, report=report, say=log or (lambda _line: None))
    return ReproduceResult(call.out, table, index, time.perf_counter() - start)


@dataclass(frozen=True)
class _Call:
    """What a ``reproduce`` call will do, every argument checked (nothing written yet)."""

    out: Path
    source: ViewgridFile
    chosen: list[Method]
    indices: range
    given_options: dict[str, dict[str, Any]]
    n_test: int
    eval_split: str
    train_config: TrainConfig
    settings: dict[str, Any]
    loggers: Sequence[str] | None
    pack: str
    power_plan: PowerPlan | None = None
    plan_note: str | None = None  # why a given plan was set aside
    drop_plan: bool = False  # plan=False: the folder's copy goes

    @property
    def trained(self) -> list[Method]:
        """The methods that train (every one but one-view)."""
        return [m for m in self.chosen if m.trained]

    @property
    def evaluations(self) -> list[tuple[str, int]]:
        """(method, seed index) of every evaluation (one-view: its one run)."""
        return [(m.name, k) for m in self.chosen for k in (self.indices if m.trained else range(1))]


def _prepare(
    dataset: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    preset: str | None,
    config: str | os.PathLike[str] | None,
    epochs: int | None,
    pretrain_epochs: int | None,
    batch_size: int | None,
    methods: Sequence[str] | None,
    seeds: int,
    seed_offset: int,
    num_test: int | None,
    eval_split: str,
    device: str | None,
    sidekick_options: Mapping[str, Any] | None,
    loggers: Sequence[str] | None,
    pack: str,
    power_plan: str | os.PathLike[str] | Literal[False] | None = None,
    plan_optional: bool = False,
) -> _Call:
    """Step 1: every argument checked, the settings the folder will record (reads only)."""
    from pyskick.config import config_preset
    from pyskick.data import ViewgridFile
    from pyskick.plugins import get_registries
    from pyskick.training import load_config
    from pyskick.training.loggers import make_loggers
    from pyskick.training.setup import MAX_SEED, check_device_request, check_policy_glimpses

    if pack not in PACK_MODES:
        raise UserError(f"pack must be one of {', '.join(PACK_MODES)}, got {pack!r}")
    for name, value in (("seeds", seeds), ("num_test", num_test), ("seed_offset", seed_offset)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"{name} must be an int, got {value!r}")
        if value is not None and value < (0 if name == "seed_offset" else 1):
            kind = ">= 0" if name == "seed_offset" else "positive"
            raise UserError(f"{name} must be {kind}, got {value}")
    indices = range(seed_offset, seed_offset + seeds)
    registries = get_registries()
    chosen = select_methods(methods, registries)
    check_available(chosen, registries)
    make_loggers(loggers)  # unknown names and missing packages refused before any work
    given_options, given_record = split_sidekick_options(
        sidekick_options or {}, [m.sidekick for m in chosen if m.trained]
    )
    path = Path(dataset)
    if not path.is_file():
        raise UserFileNotFoundError(f"dataset file {path} does not exist")
    source = ViewgridFile(path)
    spec = source.spec
    if eval_split not in ("test", "val"):
        raise UserError(f"eval_split must be 'test' or 'val', got {eval_split!r}")
    if eval_split not in source.splits:
        raise UserError(f"{path} has no {eval_split} split")
    available = source.num_samples(eval_split)
    n_test = available if num_test is None else num_test
    if n_test > available:
        raise UserError(
            f"num_test {n_test} exceeds the {available} {eval_split} viewgrids of {path}"
        )
    if preset is None:  # as `pyskick train`: the config file's, else the dataset's paper preset
        preset = config_preset(config) if config is not None else None
    if preset is None:
        preset = paper_preset(spec.preset)
    overrides: dict[str, int | str | None] = {
        "epochs": epochs,
        "pretrain_epochs": pretrain_epochs,
        "batch_size": batch_size,
    }
    if device is not None:
        overrides["device"] = device
    base = load_config(preset=preset)
    train_config = load_config(
        config,
        preset=preset,
        overrides={key: value for key, value in overrides.items() if value is not None},
    )
    for name in _PER_METHOD:
        if getattr(train_config, name) != getattr(base, name):
            raise UserError(
                f"config file {config} sets {name}, which each method sets itself"
                + (" (give sidekick options with --sidekick-option)" if "sidekick" in name else "")
            )
    check_policy_glimpses(train_config, config)
    if train_config.seed > MAX_SEED:  # only a config file sets it
        raise UserError(
            f"config file {config}: seed {train_config.seed} is out of range (0 to {MAX_SEED})"
        )
    if train_config.seed + indices[-1] > MAX_SEED:
        raise UserError(
            f"seed index {indices[-1]} trains with seed {train_config.seed + indices[-1]}, out of "
            f"range (0 to {MAX_SEED}): use a smaller --seed-offset"
        )
    check_device_request(train_config)  # the device, a graph's and compilation's needs
    if source.num_samples("train") < train_config.batch_size:
        raise UserError(
            f"batch_size {train_config.batch_size} exceeds the "
            f"{source.num_samples('train')} training viewgrids of {path}"
        )
    out = Path(out_dir)
    settings = {
        "dataset": str(path.resolve()),
        "dataset_sha256": source.digest,
        "preset": preset,
        "pretrain_epochs": train_config.pretrain_epochs,
        "epochs": train_config.epochs,
        "batch_size": train_config.batch_size,
        "n_test": n_test,
        "eval_split": eval_split,
        "seed": train_config.seed,
        "sidekick_options": given_record,
        "train_config": {
            key: value
            for key, value in train_config.to_dict().items()
            if key not in (*_PER_METHOD, "epochs", *RUNTIME_FIELDS)
        },
    }
    check_settings(out, settings)
    judged_with, note = _power_plan(power_plan, plan_optional, settings, out)
    return _Call(
        out, source, chosen, indices, given_options, n_test, eval_split, train_config, settings,
        loggers, pack, judged_with, note, drop_plan=power_plan is False,
    )  # fmt: skip


def _power_plan(
    path: str | os.PathLike[str] | Literal[False] | None,
    optional: bool,
    settings: Mapping[str, Any],
    out: Path,
) -> tuple[PowerPlan | None, str | None]:
    """The power plan the table will be judged with: ``path`` if it was made for
    ``settings`` (refused otherwise, or set aside with a note when ``optional``), else (None)
    the folder's copy, else none; (plan, note)."""
    if path is False:
        return None, None
    if path is None:
        copy = out / PLAN_FILE
        return (read_plan(copy) if copy.is_file() else None), None
    plan = read_plan(Path(path))
    different = plan_mismatch(plan, settings)
    if not different:
        return plan, None
    why = f"power plan {path} was made for other settings ({', '.join(different)})"
    if optional:
        return None, f"reproduce: {why}; the claims are judged by their intervals alone"
    raise UserError(f"{why}; a plan judges only tables of its pilot's design")


def _run(call: _Call, *, report: bool, say: Log) -> tuple[dict[str, Any], Path | None]:
    """Steps 2 to 5 under the folder's lock: record the settings, pretrain and train
    (:func:`_train_all`), evaluate (:func:`_evaluate_all`), and tabulate and report.

    One reproduce per folder at a time: a second call is refused (exit 2, naming the holder's
    pid) before it writes or trains anything, and the settings are checked again under the
    lock (the first call may have changed them meanwhile).
    """
    from pyskick.run_dir import RunDir
    from pyskick.sidekicks import nms_preset
    from pyskick.training import TrainData

    out, spec = call.out, call.source.spec
    with RunDir(out).locked():
        check_settings(out, call.settings)
        # Every run of a sidekick in this folder uses the options resolved for its first run, so
        # that seeds or methods added later (or with more --epochs) share one schedule.
        previous = out / SETTINGS_FILE
        resolved: dict[str, dict[str, Any]] = (
            read_json_object(previous, "reproduce settings record").get(
                "resolved_sidekick_options", {}
            )
            if previous.is_file()
            else {}
        )
        call.settings["resolved_sidekick_options"] = resolved
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / SETTINGS_FILE, call.settings)
        if call.plan_note is not None:
            say(call.plan_note)

        data = TrainData.from_file(call.source)
        test = call.source.split(call.eval_split).load(list(range(call.n_test)))
        # Every run, evaluation and the table (with the report) is one step; a step finished by an
        # earlier call is skipped (counted, not in the rate that the time left is estimated from).
        steps = 1 + len(call.trained) * len(call.indices) + len(call.evaluations) * len(METRICS) + 1
        with progress.stage("reproduce", total=steps, unit="step", lines="each") as overall:
            _train_all(call, data, overall, say)
            _evaluate_all(call, test, overall, say)
            table = build_table(
                out,
                [m.name for m in call.chosen],
                seeds=call.indices,
                settings=call.settings,
                roles={m.name: m.role for m in call.chosen},
                plan=call.power_plan,
            )
            # The folder's plan changes with its table: an interrupted call keeps both as were.
            folder_plan(out, call.power_plan, drop=call.drop_plan)
            write_table(out, table)
            index = None
            if report:
                say("reproduce: drawing the report")
                index = write_report(
                    out, table, test, channel_mean=spec.channel_mean, nms=nms_preset(spec.preset),
                    device=call.train_config.device, spec=spec, log=say,
                )  # fmt: skip
            overall.advance(label="report" if report else "table")
    return table, index


def _train_all(call: _Call, data: TrainData, overall: progress.Stage, say: Log) -> None:
    """Steps 2 and 3: the one-view model, then every trained method's seeds (in packs where
    they allow it), each a step of ``overall``; a run finished earlier is skipped."""
    from pyskick.plugins import get_registries
    from pyskick.training.pack import recover_recorded

    out = call.out
    one_view = run_dir(out, ONE_VIEW, 0)
    worked = _pretrain(call.train_config, one_view, data, out, say, call.loggers)
    overall.advance(label=_step(f"pretrain {ONE_VIEW}", worked), skipped=not worked)
    # A pack killed while committing its checkpoints is finished (or undone) before any
    # run's epoch is read, so that its runs are found at one epoch, together.
    recover_recorded([run_dir(out, m.name, k) for m in call.trained for k in call.indices])
    registries = get_registries()
    jobs: list[TrainJob] = []
    for method in call.trained:
        fixed = method_sidekick_options(method, registries)
        for k in call.indices:
            job = _plan_train(
                method, k, call.train_config, one_view, call.source.spec, out,
                call.given_options, call.settings, fixed, call.loggers,
            )  # fmt: skip
            if job is None:
                overall.advance(label=_step(f"train {method.name} seed {k}", False),
                                skipped=True)  # fmt: skip
            else:
                jobs.append(job)
    for group in group_jobs(jobs, call.pack):
        _train_group(group, data, out, say)
        for job in group:
            overall.advance(label=f"train {job.method.name} seed {job.k}")


def _evaluate_all(call: _Call, test: Tensor, overall: progress.Stage, say: Log) -> None:
    """Step 4: every run on the evaluation split with every metric, each a step of
    ``overall``; an evaluation of the same weights done earlier is skipped."""
    for name, k in call.evaluations:
        for metric in METRICS:
            worked = _evaluate(
                name, k, metric, call.train_config, test, call.source.spec, call.out, say
            )
            overall.advance(label=_step(f"evaluate {name} seed {k} {metric}", worked),
                            skipped=not worked)  # fmt: skip


def _step(label: str, worked: bool) -> str:
    """A step's progress label; a step an earlier call finished says so."""
    return label if worked else f"{label} (done before)"


def check_reproduce_out(out_dir: Path, own: Collection[str] = ()) -> None:
    """Refuse an ``out_dir`` that is not a folder, or that holds anything without being a
    reproduce folder: a training run, an export, or any other file (a pooled table, a user's
    notes: its files would mix with the study's, or be replaced by them).

    Args:
        out_dir: the folder.
        own: names the calling command writes there before the settings record (the demo's
            data file), which an interrupted first call may have left.

    Raises:
        UserError: one line naming the folder and what it holds, or the folder in the way of
            writing it.
    """
    from pyskick._io import check_writable_folder, temporaries
    from pyskick.checkpoint import is_export
    from pyskick.run_dir import LOCK, RunDir

    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out {out_dir} exists and is not a folder")
    try:
        check_writable_folder(out_dir)
    except UserError as exc:
        raise UserError(f"--out {out_dir}: {exc}") from None
    if (out_dir / SETTINGS_FILE).is_file():
        return
    if is_export(out_dir) or RunDir(out_dir).holds_run():  # an export records a config too
        kind = "an export" if is_export(out_dir) else "a training run"
        raise UserError(
            f"--out {out_dir} holds {kind}, not a reproduce folder; choose another --out"
        )
    if out_dir.is_dir():
        # What an interrupted call of the study may have left: its lock, and the temporaries
        # of its settings record or data file (the next atomic write of each removes them).
        ours = {LOCK, *own, SETTINGS_FILE}
        ours |= {p.name for name in ours for p in temporaries(out_dir / name)}
        try:
            others = sorted(p.name for p in out_dir.iterdir() if p.name not in ours)
        except OSError as exc:
            raise UserError(f"--out {out_dir} cannot be listed ({exc.strerror})") from None
        if others:
            raise UserError(
                f"--out {out_dir} is not empty ({others[0]}"
                f"{f' and {len(others) - 1} more' if len(others) > 1 else ''}) and is no "
                f"reproduce folder (no {SETTINGS_FILE}); choose another --out"
            )


def check_settings(out_dir: Path, settings: dict[str, Any]) -> None:
    """Refuse settings that would mix inconsistent results into ``out_dir``.

    Raises:
        ValueError: ``out_dir`` is not a folder, holds a training run or an export, its
            ``reproduce.json`` is unreadable, or a recorded setting differs (fewer epochs than
            recorded included).
    """
    # A data file the folder holds is the study's own (the demo generates its data there).
    data = Path(settings["dataset"])
    check_reproduce_out(out_dir, own=[data.name] if data.parent == out_dir.resolve() else [])
    record = out_dir / SETTINGS_FILE
    if not record.is_file():
        return
    try:
        saved = read_json_object(record, "reproduce settings record")
    except (OSError, UserError) as exc:
        raise UserError(f"{record} is unreadable ({exc}); choose another --out") from None
    if "train_config" not in saved:
        raise UserError(
            f"{out_dir} was written by an older pyskick (no train_config in {SETTINGS_FILE}); "
            "use another --out"
        )
    # Runtime fields change no result (folders written before they were left out record some).
    saved["train_config"] = {
        key: value for key, value in saved["train_config"].items() if key not in RUNTIME_FIELDS
    }
    for key in _FIXED_SETTINGS:
        if key == "train_config" and saved[key] != settings[key]:
            field = next(
                name
                for name in sorted({*saved[key], *settings[key]})
                if saved[key].get(name) != settings[key].get(name)
            )
            if field not in saved[key]:
                raise UserError(
                    f"{out_dir} was written by an older pyskick, before the setting {field} "
                    f"(now {settings[key][field]!r}); use another --out"
                )
            raise UserError(
                f"{out_dir} holds results of {field} {saved[key].get(field)!r}, not "
                f"{settings[key].get(field)!r}; use another --out or the same settings"
            )
        if saved.get(key) != settings[key]:
            shown = "another dataset" if key == "dataset_sha256" else repr(saved.get(key))
            mine = "this one" if key == "dataset_sha256" else repr(settings[key])
            raise UserError(
                f"{out_dir} holds results of {key} {shown}, not {mine}; "
                "use another --out or the same settings"
            )
    if settings["epochs"] < saved.get("epochs", 0):
        raise UserError(
            f"{out_dir} holds runs of {saved['epochs']} epochs; cannot shorten them to "
            f"{settings['epochs']} (use another --out)"
        )


def epochs_done(run: Path) -> int:
    """Epochs a run's ``latest.pt`` covers (0 without one): :meth:`RunDir.epochs_done`."""
    from pyskick.run_dir import RunDir

    return RunDir(run).epochs_done()


def _timed(out: Path, record: dict[str, Any], action: Callable[[], _T]) -> _T:
    """Run ``action``, append its wall time to ``timings.jsonl`` and return its result."""
    start = time.perf_counter()
    result = action()
    record = {**record, "seconds": round(time.perf_counter() - start, 3)}
    with (out / TIMINGS_FILE).open("a") as handle:
        handle.write(json.dumps(record) + "\n")
    return result


def _pretrain(
    config: TrainConfig,
    run: Path,
    data: TrainData,
    out: Path,
    say: Log,
    loggers: Sequence[str] | None,
) -> bool:
    """Pretrain (or continue) the one-view model; False when it was finished already."""
    from pyskick.training import pretrain

    done = epochs_done(run)
    if done >= config.pretrain_epochs:
        return False
    say(f"reproduce: pretraining the one-view model ({done}/{config.pretrain_epochs} epochs done)")
    _timed(
        out,
        {
            "stage": "pretrain",
            "method": ONE_VIEW,
            "seed": 0,
            "epochs": config.pretrain_epochs - done,
        },
        lambda: pretrain(config, run, data, resume=done > 0, loggers=loggers),
    )
    return True


def split_sidekick_options(
    given: Mapping[str, Any], sidekicks: Sequence[str]
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """``{"KEY": v, "NAME.KEY": w}`` as options per sidekick of ``sidekicks``: a plain KEY goes
    to every sidekick that declares it, ``NAME.KEY`` to NAME only (and wins). Values are parsed
    and checked (``"5"`` becomes 5).

    Returns:
        ``(per sidekick, as given with parsed values)``; the second is what a folder records
        (it does not change when other methods are selected).

    Raises:
        ValueError: a key that no selected sidekick declares, a NAME not selected, or a bad
            value.
    """
    from pyskick.sidekicks.factory import sidekick_entry

    declared = {name: {o.name: o for o in sidekick_entry(name).options} for name in set(sidekicks)}
    out: dict[str, dict[str, Any]] = {}
    record: dict[str, Any] = {}
    for key, value in given.items():
        name, dot, option = key.rpartition(".")
        if dot:
            if name not in declared:
                raise UserError(
                    f"sidekick option {key}: no selected method uses sidekick {name!r} "
                    f"(selected sidekicks: {', '.join(sorted(declared)) or 'none'})"
                )
            if option not in declared[name]:
                valid = ", ".join(sorted(declared[name])) or "none"
                raise UserError(
                    f"sidekick {name!r} has no option {option!r}; valid options: {valid}"
                )
            targets = [name]
        else:
            targets = sorted(n for n, options in declared.items() if key in options)
            if not targets:
                raise UserError(
                    f"no selected sidekick has option {key!r} (options: "
                    + "; ".join(
                        f"{n}: {', '.join(sorted(o)) or 'none'}"
                        for n, o in sorted(declared.items())
                    )
                    + ")"
                )
        name_key = option if dot else key
        for target in targets:
            parsed = declared[target][name_key].parse(value, f"sidekick {target!r}")
            record[key] = parsed
            if dot or name_key not in out.get(target, {}):
                out.setdefault(target, {})[name_key] = parsed
    return out, dict(sorted(record.items()))


@dataclass(frozen=True)
class TrainJob:
    """One run of Table 1 still to train (or to continue)."""

    method: Method
    k: int
    """The seed index."""
    done: int
    """Epochs its ``latest.pt`` covers."""
    member: PackMember
    """Its config, folder, one-view init, sidekick and actor."""
    key: tuple[Any, ...]
    """What runs must share to be packed together (:func:`pack_key`)."""
    recorded: tuple[str, ...] | None = None
    """For a run that started (its ``config.json``): the folders of the pack it was trained in,
    or only its own when it trained alone; None for a new run."""


PACK_MODES = ("auto", "on", "off")


def packs_pay(device: str) -> bool:
    """Whether ``pack="auto"`` packs runs on ``device`` (``"auto"``, ``"cpu"``, ``"cuda"``):
    on a GPU, where one run leaves most of it idle; not on the CPU, where a pack steps at 0.96-1.16x
    a run alone's speed per run and the demo ran 10 % faster packed for 11x the memory
    (docs/training.md, "Packed runs")."""
    from pyskick.distributed import resolve_device

    return resolve_device(device).type != "cpu"


def group_jobs(jobs: Sequence[TrainJob], pack: str) -> list[list[TrainJob]]:
    """The runs to train together, in the order of ``jobs``. A run that started continues as
    it started, alone or in its recorded pack, whatever ``pack`` says now (a run continues only
    in its own pack); new runs train one at a time with ``pack="off"`` (or ``"auto"`` where
    packs do not pay), else one group per :func:`pack_key`."""
    if not jobs:
        return []
    together = pack == "on" or (pack == "auto" and packs_pay(jobs[0].member.config.device))
    groups: dict[tuple[Any, ...], list[TrainJob]] = {}
    for job in jobs:
        if job.recorded is not None:
            key: tuple[Any, ...] = ("recorded", *job.recorded)
        elif together:
            key = ("new", *job.key)
        else:
            key = ("alone", str(job.member.out_dir))
        groups.setdefault(key, []).append(job)
    return list(groups.values())


def _plan_train(
    method: Method,
    k: int,
    config: TrainConfig,
    one_view: Path,
    spec: GridSpec,
    out: Path,
    given_options: Mapping[str, Mapping[str, Any]],
    settings: dict[str, Any],
    fixed: Mapping[str, Any],
    loggers: Sequence[str] | None,
) -> TrainJob | None:
    """Seed ``k`` of ``method`` as a run to train (or to continue); None when it is finished.

    Sidekick options: the user's (``given_options``) win over the method's own (``fixed``),
    which win over the defaults resolved for the folder's first run of that sidekick; a run
    that continues keeps what it recorded.
    """
    from pyskick.actors import make_actor
    from pyskick.options import resolve_options
    from pyskick.run_dir import RunDir
    from pyskick.sidekicks.factory import RunSidekick, for_run
    from pyskick.training.pack import PackMember, pack_key, pack_members

    run = run_dir(out, method.name, k)
    config = config.replace(
        actor=method.actor, critic=method.critic, sidekick=method.sidekick, seed=config.seed + k
    )
    done = epochs_done(run)
    if done >= config.epochs:
        return None
    # A run continues with the options it started with (recorded in its checkpoint); a new
    # one takes those of the folder's first run of this sidekick, then the method's own.
    resolved = settings["resolved_sidekick_options"]
    given = given_options.get(method.sidekick, {})
    if done:
        chosen = for_run(
            method.sidekick, given, spec=spec, config=config,
            recorded=RunDir(run).recorded_config()
            or {"sidekick": method.sidekick, "sidekick_options": {}},
        )  # fmt: skip
    else:
        first = resolved.get(method.sidekick)
        folder = None if first is None else {"sidekick": method.sidekick, "sidekick_options": first}
        chosen = for_run(method.sidekick, given, spec=spec, config=config, recorded=folder)
        if first is None:
            resolved[method.sidekick] = chosen.options
            write_json(out / SETTINGS_FILE, settings)
        fixed_here = {key: v for key, v in fixed.items() if key not in given}
        if fixed_here:  # the method's own options, over the folder's
            options = resolve_options(
                chosen.entry.options, {**chosen.options, **fixed_here},
                owner=f"sidekick {chosen.name!r}", spec=spec, config=config,
            )  # fmt: skip
            chosen = RunSidekick(chosen.entry, options)
    config = config.replace(sidekick_options=chosen.options)
    # Built only when there is training to do: a sidekick scores the training set on prepare.
    sidekick = chosen.build(one_view=one_view, spec=spec, config=config)
    actor = make_actor(config.actor, one_view=one_view, spec=spec, config=config, field="actor")
    member = PackMember(config, run, init=one_view, sidekick=sidekick, actor=actor, loggers=loggers)
    recorded = None
    if RunDir(run).recorded_config() is not None:
        members = pack_members(run)
        recorded = tuple(str(p) for p in members) if members else (str(run.resolve()),)
    return TrainJob(method, k, done, member, pack_key(member, done=done), recorded)


def _train_group(jobs: Sequence[TrainJob], data: TrainData, out: Path, say: Log) -> None:
    """Train (or continue) ``jobs``: alone, or together as one pack."""
    from pyskick.training import train
    from pyskick.training.pack import train_pack

    if len(jobs) == 1:
        job = jobs[0]
        m = job.member
        say(
            f"reproduce: training {job.method.name} seed {job.k} "
            f"({job.done}/{m.config.epochs} epochs done)"
        )
        _timed(
            out,
            {
                "stage": "train",
                "method": job.method.name,
                "seed": job.k,
                "epochs": m.config.epochs - job.done,
            },
            lambda: train(
                m.config,
                m.out_dir,
                data,
                init=m.init,
                resume=job.done > 0,
                sidekick=m.sidekick,
                actor=m.actor,
                loggers=m.loggers,
            ),
        )
        return
    names = ", ".join(f"{job.method.name} seed {job.k}" for job in jobs)
    done, epochs = jobs[0].done, jobs[0].member.config.epochs
    say(f"reproduce: training a pack of {len(jobs)} runs ({done}/{epochs} epochs done): {names}")
    _timed(
        out,
        {
            "stage": "train",
            "pack": [{"method": job.method.name, "seed": job.k} for job in jobs],
            "epochs": epochs - done,
        },
        lambda: train_pack([job.member for job in jobs], data, resume=done > 0),
    )


def _evaluate(
    method: str,
    k: int,
    metric: str,
    config: TrainConfig,
    test: Tensor,
    spec: GridSpec,
    out: Path,
    say: Log,
) -> bool:
    """Evaluate one run with one metric; False when its evaluation is current already."""
    from pyskick.evaluation import evaluate
    from pyskick.run_dir import checkpoint_digest

    run = run_dir(out, method, k)
    target = eval_path(out, method, k, metric)
    digest = checkpoint_digest(run)
    if target.is_file():
        saved = read_json_object(target, "evaluation record")
        # Evaluations that predate the samples' digest cannot be paired: redo them.
        if saved.get("checkpoint_sha256") == digest and "samples_sha256" in saved:
            return False
    say(f"reproduce: evaluating {method} seed {k} ({metric})")
    result: EvalResult = _timed(
        out,
        {"stage": "evaluate", "method": method, "seed": k, "metric": metric},
        lambda: evaluate(
            run,
            test,
            metric,
            channel_mean=spec.channel_mean,
            spec=spec,
            batch_size=config.eval_batch_size,
            device=config.device,
            seed=config.seed + k,
        ),
    )
    result.save(target.with_suffix(".npz"))
    write_json(
        target,
        {
            **result.to_dict(),
            "method": method,
            "seed_index": k,
            "eval_seed": config.seed + k,
            "checkpoint_sha256": result.checkpoint_sha256,  # of the bytes evaluated
        },
    )
    return True
