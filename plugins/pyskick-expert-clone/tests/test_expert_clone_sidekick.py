"""The expert-clone sidekick: score contract, trajectories, demonstrations, T_sup schedule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from pyskick_expert_clone.sidekick import ExpertCloneSidekick
from pyskick_expert_clone.training import ExpertSettings

from pyskick.data import ViewgridFile
from pyskick.run_dir import checkpoint_digest
from pyskick.sidekicks import make_sidekick
from pyskick.training import TrainConfig, TrainData

T = 3
CPU = torch.device("cpu")


def expert_clone(
    one_view: Path, scenes: TrainData, *, seed: int = 5, hybrid_schedule: int = 2
) -> ExpertCloneSidekick:
    """Built by hand with a tiny expert (the registry's factory takes the run's config)."""
    settings = ExpertSettings(
        epochs=2, batch_size=4, lr=1e-3, weight_decay=1e-6, grad_clip=10.0,
        lambda_entropy=1e-4, seed=seed,
    )  # fmt: skip
    return ExpertCloneSidekick(
        one_view,
        channel_mean=scenes.channel_mean,
        settings=settings,
        hybrid_schedule=hybrid_schedule,
        batch_size=64,
    )


@pytest.fixture(scope="module")
def grids(scenes: TrainData) -> torch.Tensor:
    return scenes.train[:8]


@pytest.fixture(scope="module")
def scores(one_view: Path, scenes: TrainData, grids: torch.Tensor) -> dict[str, torch.Tensor]:
    torch.set_num_threads(1)
    return expert_clone(one_view, scenes).compute_scores(grids, T=T, device=CPU)


def test_trajectories_are_valid(scores: dict[str, torch.Tensor], grids: torch.Tensor) -> None:
    trajectories, errors = scores["trajectories"], scores["errors"]
    assert trajectories.dtype == torch.int64
    assert trajectories.shape == (grids.shape[0], 32, T - 1)
    assert trajectories.min() >= 0
    assert trajectories.max() < 15
    assert errors.shape == (grids.shape[0], 32)
    assert errors.dtype == torch.float32
    assert bool((errors > 0).all())


def test_same_seed_same_trajectories_and_global_rng_untouched(
    one_view: Path, scenes: TrainData, grids: torch.Tensor, scores: dict[str, torch.Tensor]
) -> None:
    torch.manual_seed(99)
    before = torch.get_rng_state()
    sidekick = expert_clone(one_view, scenes)
    again = sidekick.compute_scores(grids, T=T, device=CPU)
    assert torch.equal(torch.get_rng_state(), before)
    assert torch.equal(again["trajectories"], scores["trajectories"])
    assert torch.equal(again["errors"], scores["errors"])
    assert [e.epoch for e in sidekick.history] == [0, 1]
    assert all(e.train_error > 0 and e.seconds > 0 for e in sidekick.history)


def test_score_options_name_what_the_scores_depend_on(one_view: Path, scenes: TrainData) -> None:
    sidekick = expert_clone(one_view, scenes)
    options = sidekick.score_options(4)
    assert json.loads(json.dumps(options)) == options  # plain JSON types
    assert options["one_view_sha256"] == checkpoint_digest(one_view)
    assert options["T"] == 4
    assert options["expert_epochs"] == 2
    assert options["seed"] == 5
    assert options != sidekick.score_options(3)
    assert options != expert_clone(one_view, scenes, seed=6).score_options(4)
    assert sidekick.shardable is False


def test_demonstrations_follow_the_trajectories_and_t_sup_anneals(
    one_view: Path, scenes: TrainData, scores: dict[str, torch.Tensor]
) -> None:
    sidekick = expert_clone(one_view, scenes, hybrid_schedule=2)
    sidekick.load_scores(scores, T=T, device=CPU)
    indices = torch.tensor([3, 0, 7, 3])
    starts = torch.tensor([0, 31, 12, 5])
    expected = scores["trajectories"][indices, starts].T
    seen = []
    for epoch in range(6):
        demos = sidekick.demonstrations(indices, starts, epoch)
        if demos is None:
            seen.append(0)
        else:
            actions, mask = demos
            assert torch.equal(actions, expected)
            assert mask.dtype == torch.bool
            assert mask.shape == (T - 1, 4)
            assert bool((mask.all(1) | ~mask.any(1)).all())  # whole steps, as a prefix
            seen.append(int(mask[:, 0].sum()))
        sidekick.on_epoch_end(epoch)
    assert seen == [2, 2, 1, 1, 0, 0]


def test_state_dict_resumes_the_schedule(
    one_view: Path, scenes: TrainData, scores: dict[str, torch.Tensor]
) -> None:
    sidekick = expert_clone(one_view, scenes, hybrid_schedule=1)
    sidekick.load_scores(scores, T=T, device=CPU)
    sidekick.on_epoch_end(0)
    saved = sidekick.state_dict()
    assert saved == {"T_sup": 1}
    # The trainer restores the checkpoint after prepare(); a restore before must survive too.
    for restore_first in (False, True):
        resumed = expert_clone(one_view, scenes, hybrid_schedule=1)
        if restore_first:
            resumed.load_state_dict(saved)
        resumed.load_scores(scores, T=T, device=CPU)
        if not restore_first:
            resumed.load_state_dict(saved)
        _, mask = resumed.demonstrations(torch.tensor([1]), torch.tensor([2]), 1)
        assert mask[:, 0].tolist() == [True, False]
        resumed.on_epoch_end(1)
        assert resumed.demonstrations(torch.tensor([1]), torch.tensor([2]), 2) is None
    with pytest.raises(ValueError, match="T_sup"):
        resumed.load_state_dict({"T_sup": 5})
    with pytest.raises(ValueError, match="T_sup"):
        resumed.load_state_dict({"T_sup": -1})


def test_bad_scores_and_use_before_prepare(
    one_view: Path, scenes: TrainData, scores: dict[str, torch.Tensor]
) -> None:
    sidekick = expert_clone(one_view, scenes)
    with pytest.raises(RuntimeError, match="prepare"):
        sidekick.demonstrations(torch.tensor([0]), torch.tensor([0]), 0)
    with pytest.raises(ValueError, match="T=4 needs 3"):
        sidekick.load_scores(scores, T=4, device=CPU)
    with pytest.raises(ValueError, match="int64"):
        sidekick.load_scores({"trajectories": scores["trajectories"].float()}, T=T, device=CPU)
    with pytest.raises(ValueError, match="batch_size"):
        expert_clone(one_view, scenes).compute_scores(scenes.train[:3], T=T, device=CPU)


def test_factory_takes_the_run_settings(
    one_view: Path, tiny_scenes: Path, config: TrainConfig
) -> None:
    spec = ViewgridFile(tiny_scenes).spec
    sidekick = make_sidekick("expert-clone", one_view=one_view, spec=spec, config=config)
    assert sidekick.name == "expert-clone"
    # Not config.epochs: a resumed run may raise it, and the expert must stay the same.
    assert sidekick.settings.epochs == config.pretrain_epochs
    assert dict(sidekick.options) == {
        "hybrid_schedule": max(1, round(config.epochs * 0.05)),
        "expert_epochs": config.pretrain_epochs,
    }
    longer_run = make_sidekick(
        "expert-clone",
        one_view=one_view,
        spec=spec,
        config=config.replace(epochs=config.epochs + 5),
    )
    assert longer_run.score_options(4) == sidekick.score_options(4)
    assert sidekick.settings.lr == config.lr
    assert sidekick.settings.seed == config.seed
    assert sidekick.channel_mean == tuple(spec.channel_mean)
    longer = make_sidekick(
        "expert-clone", one_view=one_view, spec=spec, config=config,
        options={"expert_epochs": "7", "hybrid_schedule": "3"},
    )  # fmt: skip
    assert longer.settings.epochs == 7
    assert longer.hybrid_schedule == 3
    with pytest.raises(ValueError, match="expert_epochs must be an int >= 1"):
        make_sidekick(
            "expert-clone", one_view=one_view, spec=spec, config=config,
            options={"expert_epochs": "0"},
        )  # fmt: skip


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"lr": 0.0}, ValueError, "lr"),
        ({"grad_clip": float("nan")}, ValueError, "grad_clip"),
        ({"batch_size": 1}, ValueError, "batch_size"),
        ({"seed": True}, TypeError, "seed"),
        ({"lambda_entropy": "0.1"}, TypeError, "lambda_entropy"),
    ],
)
def test_bad_expert_settings_are_named(
    config: TrainConfig, change: dict[str, object], error: type[Exception], message: str
) -> None:
    good = ExpertSettings.from_config(config).to_dict()
    with pytest.raises(error, match=message):
        ExpertSettings(**{**good, **change})
