"""The HTML report of a reproduce folder: the figures and ``index.html`` around its Table 1
(:mod:`pyskick.experiments.table`) and the paper's claims (:mod:`pyskick.experiments.claims`).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import torch

from pyskick._io import read_json_object, write_json, write_text
from pyskick.data.spec import GridSpec
from pyskick.experiments.claims import (
    CONTRADICTED,
    HOLDS,
    PAPER_GAIN_RATIOS,
    OrderingCheck,
    claim_verdict,
    needs_text,
    ordering_checks,
    verdict_text,
)
from pyskick.experiments.layout import eval_split_of, run_dir
from pyskick.experiments.table import (
    LEARNING_NOTE,
    PAIRED_NOTE,
    STDERR_NOTE,
    learning_lines,
    metric_cells,
    on_split,
    paired_lines,
    ratio_cell,
    seed_runs,
    table_header,
)
from pyskick.methods import ONE_VIEW
from pyskick.metrics import METRICS


def _html_table(title: str, note: str, lines: list[str]) -> list[str]:
    """A section with an HTML table made from Markdown table ``lines`` (none: no section)."""
    if not lines:
        return []
    header, _, *body = lines
    esc = html.escape
    return [
        f"<h2>{esc(title)}</h2><p>{esc(note)}</p><table>",
        "<tr>" + "".join(f"<th>{esc(c)}</th>" for c in _md_cells(header)) + "</tr>",
        *(
            "<tr>" + "".join(f"<td>{esc(c)}</td>" for c in _md_cells(line)) + "</tr>"
            for line in body
        ),
        "</table>",
    ]


def _md_cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _table_runs(table: Mapping[str, Any], out_dir: Path) -> list[tuple[Path, int]]:
    """The table's seeds (tables before ``seed_runs``: ``out_dir``'s first K)."""
    if "seed_runs" in table:
        return [
            (out_dir if folder == "." else Path(folder), int(k)) for folder, k in table["seed_runs"]
        ]
    trained = [row["seeds"] for row in table["rows"] if row["method"] != ONE_VIEW]
    return seed_runs(out_dir, trained[0] if trained else 1)


def write_report(
    out_dir: Path,
    table: Mapping[str, Any],
    test: torch.Tensor,
    *,
    channel_mean: Sequence[float],
    nms: tuple[int, int] = (4, 1),
    device: str = "auto",
    examples: int = 2,
    spec: GridSpec | None = None,
    log: Callable[[str], None] | None = None,
) -> Path:
    """Draw the figures and write ``out_dir/index.html`` (one page, relative links to PNGs).

    Figures (:mod:`pyskick.viz`): ``curves.png`` (validation error of every trained method,
    the mean over its seeds with a band of ± one standard error); per method
    ``figures/<method>/`` (episodes, their animations ``*_episode.gif`` and policy heatmaps of
    seed 0 on ``examples`` test viewgrids); ``figures/sidekick-maps/`` (the reward and coverage
    maps the sidekicks derive from the one-view model on the first ``examples`` test
    viewgrids). A folder is redrawn only when its run's ``best.pt`` changed. Without matplotlib
    the page says so and shows the table alone.

    Args:
        out_dir: the reproduce folder.
        table: :func:`build_table`'s output.
        test: ``[n, N, M, C, H, W]`` uint8 test viewgrids.
        channel_mean: the dataset's per-channel mean (0–255).
        nms: the reward sidekick's (peaks, radius) for this dataset.
        device: where the policies run for the figures.
        examples: example viewgrids per method.
        spec: the dataset's geometry, for actors that need it to replay (``demo-actions``).
        log: progress lines.
    """
    from pyskick.distributed import resolve_device

    say = log or (lambda _line: None)
    methods = [row["method"] for row in table["rows"]]
    figures: dict[str, list[Path] | str] = {}
    curves: Path | None = None
    try:
        from pyskick.viz import draw_sidekick_maps, plot_learning_curves, visualize_run

        trained = {
            row["method"]: [
                run_dir(Path(f), row["method"], k) for f, k in _table_runs(table, out_dir)
            ]
            for row in table["rows"]
            if row["method"] != ONE_VIEW
        }
        if trained:
            curves = plot_learning_curves(trained, out_dir / "curves.png")
        device = resolve_device(device).type
        for method in methods:
            say(f"reproduce: figures of {method}")
            first_folder, first_seed = _table_runs(table, out_dir)[0]
            run = (
                run_dir(out_dir, ONE_VIEW, 0)
                if method == ONE_VIEW
                else run_dir(Path(first_folder), method, first_seed)
            )

            def draw(folder: Path, run: Path = run) -> list[Path]:
                return visualize_run(
                    run, test, channel_mean=channel_mean, out_dir=folder, examples=examples,
                    device=device, spec=spec, animations=("gif",),
                )  # fmt: skip

            figures[method] = _cached_figures(out_dir / "figures" / method, run, draw)
        say("reproduce: sidekick maps")
        one_view = run_dir(out_dir, ONE_VIEW, 0)
        count = min(examples, test.shape[0])
        figures[SIDEKICK_MAPS] = _cached_figures(
            out_dir / "figures" / "sidekick-maps",
            one_view,
            lambda folder: draw_sidekick_maps(
                one_view, test[:count], channel_mean=channel_mean, out_dir=folder,
                names=[f"test{i}" for i in range(count)], nms=nms, device=device,
            ),
        )  # fmt: skip
        unavailable = None
    except ImportError as exc:
        unavailable = f"figures need matplotlib (pip install 'pyskick[viz]'): {exc}"
        say(f"reproduce: no figures in the report: {unavailable}")
    page = _html(table, ordering_checks(table), curves, figures, unavailable, out_dir)
    return write_text(out_dir / "index.html", page)


SIDEKICK_MAPS = "sidekick maps"


"""Title of the report section of the sidekicks' maps."""


def _cached_figures(
    folder: Path, run: Path, draw: Callable[[Path], list[Path]]
) -> list[Path] | str:
    """``draw(folder)``'s files, redrawn only when ``run``'s ``best.pt`` changed; or why there
    are none (a ValueError of the drawing, e.g. an actor the figures cannot replay)."""
    from pyskick.run_dir import checkpoint_digest

    record = folder / "figures.json"
    digest = checkpoint_digest(run)
    if record.is_file():
        saved = read_json_object(record, "figure record")
        # A failure is retried (it is quick, and may have been fixed since).
        if saved.get("checkpoint_sha256") == digest and not saved.get("reason"):
            return [folder / name for name in saved["files"]]
    try:
        paths = draw(folder)
        payload: dict[str, Any] = {"files": [p.name for p in paths]}
        result: list[Path] | str = paths
    except ValueError as exc:
        if isinstance(exc, TypeError):  # a UserTypeError: a wrong type passed on is a bug
            raise
        payload = {"files": [], "reason": str(exc)}
        result = str(exc)
    write_json(record, {"checkpoint_sha256": digest, **payload})
    return result


def _html(
    table: Mapping[str, Any],
    checks: list[OrderingCheck],
    curves: Path | None,
    figures: Mapping[str, list[Path] | str],
    unavailable: str | None,
    out_dir: Path,
) -> str:
    esc = html.escape
    settings = table["settings"]
    split = eval_split_of(settings)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>pyskick reproduce: Table 1</title>',
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:3px 8px;"
        "text-align:right}td:first-child{text-align:left}"
        ".settings td,.settings th{text-align:left}img{max-width:100%}"
        ".fail{color:#a00}.open{color:#850}</style></head><body>",
        "<h1>Table 1 reproduction</h1>",
        *_settings_html(settings),
        f"<h2>Reconstruction error ×1000 on the {esc(split)} split "
        f"(lower is better)</h2><p>{esc(on_split(STDERR_NOTE, split))} Gain "
        f"ratio: % better than one-view ÷ rnd-actions' ({esc(PAPER_GAIN_RATIOS)}).</p>",
        "<table><tr>" + "".join(f"<th>{esc(cell)}</th>" for cell in table_header()) + "</tr>",
    ]
    for row in table["rows"]:
        cells = [row["method"], str(row["seeds"])]
        for metric in METRICS:
            cells += metric_cells(row[metric])
        cells.append(ratio_cell(row.get("policy_gain_ratio")))
        parts.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
    parts.append("</table>")
    parts += _html_table("Paired gaps", on_split(PAIRED_NOTE, split), paired_lines(table))
    if table.get("claims"):
        plan = table.get("plan") or {}
        planned = (
            f" With the power plan of {plan['pilot']['seeds']} pilot seeds on the "
            f"{plan['pilot']['eval_split']} split, a claim it gives less than "
            f"{plan['target_power']:.0%} power at these seeds is not resolved at this budget "
            "unless its intervals contradict it."
            if plan.get("applied")
            else ""
        )
        parts.append(
            "<h2>The paper's effects</h2><p>Judged by paired 95% intervals (across seeds with "
            f"several seeds).{esc(planned)}</p><ul>"
        )
        for claim in table["claims"]:
            state = claim_verdict(claim)
            cls = {HOLDS: "", CONTRADICTED: ' class="fail"'}.get(state, ' class="open"')
            lines = [*claim["evidence"], *claim.get("notes", [])]
            items = "".join(f"<li>{esc(text)}</li>" for text in lines)
            said = esc(verdict_text(claim))
            parts.append(f"<li{cls}><b>{esc(claim['name'])}: {said}</b><ul>{items}</ul></li>")
        parts.append("</ul>")
    parts += _html_table("Learning speed", LEARNING_NOTE, learning_lines(table))
    parts.append(
        "<h2>Does the paper's ordering hold?</h2><p>The paper finds one-view worst, the "
        "learned policies better than random motions and the sidekick methods better than "
        "ltla. Each claim is judged by its paired gap: it <b>holds</b> when the 95% interval "
        "is above zero, is <b>contradicted</b> when it is below, and is <b>not resolved</b> "
        "when it contains zero (with the seeds the observed spread would need for 90% power). "
        "With several seeds the interval is across seeds (training noise included); with one "
        f"seed it is across {esc(split)} samples only.</p><ul>"
    )
    for check in checks:
        cls = ' class="fail"' if check.verdict == CONTRADICTED else ""
        lo, hi = check.ci95_x1000
        interval = "" if lo is None else f", 95% CI [{lo:.2f}, {hi:.2f}], p = {check.p:.2g}"
        parts.append(
            f"<li{cls}>{check.metric}: {esc(check.better)} better than {esc(check.worse)}: "
            f"<b>{check.verdict}</b> (gap {check.gap_x1000:+.2f}{interval}; across "
            f"{check.kind}, {check.n_seeds} seed{'s' if check.n_seeds > 1 else ''}"
            f"{needs_text(check.seeds_needed)})</li>"
        )
    parts.append("</ul>")
    if unavailable is not None:
        parts.append(f"<p>{esc(unavailable)}</p>")
    if curves is not None:
        parts.append(
            "<h2>Learning curves</h2><p>Validation error of each trained method: the mean over "
            "its seeds, with a band of ± one standard error across seeds.</p>"
            f'<img src="{quote(curves.relative_to(out_dir).as_posix())}" alt="learning curves">'
        )
    if figures:
        parts.append(
            "<h2>Examples</h2><p>Seed 0 of each method on test viewgrids: reconstructions "
            "after each glimpse and, for learned actors, the policy heatmaps (Eq. 10). "
            "The sidekick maps are what the sidekicks compute with full observability from "
            "the one-view model: one-view scores and NMS reward maps (rew), coverage (demo).</p>"
        )
    for method, files in figures.items():
        parts.append(f"<h3>{esc(method)}</h3>")
        if isinstance(files, str):
            parts.append(f"<p>No figures: {esc(files)}</p>")
            continue
        for path in files:
            link = quote(path.relative_to(out_dir).as_posix())
            parts.append(f'<p><img src="{link}" alt="{esc(path.name)}"></p>')
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


_SETTING_LABELS = {
    "preset": "training preset",
    "pretrain_epochs": "one-view pretraining epochs",
    "epochs": "policy training epochs",
    "batch_size": "batch size",
    "n_test": "evaluated viewgrids",
    "eval_split": "evaluated split",
    "seed": "first seed",
    "sidekick_options": "sidekick options given",
    "resolved_sidekick_options": "sidekick options used",
}


def _settings_html(settings: Mapping[str, Any]) -> list[str]:
    """The run's settings as a table: the dataset by file name and digest (never an absolute
    path, so the page reads the same on every machine), the settings a reader compares, and
    the whole training config folded away."""
    esc = html.escape

    def row(label: str, value: object) -> str:
        return f"<tr><th>{esc(label)}</th><td><code>{esc(str(value))}</code></td></tr>"

    rows = []
    if "dataset" in settings:
        digest = str(settings.get("dataset_sha256", ""))[:12]
        name = Path(str(settings["dataset"])).name
        rows.append(row("dataset", f"{name} (SHA-256 {digest}…)" if digest else name))
    if settings.get("pooled"):
        rows.append(row("pooled folders", ", ".join(Path(str(p)).name for p in settings["pooled"])))
    for key, label in _SETTING_LABELS.items():
        value = settings.get(key)
        if value not in (None, {}, ""):
            if isinstance(value, Mapping):
                value = ", ".join(f"{k}={v}" for k, v in sorted(value.items())) or "-"
            rows.append(row(label, value))
    config = settings.get("train_config") or {}
    details = "".join(row(str(k), v) for k, v in sorted(config.items()))
    return [
        '<h2>Settings</h2><table class="settings">',
        *rows,
        "</table>",
        f"<details><summary>Training config ({len(config)} fields)</summary><table "
        f'class="settings">{details}</table></details>'
        if config
        else "",
    ]
