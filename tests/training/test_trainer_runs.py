"""Trainer stages: files written, freezing, validation purity, reshuffling, exact resume."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from pyskick.checkpoint import load_checkpoint
from pyskick.errors import UserError
from pyskick.training.data import TrainData
from pyskick.training.loggers import read_metrics
from pyskick.training.trainer import Trainer, pretrain, train


@pytest.fixture
def pretrained(tmp_path, tiny_config, tiny_data):
    result = pretrain(tiny_config, tmp_path / "pre", tiny_data)
    return result.run_dir


def test_pretrain_writes_run_files(pretrained, tiny_config):
    config = json.loads((pretrained / "config.json").read_text())
    assert config["stage"] == "pretrain"
    assert config["T"] == 1
    assert config["device_used"] == "cpu"  # what config.device resolved to, beside it
    records = read_metrics(pretrained / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1]
    for key in ("train/rec_error", "val/rec_error", "perf/episodes_per_s", "perf/env_share"):
        assert all(r[key] is not None for r in records)
    assert 0.0 < records[0]["perf/env_share"] < 1.0
    state = load_checkpoint(pretrained / "latest.pt")
    assert state["stage"] == "pretrain"
    assert state["epoch"] == 1
    assert state["config"]["pretrain_epochs"] == tiny_config.pretrain_epochs
    assert (pretrained / "best.pt").is_file()
    assert state["best_val"] == min(r["val/rec_error"] for r in records)


def test_pretrain_leaves_the_act_head_alone(tmp_path, tiny_config, tiny_data):
    trainer = Trainer(tiny_config, tmp_path / "p", tiny_data, stage="pretrain").setup()
    before = {k: v.clone() for k, v in trainer.policy.named_parameters()}
    trainer.fit()
    after = dict(trainer.policy.named_parameters())
    # No action at T = 1: no gradient, and no weight-decay drift either (BN statistics move).
    assert all(torch.equal(before[k], after[k]) for k in before if k.startswith("act."))
    assert not torch.equal(before["aggregate.weight_hh_l0"], after["aggregate.weight_hh_l0"])


@pytest.mark.parametrize("batchnorm", ["train", "eval"])
def test_train_freezes_sense_and_fuse(tmp_path, pretrained, tiny_config, tiny_data, batchnorm):
    init = load_checkpoint(pretrained / "best.pt")["model"]
    config = tiny_config.replace(epochs=1, frozen_batchnorm=batchnorm)
    trainer = Trainer(config, tmp_path / "t", tiny_data, stage="train", init=pretrained)
    trainer.fit()
    after = trainer.policy.state_dict()
    frozen = [k for k in init if k.split(".")[0] in ("sense_im", "sense_pro", "fuse")]
    params = dict(trainer.policy.named_parameters())
    for key in frozen:
        if key in params:
            assert torch.equal(init[key], after[key]), key
    stats_moved = not torch.equal(init["fuse.3.running_mean"], after["fuse.3.running_mean"])
    assert stats_moved == (batchnorm == "train")  # the authors' frozen BN keeps updating
    assert not torch.equal(init["aggregate.weight_hh_l0"], after["aggregate.weight_hh_l0"])


def test_validation_is_deterministic_and_pure(tmp_path, pretrained, tiny_config, tiny_data):
    trainer = Trainer(tiny_config, tmp_path / "t", tiny_data, stage="train", init=pretrained)
    trainer.setup().train_epoch(0)
    baseline = trainer.baseline.state_dict()
    weights = {k: v.clone() for k, v in trainer.policy.state_dict().items()}
    rng = trainer.action_generator.get_state()
    assert trainer.validate() == trainer.validate()
    assert trainer.baseline.state_dict() == baseline
    assert torch.equal(trainer.action_generator.get_state(), rng)
    assert all(torch.equal(weights[k], v) for k, v in trainer.policy.state_dict().items())


def test_every_epoch_reshuffles(tmp_path, tiny_config, tiny_data):
    trainer = Trainer(tiny_config, tmp_path / "p", tiny_data, stage="pretrain").setup()
    order0, starts0 = trainer.epoch_batches(0)
    order1, _ = trainer.epoch_batches(1)
    assert order0.shape == (2, 8)
    assert starts0.shape == (2, 8)
    assert not torch.equal(order0, order1)
    assert torch.equal(order0, trainer.epoch_batches(0)[0])
    assert sorted(order0.flatten().tolist()) == list(range(16))


@pytest.mark.parametrize("critic", ["average", "critic"])
def test_resume_is_exact(tmp_path, pretrained, tiny_config, tiny_data, critic):
    config = tiny_config.replace(epochs=3, critic=critic)
    full = Trainer(config, tmp_path / "full", tiny_data, stage="train", init=pretrained)
    full.fit()
    train(config.replace(epochs=1), tmp_path / "cut", tiny_data, init=pretrained)
    resumed = Trainer(config, tmp_path / "cut", tiny_data, stage="train", resume=True).setup()
    assert resumed.start_epoch == 1
    resumed.fit()
    a, b = full.state_dict(2), resumed.state_dict(2)
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    if critic == "critic":
        for key in a["critic"]:
            assert torch.equal(a["critic"][key], b["critic"][key]), key
    assert a["baseline"] == b["baseline"]
    assert a["history"] == b["history"]
    strip = [
        {k: v for k, v in r.items() if not k.startswith(("time", "perf/"))}
        for r in read_metrics(tmp_path / "full" / "metrics.jsonl")
    ]
    strip_cut = [
        {k: v for k, v in r.items() if not k.startswith(("time", "perf/"))}
        for r in read_metrics(tmp_path / "cut" / "metrics.jsonl")
    ]
    assert strip == strip_cut


def test_resume_refuses_a_changed_config(tmp_path, pretrained, tiny_config, tiny_data):
    train(tiny_config.replace(epochs=1), tmp_path / "run", tiny_data, init=pretrained)
    with pytest.raises(ValueError, match=r"config field lr is 0\.5 but the run used"):
        train(tiny_config.replace(lr=0.5), tmp_path / "run", tiny_data, resume=True)
    with pytest.raises(FileNotFoundError):
        train(tiny_config, tmp_path / "none", tiny_data, resume=True)
    other = TrainData(tiny_data.train[:, :, :2], tiny_data.val[:, :, :2], (1.0,))
    with pytest.raises(ValueError, match=r"viewgrids \[3, 2, 1, 16\] do not match"):
        train(tiny_config, tmp_path / "run", other, resume=True)
    before = (tmp_path / "run" / "metrics.jsonl").read_text()
    with pytest.raises(ValueError, match="already holds a run; resume it"):
        train(tiny_config, tmp_path / "run", tiny_data, init=pretrained)
    assert (tmp_path / "run" / "metrics.jsonl").read_text() == before


def test_a_resume_does_not_shorten_a_run(tmp_path, pretrained, tiny_config, tiny_data):
    """A resume asking for fewer epochs than trained would record a config that its
    checkpoints, log and best.pt contradict: refused before anything is written."""
    run = tmp_path / "run"
    train(tiny_config.replace(epochs=2), run, tiny_data, init=pretrained)
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    with pytest.raises(UserError, match=r"for 1 epochs: it has trained 2 \(a resume extends"):
        train(tiny_config.replace(epochs=1), run, tiny_data, resume=True)
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before
    assert train(tiny_config.replace(epochs=2), run, tiny_data, resume=True).epochs == 2
    pre = tmp_path / "pre-run"
    pretrain(tiny_config.replace(pretrain_epochs=2), pre, tiny_data)
    with pytest.raises(UserError, match=r"for 1 epochs: it has trained 2"):
        pretrain(tiny_config.replace(pretrain_epochs=1), pre, tiny_data, resume=True)


def test_a_policy_run_of_one_glimpse_is_refused(tmp_path, pretrained, tiny_config, tiny_data):
    with pytest.raises(UserError, match=r"T is 1: a policy run needs at least 2 glimpses"):
        train(tiny_config.replace(T=1), tmp_path / "run", tiny_data, init=pretrained)
    assert not (tmp_path / "run").exists()


def test_a_resume_keeps_the_count_of_the_other_stage(tmp_path, pretrained, tiny_config, tiny_data):
    """A policy run's pretrain_epochs records how its one-view model was pretrained (and a
    pretraining's epochs are moot): a resume's other value (a command line's default) does
    not rewrite them."""
    run = tmp_path / "run"
    train(tiny_config.replace(epochs=1), run, tiny_data, init=pretrained)
    recorded = tiny_config.pretrain_epochs
    train(tiny_config.replace(epochs=2, pretrain_epochs=recorded + 5), run, tiny_data, resume=True)
    assert json.loads((run / "config.json").read_text())["pretrain_epochs"] == recorded
    assert load_checkpoint(run / "latest.pt")["config"]["pretrain_epochs"] == recorded
    pre = tmp_path / "pre-run"
    pretrain(tiny_config.replace(pretrain_epochs=1, epochs=3), pre, tiny_data)
    pretrain(tiny_config.replace(pretrain_epochs=2, epochs=9), pre, tiny_data, resume=True)
    saved = json.loads((pre / "config.json").read_text())
    assert (saved["pretrain_epochs"], saved["epochs"]) == (2, 3)


def test_a_run_does_not_start_in_a_reproduce_or_export_folder(tmp_path, tiny_config, tiny_data):
    for folder, marker, kind in [("table", "reproduce.json", "reproduce"),
                                 ("export", "pyskick-export.json", "export")]:  # fmt: skip
        (tmp_path / folder).mkdir()
        (tmp_path / folder / marker).write_text("{}")
        with pytest.raises(ValueError, match=f"is an? {kind} folder"):
            Trainer(tiny_config, tmp_path / folder, tiny_data, stage="pretrain").fit()
        assert sorted(p.name for p in (tmp_path / folder).iterdir()) == [marker]


def test_bad_init_and_batch(tmp_path, pretrained, tiny_config, tiny_data):
    with pytest.raises(ValueError, match="another architecture"):
        train(tiny_config.replace(model="paper-sun360"), tmp_path / "x", tiny_data, init=pretrained)
    with pytest.raises(ValueError, match="batch_size 32 exceeds the 16 training viewgrids"):
        pretrain(tiny_config.replace(batch_size=32), tmp_path / "y", tiny_data)


@pytest.mark.parametrize(("actor", "critic"), [("random", "average"), ("learned", "asymm-critic")])
def test_other_actors_and_critics_train(
    tmp_path, pretrained, tiny_config, tiny_data, actor, critic
):
    config = tiny_config.replace(epochs=1, actor=actor, critic=critic)
    trainer = Trainer(config, tmp_path / "t", tiny_data, stage="train", init=pretrained).setup()
    act_before = {k: v.clone() for k, v in trainer.policy.act.state_dict().items()}
    result = trainer.fit()
    assert result.epochs == 1
    assert result.best_val > 0
    moved = any(
        not torch.equal(act_before[k], v)
        for k, v in trainer.policy.act.state_dict().items()
        if "running" not in k and "num_batches" not in k
    )
    assert moved == (actor == "learned")
    assert (trainer.critic is not None) == (critic == "asymm-critic")


def test_pretrain_resume_is_exact(tmp_path, tiny_config, tiny_data):
    full = Trainer(
        tiny_config.replace(pretrain_epochs=2), tmp_path / "a", tiny_data, stage="pretrain"
    )
    full.fit()
    pretrain(tiny_config.replace(pretrain_epochs=1), tmp_path / "b", tiny_data)
    resumed = Trainer(tiny_config, tmp_path / "b", tiny_data, stage="pretrain", resume=True)
    resumed.fit()
    a, b = full.policy.state_dict(), resumed.policy.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(ValueError, match="cannot resume a 'pretrain' run as a 'train' run"):
        train(tiny_config, tmp_path / "b", tiny_data, resume=True)


def test_train_data_is_checked(tiny_data):
    with pytest.raises(TypeError, match="train grids must be uint8"):
        TrainData(tiny_data.train.float(), tiny_data.val, (120.0,))
    with pytest.raises(ValueError, match="train and val viewgrids differ in shape"):
        TrainData(tiny_data.train, tiny_data.val[:, :2], (120.0,))
    with pytest.raises(ValueError, match="channel_mean has 3 values for 1 channels"):
        TrainData(tiny_data.train, tiny_data.val, (1.0, 2.0, 3.0))
    with pytest.raises(ValueError, match="non-empty"):
        TrainData(tiny_data.train[:0], tiny_data.val, (120.0,))
    assert tiny_data.grid_shape == (3, 4, 1, 16)


def test_a_sidekicks_reward_radius_and_options_survive_resume(
    tmp_path, pretrained, tiny_config, tiny_data
):
    # A radius-2 reward sidekick (ModelNet-like): its radius sets the config before a resumed
    # run is compared with the recorded one; resumed without the object, the run rebuilds it
    # from the recorded name and options, and ends where an uninterrupted run ends.
    from pyskick.sidekicks import make_sidekick

    config = tiny_config.replace(epochs=3)

    def sidekick():
        # Through the registry: the run records the name "rnd-rewards" stamped on it.
        options = {"k": 2, "radius": 2, "decay_every": 1}
        return make_sidekick(
            "rnd-rewards", one_view=None, spec=tiny_data.spec, config=config, options=options
        )

    full = Trainer(config, tmp_path / "full", tiny_data, stage="train", init=pretrained,
                   sidekick=sidekick())  # fmt: skip
    full.fit()
    assert full.config.reward_radius == 2
    assert full.config.sidekick == "rnd-rewards"
    assert full.config.sidekick_options["decay_every"] == 1
    cut = tmp_path / "cut"
    train(config.replace(epochs=1), cut, tiny_data, init=pretrained, sidekick=sidekick())
    train(config.replace(epochs=2), cut, tiny_data, resume=True, sidekick=sidekick())
    resumed = Trainer(config, cut, tiny_data, stage="train", resume=True).setup()
    assert resumed.config.reward_radius == 2
    assert resumed.sidekick.options == full.sidekick.options
    resumed.fit()
    a, b = full.state_dict(2), resumed.state_dict(2)
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    assert a["sidekick"] == b["sidekick"]


def test_a_run_given_its_sidekick_resumes_after_the_sidekick_gains_an_option(
    tmp_path, pretrained, tiny_config, tiny_data
):
    # The run's records predate the option "radius" (rewritten so): the sidekick object given
    # at resume supplies it, as the registry's default would for a run rebuilding its own;
    # an option both have must agree.
    from pyskick.checkpoint import save_checkpoint
    from pyskick.sidekicks import make_sidekick

    config = tiny_config.replace(epochs=2)

    def sidekick(**changes):
        options = {"k": 2, "radius": 1, "decay_every": 1, **changes}
        return make_sidekick(
            "rnd-rewards", one_view=None, spec=tiny_data.spec, config=config, options=options
        )

    full = train(config, tmp_path / "full", tiny_data, init=pretrained, sidekick=sidekick())
    cut = tmp_path / "cut"
    train(config.replace(epochs=1), cut, tiny_data, init=pretrained, sidekick=sidekick())
    state = load_checkpoint(cut / "latest.pt")
    del state["config"]["sidekick_options"]["radius"]
    save_checkpoint(cut / "latest.pt", {k: v for k, v in state.items() if k != "format"})
    with pytest.raises(ValueError, match=r"cannot resume: sidekick 'rnd-rewards' option k is 3 "
                       r"but the run used 2$"):  # fmt: skip
        train(config, cut, tiny_data, resume=True, sidekick=sidekick(k=3))
    resumed = train(config, cut, tiny_data, resume=True, sidekick=sidekick())
    assert resumed.history == full.history
    assert load_checkpoint(cut / "latest.pt")["config"]["sidekick_options"]["radius"] == 1


def test_constructing_a_trainer_is_cheap_and_writes_nothing(
    tmp_path, monkeypatch, pretrained, tiny_config, tiny_data
):
    # A resumable run folder and a sidekick to prepare (score the data): neither is touched,
    # and no process group joined, until setup() (fit() runs it) takes its steps in order.
    from pyskick.sidekicks.base import Sidekick

    class Counting(Sidekick):
        name = "counting"
        prepared = 0

        def prepare(self, grids, *, T, device):
            self.prepared += 1

    config = tiny_config.replace(epochs=2)
    train(config.replace(epochs=1), tmp_path / "run", tiny_data, init=pretrained,
          sidekick=Counting())  # fmt: skip
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    steps = []
    names = (
        "_resolve_config", "_make_sidekick", "_init_distributed", "_make_actor",
        "_build_models", "_prepare_sidekick", "_restore", "_wrap_ddp", "_open_run",
    )  # fmt: skip
    for step in names:
        original = getattr(Trainer, step)

        def spy(self, *args, _step=step, _original=original, **kwargs):
            steps.append(_step)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(Trainer, step, spy)
    sidekick = Counting()
    trainer = Trainer(
        config, tmp_path / "run", tiny_data, stage="train", resume=True, sidekick=sidekick
    )
    fresh = Trainer(config, tmp_path / "new" / "run", tiny_data, stage="train", init=pretrained)
    assert steps == []
    assert sidekick.prepared == 0
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before
    assert not (tmp_path / "new").exists()
    with pytest.raises(AttributeError, match=r"Trainer\.policy is built by setup\(\)"):
        _ = fresh.policy
    assert trainer.config is config  # as requested until setup() resolves it
    assert trainer.setup() is trainer
    assert steps == list(names[:-1])
    assert trainer.start_epoch == 1
    assert trainer.config.sidekick == "counting"
    assert sidekick.prepared == 1
    trainer.setup()
    assert steps == list(names[:-1])  # once
    fresh.setup()
    assert not (tmp_path / "new").exists()  # setup() writes nothing either
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before
    trainer.fit()
    assert steps[-1] == "_open_run"
    assert load_checkpoint(tmp_path / "run" / "latest.pt")["epoch"] == 1


def test_a_resume_whose_sidekick_would_score_otherwise_is_refused(tmp_path, tiny_config, tiny_data):
    """A reward sidekick scores with the one-view model: trained further since the run
    started, it would give other rewards to the epochs to come (no exact resume). Refused
    before any scoring; unchanged, the resume goes on; a checkpoint that predates the record
    resumes as before."""
    from pyskick.checkpoint import save_checkpoint
    from pyskick.sidekicks.reward import RewardSidekick

    one_view = tmp_path / "one-view"
    pretrain(tiny_config.replace(pretrain_epochs=1), one_view, tiny_data)

    def sidekick():
        return RewardSidekick(one_view, channel_mean=(120.0,))

    run = tmp_path / "rew"
    train(tiny_config.replace(epochs=1), run, tiny_data, init=one_view, sidekick=sidekick())
    recorded = load_checkpoint(run / "latest.pt")["sidekick_scores"]
    assert set(recorded) >= {"one_view_sha256", "k", "radius"}
    train(tiny_config.replace(epochs=2), run, tiny_data, resume=True, sidekick=sidekick())
    pretrain(tiny_config.replace(pretrain_epochs=2), one_view, tiny_data, resume=True)
    # Its best.pt, what scores, now the second epoch's (whether or not validation improved).
    shutil.copyfile(one_view / "latest.pt", one_view / "best.pt")
    before = (run / "latest.pt").read_bytes()
    # The one-view run's own record (init_sha256) tells first; without it, the scores'.
    with pytest.raises(UserError, match=r"not the model .* started from \(its checkpoint changed"):
        train(tiny_config.replace(epochs=3), run, tiny_data, resume=True, sidekick=sidekick())
    assert (run / "latest.pt").read_bytes() == before
    state = load_checkpoint(run / "latest.pt")
    del state["init_sha256"]
    save_checkpoint(run / "latest.pt", state)
    before = (run / "latest.pt").read_bytes()
    with pytest.raises(UserError, match=r"score with other one_view_sha256 than when the run"):
        train(tiny_config.replace(epochs=3), run, tiny_data, resume=True, sidekick=sidekick())
    assert (run / "latest.pt").read_bytes() == before
    state = load_checkpoint(run / "latest.pt")
    del state["sidekick_scores"]  # as an older pyskick wrote it
    save_checkpoint(run / "latest.pt", state)
    assert (
        train(
            tiny_config.replace(epochs=3), run, tiny_data, resume=True, sidekick=sidekick()
        ).epochs
        == 3
    )


def test_recorded_scores_are_plain_json_and_a_nan_option_equals_itself(tmp_path, pretrained):
    """The record goes into checkpoints loaded weights-only: numpy numbers and tuples a
    sidekick's options may hold become plain types; NaN options compare equal."""
    import numpy as np

    from pyskick.checkpoint import save_checkpoint
    from pyskick.sidekicks.reward import RewardSidekick
    from pyskick.training.state import check_same_scores, sidekick_scores

    record = sidekick_scores(RewardSidekick(pretrained, channel_mean=np.array([120.0])), 3)
    assert record is not None
    assert type(record["channel_mean"][0]) is float
    save_checkpoint(tmp_path / "c.pt", {"sidekick_scores": record})
    assert load_checkpoint(tmp_path / "c.pt")["sidekick_scores"] == record
    check_same_scores(tmp_path, {"x": float("nan")}, {"x": float("nan")})
    with pytest.raises(UserError, match="other x than when"):
        check_same_scores(tmp_path, {"x": 1.0}, {"x": 2.0})
