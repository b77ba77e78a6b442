"""The demo's own power plan is for the demo's default settings: a change of a default (an
epoch count, a sidekick's schedule) that the plan was not remade for fails here, not silently
in `make demo` (which would then judge every claim by its intervals alone)."""

from __future__ import annotations

from pathlib import Path

from pyskick.builtins.demo import DEMO_PLAN
from pyskick.experiments.power_plan import read_plan
from pyskick.experiments.reproduce import _prepare as reproduce_call
from pyskick.sidekicks.factory import for_run
from pyskick_cli.commands.demo import BATCH_SIZE, DEMO_METHODS, EPOCHS, PRETRAIN_EPOCHS, SEEDS


def test_the_demo_plan_is_for_the_demo_defaults(scenes: Path, tmp_path: Path) -> None:
    plan = read_plan(DEMO_PLAN)
    assert plan.pilot["eval_split"] == "val"
    assert plan.pilot["seeds"] >= SEEDS
    # What `pyskick demo` with its defaults asks `reproduce` for (nothing is written).
    call = reproduce_call(
        scenes, tmp_path / "demo", preset="cpu-demo", config=None, epochs=EPOCHS,
        pretrain_epochs=PRETRAIN_EPOCHS, batch_size=BATCH_SIZE,
        methods=["one-view", *DEMO_METHODS], seeds=SEEDS, seed_offset=0, num_test=None,
        eval_split="test", device="cpu", sidekick_options={}, loggers=None, pack="auto",
    )  # fmt: skip
    design = {k: v for k, v in call.settings.items() if k != "resolved_sidekick_options"}
    different = {k for k in design if plan.settings.get(k) != design[k]}
    assert different <= {"dataset", "dataset_sha256", "n_test", "eval_split"}
    # The options each sidekick resolves for a new run of this design.
    for method in call.trained:
        config = call.train_config.replace(sidekick=method.sidekick)
        options = for_run(method.sidekick, {}, spec=call.source.spec, config=config).options
        assert plan.settings["resolved_sidekick_options"][method.sidekick] == options
    # Every claim of the demo is in the plan.
    assert set(plan.claims) == {
        "learning works",
        "ours(rew) beats ltla",
        "ours(demo) beats ltla",
        "ours(rew) learns faster than ltla",
        "ours(demo) learns faster than ltla",
    }
