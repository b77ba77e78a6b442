"""Merge a result into perf.json and print its summary lines (run.sh's trainbench and table1).

python3 merge.py bench_training train.json perf.json
python3 merge.py table1 REPRODUCE_FOLDER perf.json [curves.png]
python3 merge.py graph_pays train.json     # exit 0: the CUDA graph paid for the largest pack
python3 merge.py layout_pays perf.json     # exit 0: channels-last paid for the largest pack
python3 merge.py compile_pays perf.json    # exit 0: compiled networks paid for a pack of 15
python3 merge.py decode_pays perf.json     # exit 0: decoding once paid for a pack of 15
python3 merge.py cudnn_pays perf.json      # exit 0: cuDNN's autotuner paid for a pack of 15
python3 merge.py levers_settings perf.json # the fastest levers' TOML lines; exit 0: they paid
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def graph_pays(source: str) -> bool:
    """Whether trainbench's largest fp32 pack ran >= 1.1x faster replayed as a CUDA graph."""
    rows = json.loads(Path(source).read_text())["rows"]
    largest = max(row["runs"] for row in rows)
    speed = {
        row.get("step", "eager"): row["episodes_per_s"]
        for row in rows
        if row["runs"] == largest and row["precision"] == "fp32" and row["data"] == "device"
    }
    return speed.get("graph", 0.0) >= 1.1 * speed.get("eager", float("inf"))


def _part_pays(perf: str, part: str, field: str, fast: str, slow: str, keep=None) -> bool:
    """Whether ``part``'s largest pack (among the rows ``keep`` keeps) ran >= 1.1x faster with
    ``field`` = ``fast`` than with ``field`` = ``slow``."""
    rows = json.loads(Path(perf).read_text()).get(part, {}).get("rows", [])
    rows = [row for row in rows if keep is None or keep(row)]
    if not rows:
        return False
    largest = max(row["runs"] for row in rows)
    speed = {row[field]: row["episodes_per_s"] for row in rows if row["runs"] == largest}
    return speed.get(fast, 0.0) >= 1.1 * speed.get(slow, float("inf"))


def _fp32(row: dict) -> bool:
    return row["precision"] == "fp32"


def layout_pays(perf: str) -> bool:
    """Whether the layout part's largest fp32 pack ran >= 1.1x faster channels-last."""
    return _part_pays(perf, "layout", "layout", "channels-last", "contiguous", _fp32)


def compile_pays(perf: str) -> bool:
    """Whether the compiled part's pack of 15 ran >= 1.1x faster with its networks compiled."""
    part = json.loads(Path(perf).read_text()).get("compiled", {})
    compiled, plain = part.get("15-compiled", {}), part.get("15-plain", {})
    if "episodes_per_s" not in compiled or "episodes_per_s" not in plain:
        return False
    return compiled["episodes_per_s"] >= 1.1 * plain["episodes_per_s"]


def decode_pays(perf: str) -> bool:
    """Whether the decode part's largest pack, replayed as a graph (eager in a CPU rehearsal),
    ran >= 1.1x faster decoding once."""
    return _part_pays(perf, "decode", "decode", "once", "per-glimpse",
                      lambda row: row["step"] in ("graph", "eager"))  # fmt: skip


def cudnn_pays(perf: str) -> bool:
    """Whether the cudnn part's largest fp32 pack ran >= 1.1x faster with cuDNN's autotuner."""
    return _part_pays(perf, "cudnn", "cudnn", "benchmark", "heuristic", _fp32)


def _plain(row: dict) -> bool:
    return (row["layout"], row["decode"], row["cudnn"]) == (
        "contiguous", "per-glimpse", "heuristic"
    ) and row["step"] in ("graph", "eager")  # fmt: skip


def levers_settings(perf: str) -> list[str] | None:
    """The TrainConfig lines of the levers part's fastest fp32 variant of its largest pack,
    when it ran >= 1.1x faster than the plain pack of the same call; else None."""
    rows = json.loads(Path(perf).read_text()).get("levers", {}).get("rows", [])
    rows = [row for row in rows if row["precision"] == "fp32"]
    if not rows:
        return None
    largest = max(row["runs"] for row in rows)
    rows = [row for row in rows if row["runs"] == largest]
    plain = [row for row in rows if _plain(row)]
    best = max(rows, key=lambda row: row["episodes_per_s"])
    if not plain or _plain(best) or best["episodes_per_s"] < 1.1 * plain[0]["episodes_per_s"]:
        return None
    chosen = {
        "cuda_graph": best["step"].endswith("graph"),
        "compile": best["step"].startswith("compiled"),
        "channels_last": best["layout"] == "channels-last",
        "decode_once": best["decode"] == "once",
        "cudnn_benchmark": best["cudnn"] == "benchmark",
    }
    return [f"{name} = true" for name, on in chosen.items() if on]


def main(kind: str, source: str, perf: str, curves: str | None = None) -> None:
    results = json.loads(Path(perf).read_text()) if Path(perf).exists() else {}
    if kind == "bench_training":
        results[kind] = json.loads(Path(source).read_text())
        for row in results[kind]["rows"]:
            print(
                f"train {row['runs']:3d} runs {row['precision']} {row.get('step', 'eager'):5s} "
                f"data {row['data']:6s} "
                f"{row['episodes_per_s']:9.0f} ep/s  x{row['speedup'] or 0:5.2f}  "
                f"{row['epoch_seconds_per_run']:7.3f} s/run-epoch  "
                f"{row.get('tflop_per_s', 0):6.2f} TFLOP/s "
                f"({row.get('matmul_share', 0):.2f} of matmul)"
            )
    else:
        files = {}
        for name in ("table.json", "table.md", "timings.jsonl", "reproduce.json"):
            path = Path(source) / name
            if path.exists():
                files[name] = path.read_text()
        results[kind] = files
        print(files.get("table.md", "no table"))
        if curves and "table.json" in files:
            _plot_curves(source, json.loads(files["table.json"]), curves)
    Path(perf).write_text(json.dumps(results, indent=1, default=str))


def _plot_curves(folder: str, table: dict, out: str) -> None:
    """The validation curves of the trained methods (mean over seeds, ± one standard error)."""
    from pyskick.experiments.layout import run_dir
    from pyskick.methods import ONE_VIEW
    from pyskick.viz import plot_learning_curves

    runs = {
        row["method"]: [run_dir(Path(folder), row["method"], k) for k in range(row["seeds"])]
        for row in table["rows"]
        if row["method"] != ONE_VIEW
    }
    try:
        plot_learning_curves(runs, Path(out))
    except Exception as exc:  # a figure is not worth failing the step for
        print(f"no curves: {exc}")


if __name__ == "__main__":
    if sys.argv[1] == "graph_pays":
        sys.exit(0 if graph_pays(sys.argv[2]) else 1)
    if sys.argv[1] == "layout_pays":
        sys.exit(0 if layout_pays(sys.argv[2]) else 1)
    if sys.argv[1] == "compile_pays":
        sys.exit(0 if compile_pays(sys.argv[2]) else 1)
    if sys.argv[1] == "decode_pays":
        sys.exit(0 if decode_pays(sys.argv[2]) else 1)
    if sys.argv[1] == "cudnn_pays":
        sys.exit(0 if cudnn_pays(sys.argv[2]) else 1)
    if sys.argv[1] == "levers_settings":
        settings = levers_settings(sys.argv[2])
        print("\n".join(settings or []))
        sys.exit(0 if settings else 1)
    main(*sys.argv[1:])
