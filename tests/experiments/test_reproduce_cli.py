"""`pyskick reproduce` and `pyskick demo` from the command line: output, exit codes, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from pyskick.experiments import method_names, select_methods
from pyskick.plugins import get_host, make_plugin_host
from pyskick_cli.main import main

FAST = [
    *("--preset", "cpu-demo", "--epochs", "1", "--pretrain-epochs", "1", "--batch-size", "8"),
    *("--seeds", "1"),
]


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def test_reproduce_prints_the_table(
    scenes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    args = ["reproduce", "--dataset", str(scenes), "--out", str(out), *FAST, "--device", "cpu"]
    code, stdout, err = run([*args, "--methods", "ltla", "--no-report"], capsys)
    assert code == 0, err
    assert stdout.startswith("| method | seeds | avg ×1000 |")
    assert [line.split(" | ")[0] for line in stdout.splitlines()[2:4]] == ["| one-view", "| ltla"]
    assert f"report in {out / 'table.md'}" in err
    assert "reproduce: done in" in err
    assert not (out / "index.html").exists()
    # Progress (stderr is no terminal here): one line per step, k/N and the time left.
    steps = [
        "pretrain one-view", "train ltla seed 0", "evaluate one-view seed 0 avg",
        "evaluate one-view seed 0 adv", "evaluate ltla seed 0 avg", "evaluate ltla seed 0 adv",
        "table",
    ]  # fmt: skip
    lines = [line for line in err.splitlines() if line.startswith("reproduce: step ")]
    assert [line.split(" | ")[0] for line in lines] == [
        f"reproduce: step {k}/7 {step}" for k, step in enumerate(steps, 1)
    ]
    assert all(" | elapsed " in line and ", left " in line for line in lines)
    # Rerun: every step done before, counted but not timed.
    code, _, err = run([*args, "--methods", "ltla", "--no-report"], capsys)
    assert code == 0, err
    lines = [line for line in err.splitlines() if line.startswith("reproduce: step ")]
    assert [line.split(" | ")[0] for line in lines[:-1]] == [
        f"reproduce: step {k}/7 {step} (done before)" for k, step in enumerate(steps[:-1], 1)
    ]
    assert ", left" not in lines[0]  # nothing worked on yet: no rate to tell the time left
    # A changed setting is one line and exit 2.
    code, _, err = run(
        [*args[:-2], "--device", "cpu", "--methods", "ltla", "--batch-size", "4"], capsys
    )
    assert code == 2
    assert err.count("\n") == 1
    assert "batch_size 8, not 4" in err
    # A device request refused leaves the folder's settings as they were (more epochs asked for
    # would otherwise be recorded, and the folder's own call refused as shortening them).
    settings = (out / "reproduce.json").read_bytes()
    graph = tmp_path / "graph.toml"
    graph.write_text("cuda_graph = true\n")
    extended = [*args, "--methods", "ltla", "--no-report", "--epochs", "2", "--config", str(graph)]
    code, _, err = run(extended, capsys)
    assert code == 2
    assert err.count("\n") == 1
    assert "cuda_graph needs a CUDA device; this run's device is cpu" in err
    assert (out / "reproduce.json").read_bytes() == settings


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--methods", "bogus"], "unknown method 'bogus'"),
        (["--methods", ","], "no method named"),
        (["--seeds", "0"], "--seeds"),
        (["--preset", "nope"], "--preset"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(
    scenes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    out = tmp_path / "out"
    code, _, err = run(["reproduce", "--dataset", str(scenes), "--out", str(out), *extra], capsys)
    assert code == 2
    assert message in err
    assert not out.exists()


def test_a_device_request_is_refused_before_the_folder_is_made(
    scenes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    graph = tmp_path / "graph.toml"
    graph.write_text("cuda_graph = true\n")
    args = ["reproduce", "--dataset", str(scenes), "--out", str(out), *FAST, "--methods", "ltla"]
    code, _, err = run([*args, "--device", "cpu", "--config", str(graph)], capsys)
    assert code == 2
    assert err.count("\n") == 1
    assert "cuda_graph needs a CUDA device; this run's device is cpu" in err
    assert not out.exists()
    if not torch.cuda.is_available():
        code, _, err = run([*args, "--device", "cuda"], capsys)
        assert code == 2
        assert "device 'cuda' requested but no CUDA device is available" in err
        assert not out.exists()


def test_method_of_a_missing_plugin_is_an_error(
    scenes: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Without entry-point plugins, rnd-rewards and expert-clone (plugin distributions) are
    # not registered: unknown rows, named with the registered ones.
    monkeypatch.setenv("PYSKICK_DISABLE_PLUGIN_AUTOLOAD", "1")
    get_host.cache_clear()
    try:
        out = tmp_path / "out"
        code, _, err = run(
            [
                "reproduce",
                "--dataset",
                str(scenes),
                "--out",
                str(out),
                "--methods",
                "ltla,rnd-rewards",
            ],
            capsys,
        )
        assert code == 2
        assert "unknown method 'rnd-rewards'; valid methods: one-view, rnd-actions, ltla," in err
        assert "`pyskick plugins --all` lists them" in err
        assert not out.exists()
        # The demo refuses before it generates its data.
        code, _, err = run(["demo", "--out", str(out), "--methods", "expert-clone"], capsys)
        assert code == 2
        assert "unknown method 'expert-clone'" in err
        assert not out.exists()
    finally:
        get_host.cache_clear()


PAPER_ROWS = [
    "one-view", "rnd-actions", "rnd-rewards", "ltla", "asymm-ac", "expert-clone", "ours(rew)",
    "ours(demo)", "ours(rew)+ac", "ours(demo)+ac", "demo-actions",
]  # fmt: skip
"""Table 1 of the paper, in its order."""


def test_table_rows_come_from_the_builtins_and_the_plugin_distributions() -> None:
    builtin = make_plugin_host(autoload=False).registries
    assert method_names(builtin) == [
        name for name in PAPER_ROWS if name not in ("rnd-rewards", "expert-clone")
    ]
    assert {m.plugin for m in select_methods(None, builtin)} == {"pyskick.builtins.methods"}
    # The two plugin distributions slot their rows in at their Table 1 positions.
    everything = make_plugin_host(autoload=True).registries
    assert method_names(everything) == PAPER_ROWS
    rows = {m.name: m for m in select_methods(None, everything)}
    assert rows["rnd-rewards"].plugin == "pyskick-rnd-rewards"
    assert rows["expert-clone"].plugin == "expert-clone"
    assert [name for name, m in rows.items() if m.role == "sidekick"] == [
        "ours(rew)", "ours(demo)", "ours(rew)+ac", "ours(demo)+ac",
    ]  # fmt: skip
    assert (rows["asymm-ac"].critic, rows["demo-actions"].actor) == ("asymm-critic", "demo-actions")
    # Table order is kept and one-view always comes first.
    assert [m.name for m in select_methods(["ltla", "rnd-actions"], everything)] == [
        "one-view",
        "rnd-actions",
        "ltla",
    ]
    with pytest.raises(ValueError, match="a method is listed twice"):
        select_methods(["ltla", "ltla"], everything)


def test_demo_refuses_another_size_before_generating(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "demo"
    out.mkdir()
    record = {"dataset": str((out / "synthetic-scenes-n800-s123.h5").resolve())}
    (out / "reproduce.json").write_text(json.dumps(record))
    code, _, err = run(["demo", "--out", str(out), "--num", "50"], capsys)
    assert code == 2
    assert "not on 50 scenes of 16-pixel views" in err
    # The same scenes at another view size are another dataset: refused the same way.
    code, _, err = run(["demo", "--out", str(out), "--num", "800"], capsys)
    assert code == 2
    assert "not on 800 scenes of 16-pixel views (a demo from before 16-pixel views: " in err
    assert "--view-size 32 --epochs 10 --seeds 4 continues it)" in err
    code, _, err = run(["demo", "--out", str(out), "--view-size", "20"], capsys)
    assert code == 2
    assert "20 is not a multiple of 8" in err
    assert sorted(p.name for p in out.iterdir()) == ["reproduce.json"]


def test_demo_unknown_method_generates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "demo"
    code, _, err = run(["demo", "--out", str(out), "--methods", "ltla,nope"], capsys)
    assert code == 2
    assert "unknown method 'nope'" in err
    assert not out.exists()


def test_demo_bad_sidekick_option_generates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "demo"
    code, _, err = run(["demo", "--out", str(out), "--sidekick-option", "decay=2"], capsys)
    assert code == 2
    assert "no selected sidekick has option 'decay'" in err
    assert not out.exists()
    code, _, err = run(["demo", "--out", str(out), "--full", "--methods", "ltla"], capsys)
    assert code == 2
    assert "--methods or --full" in err


def test_demo_runs_the_sidekick_comparison_with_seeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "demo"
    args = ["demo", "--out", str(out), "--num", "40", "--pretrain-epochs", "1", "--epochs", "2",
            "--seeds", "2", "--batch-size", "8"]  # fmt: skip
    code, stdout, err = run(args, capsys)
    assert code == 0, err
    table = json.loads((out / "table.json").read_text())
    methods = [row["method"] for row in table["rows"]]
    assert methods == ["one-view", "rnd-actions", "ltla", "ours(rew)", "ours(demo)"]
    assert [row["seeds"] for row in table["rows"]] == [1, 2, 2, 2, 2]
    rew = table["rows"][3]
    assert rew["paired"]["ltla"]["avg"]["kind"] == "seeds"
    assert rew["paired"]["ltla"]["avg"]["n_seeds"] == 2
    assert set(rew["policy_gain_ratio"]) == {"avg", "adv"}
    assert rew["learning"]["epochs"] == 2
    assert [claim["name"] for claim in table["claims"]] == [
        "learning works", "ours(rew) beats ltla", "ours(demo) beats ltla",
        "ours(rew) learns faster than ltla", "ours(demo) learns faster than ltla",
    ]  # fmt: skip
    assert {claim["verdict"] for claim in table["claims"]} <= {
        "holds", "not resolved", "contradicted"
    }  # fmt: skip
    # The defaults of a 2-epoch run, recorded: the bonus halves after epoch 1, T_sup anneals
    # every epoch; the start view's reward is spent at reset.
    config = json.loads((out / "ours(rew)" / "seed-1" / "config.json").read_text())
    assert config["sidekick_options"]["decay_every"] == 1
    assert config["start_zeroing"] == "view"
    demo = json.loads((out / "ours(demo)" / "seed-0" / "config.json").read_text())
    assert demo["sidekick_options"] == {"hybrid_schedule": 1}
    assert "The paper's effects" in stdout
    page = (out / "index.html").read_text()
    assert "<h2>The paper's effects</h2>" in page
    assert "<h2>Learning speed</h2>" in page
    assert (out / "curves.png").is_file()
    assert "reproduce: done in" in err
    # Its own power plan is for 800 scenes of 16-pixel views: not these.
    assert "demo: its power plan is for 800 scenes of 16-pixel views; these claims are " in err
    assert "plan" not in table
    assert not (out / "plan.json").exists()
