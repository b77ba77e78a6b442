"""Packed runs: R runs trained as one model see what they would see alone (batches, starts,
sampled actions, losses and gradients up to float32 rounding), keep their own folders, resume
exactly as a pack and only as that pack."""

from __future__ import annotations

import re

import pytest
import torch

from pyskick.checkpoint import load_checkpoint, save_checkpoint
from pyskick.models.memory_format import is_channels_last
from pyskick.run_dir import RunDir
from pyskick.sidekicks.demo import DemoSidekick
from pyskick.sidekicks.reward import RewardSidekick
from pyskick.training.loggers import read_metrics
from pyskick.training.pack import (
    PackedAdam,
    PackMember,
    PackTrainer,
    clip_per_run,
    commit,
    pack_members,
    pending,
    recover,
    recover_recorded,
    train_pack,
)
from pyskick.training.syncs import no_host_syncs
from pyskick.training.trainer import Trainer, train

MEAN = (120.0,)


def _members(root, pretrained, config, kinds=("ltla", "rnd", "rew", "demo")):
    """One member per kind, each with its own seed (and sidekick)."""
    made = {
        "ltla": lambda k: PackMember(config.replace(seed=11 + k), root / "ltla", init=pretrained),
        "rnd": lambda k: PackMember(
            config.replace(seed=11 + k, actor="random"), root / "rnd", init=pretrained
        ),
        "rew": lambda k: PackMember(
            config.replace(seed=11 + k),
            root / "rew",
            init=pretrained,
            sidekick=RewardSidekick(pretrained, channel_mean=MEAN, decay_every=1),
        ),
        "demo": lambda k: PackMember(
            config.replace(seed=11 + k),
            root / "demo",
            init=pretrained,
            sidekick=DemoSidekick(pretrained, channel_mean=MEAN, hybrid_schedule=1),
        ),
        "ac": lambda k: PackMember(
            config.replace(seed=11 + k, critic="critic"), root / "ac", init=pretrained
        ),
        "ac2": lambda k: PackMember(
            config.replace(seed=21 + k, critic="critic"), root / "ac2", init=pretrained
        ),
    }
    return [made[kind](k) for k, kind in enumerate(kinds)]


def _solo(member, data):
    return Trainer(
        member.config,
        member.out_dir,
        data,
        stage="train",
        init=member.init,
        sidekick=member.sidekick,
        actor=member.actor,
    )


@pytest.mark.parametrize("kinds", [("ltla", "rnd", "rew", "demo"), ("ac", "ac2")])
@pytest.mark.parametrize(
    "switches",
    [{}, {"channels_last": True}, {"decode_once": True}, {"packed_convs": "grouped"}],
    ids=["nchw", "channels-last", "decode-once", "grouped-convs"],
)
def test_one_packed_step_is_each_runs_step(
    tmp_path, pretrained, tiny_config, tiny_data, kinds, switches
):
    """The pack (channels-last, decoding once, or neither) against its runs alone (neither)."""
    config = tiny_config.replace(epochs=1)
    pack_config = config.replace(**switches)
    members = _members(tmp_path / "pack", pretrained, pack_config, kinds)
    packed = PackTrainer(members, tiny_data).setup()
    assert is_channels_last(packed.policy) is bool(switches.get("channels_last"))
    modules = [*packed.policy.modules(), *(packed.critic.modules() if packed.critic else ())]
    convs = {layer.convs for layer in modules if hasattr(layer, "convs")}
    assert convs == {switches.get("packed_convs", "auto")}
    solos = [
        _solo(m, tiny_data).setup() for m in _members(tmp_path / "solo", pretrained, config, kinds)
    ]
    batch = next(packed.batches(0))
    R, B = len(members), tiny_config.batch_size
    scales = torch.tensor(
        [t.sidekick.reward_scale(0) for t in packed.trainers], dtype=torch.float64
    )
    for solo in solos:  # grads before the update: no step in either
        solo.optimizer.step = lambda: None  # type: ignore[method-assign]
    packed.optimizer.step = lambda: None  # type: ignore[method-assign]
    with no_host_syncs():
        metrics = packed.train_step(batch, 0, scales)
    grads = {n: p.grad for n, p in packed.policy.named_parameters() if p.grad is not None}
    for r, solo in enumerate(solos):
        solo_batch = next(solo.batches(0))
        # The same batch (its own epoch order) and starts.
        assert torch.equal(batch.indices[r], solo_batch.indices)
        assert torch.equal(batch.starts[r], solo_batch.starts)
        assert torch.equal(batch.grids.view(B, R, *batch.grids.shape[1:])[:, r], solo_batch.grids)
        step = solo.train_step(solo_batch, 0)
        for name in (
            "rec_error",
            "loss",
            "policy_loss",
            "entropy",
            "supervised_loss",
            "critic_loss",
        ):
            torch.testing.assert_close(
                getattr(metrics, name)[r], getattr(step, name), rtol=1e-5, atol=1e-7
            )
        scale = max(float(p.grad.abs().max()) for p in solo.params if p.grad is not None)
        for name, param in solo.policy.named_parameters():
            if param.grad is not None:
                torch.testing.assert_close(grads[name][r], param.grad, rtol=1e-4, atol=1e-4 * scale)
        # The same sampled actions: the generators moved alike.
        assert torch.equal(
            packed.trainers[r].action_generator.get_state(), solo.action_generator.get_state()
        )


def _validated_alone(packed: PackTrainer) -> list[int]:
    """Spy on the runs' own validation: the list counts the runs that validated alone."""
    calls: list[int] = []
    for r, trainer in enumerate(packed.trainers):
        original = trainer.validate
        trainer.validate = lambda r=r, original=original: calls.append(r) or original()  # type: ignore[method-assign]
    return calls


@pytest.mark.parametrize(
    ("val_metrics", "eval_batch", "packed_pass"),
    [(("avg",), 40, True), (("avg", "adv"), 40, False), (("avg",), 15, False)],
    ids=["one-metric", "two-metrics", "batch-under-one-sample-of-every-run"],
)
def test_a_pack_validates_its_runs_at_once_as_each_alone(
    tmp_path, pretrained, tiny_config, tiny_data, val_metrics, eval_batch, packed_pass
):
    """After an epoch (weights apart), the pack's validation is each run's own, within
    float32 rounding, in passes of 40 episodes (two samples' 4 starts of the 4 runs, in three
    passes over the 6 grids); runs of different metrics, or a batch under one sample's
    episodes of every run (4 x 4 = 16), validate one by one, exactly as alone."""
    config = tiny_config.replace(epochs=1, eval_batch_size=eval_batch)
    members = _members(tmp_path, pretrained, config)
    members = [
        PackMember(
            m.config.replace(val_metric=val_metrics[k % len(val_metrics)]),
            m.out_dir,
            init=m.init,
            sidekick=m.sidekick,
        )
        for k, m in enumerate(members)
    ]
    packed = PackTrainer(members, tiny_data).setup()
    packed.train_epoch(0)
    packed.write_runs()
    alone = [t.validate() for t in packed.trainers]
    assert len(set(alone)) == len(alone)  # the runs differ
    calls = _validated_alone(packed)
    vals = packed.validate(packed=True)
    if packed_pass:
        assert calls == []
        assert vals == pytest.approx(alone, rel=1e-5)
    else:
        assert calls == [0, 1, 2, 3]
        assert vals == alone
    # On the CPU the pack validates its runs one by one unless asked: exactly as alone.
    calls.clear()
    assert packed.validate() == alone
    assert calls == [0, 1, 2, 3]


def test_a_pack_with_an_actor_sampling_at_test_validates_one_by_one(
    tmp_path, pretrained, tiny_config, tiny_data
):
    config = tiny_config.replace(epochs=1, eval_batch_size=64)
    packed = PackTrainer(_members(tmp_path, pretrained, config, ("ltla", "rnd")), tiny_data)
    packed.setup()
    calls = _validated_alone(packed)
    packed.validate(packed=True)
    assert calls == []
    packed.trainers[1].val_actor.mode = lambda *, training: "sample"  # type: ignore[method-assign]
    packed.validate(packed=True)
    assert calls == [0, 1]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_pack_on_a_gpu_validates_its_runs_at_once(tmp_path, pretrained, tiny_config, tiny_data):
    config = tiny_config.replace(epochs=1, device="cuda")
    packed = PackTrainer(_members(tmp_path, pretrained, config), tiny_data).setup()
    packed.train_epoch(0)
    packed.write_runs()
    calls = _validated_alone(packed)
    vals = packed.validate()
    assert calls == []  # packed: no run validated alone
    # TF32 convolutions (torch's default on cuDNN), summed in another order.
    assert vals == pytest.approx([t.validate() for t in packed.trainers], rel=1e-3)


def test_a_runs_bad_sidekick_inputs_are_refused_naming_the_run(
    tmp_path, pretrained, tiny_config, tiny_data
):
    """Each run's maps and demonstrations are checked as a run alone's before the pack stacks
    them (a stack would promote int32 motions, or fail on a shape without naming the run)."""
    members = _members(tmp_path, pretrained, tiny_config.replace(epochs=1))
    packed = PackTrainer(members, tiny_data).setup()
    batch = next(packed.batches(0))
    scales = torch.zeros(4, dtype=torch.float64)
    rew, demo = packed.trainers[2], packed.trainers[3]
    maps = rew.sidekick.reward_maps
    rew.sidekick.reward_maps = lambda *a: maps(*a).double()  # type: ignore[method-assign]
    with pytest.raises(
        TypeError, match=rf"^{re.escape(str(rew.run_dir))}: reward_maps must be float32"
    ):
        packed.train_step(batch, 0, scales)
    rew.sidekick.reward_maps = maps  # type: ignore[method-assign]
    demos = demo.sidekick.demonstrations

    def int32_motions(*args):
        actions, mask = demos(*args)
        return actions.int(), mask

    demo.sidekick.demonstrations = int32_motions  # type: ignore[method-assign]
    with pytest.raises(TypeError, match=rf"^{re.escape(str(demo.run_dir))}: demonstration actions"):
        packed.train_step(batch, 0, scales)


def test_a_pack_trains_as_its_runs_alone_and_keeps_their_folders(
    tmp_path, pretrained, tiny_config, tiny_data
):
    config = tiny_config.replace(epochs=3)
    members = _members(tmp_path / "pack", pretrained, config)
    results = train_pack(members, tiny_data)
    alone = [
        train(m.config, m.out_dir, tiny_data, init=m.init, sidekick=m.sidekick)
        for m in _members(tmp_path / "solo", pretrained, config)
    ]
    for packed, solo in zip(results, alone, strict=True):
        # Within float32 rounding after three epochs (paired, run by run).
        for a, b in zip(packed.history, solo.history, strict=True):
            assert a["val_error"] == pytest.approx(b["val_error"], rel=1e-3)
            assert a["train_error"] == pytest.approx(b["train_error"], rel=1e-3)
        folder = packed.run_dir
        state = load_checkpoint(folder / "latest.pt")
        assert state["pack"]["runs"] == ["ltla", "rnd", "rew", "demo"]  # relative: movable
        assert state["epoch"] == 2
        assert (folder / "best.pt").is_file()
        records = read_metrics(folder / "metrics.jsonl")
        assert [r["step"] for r in records] == [0, 1, 2]
        assert not list(folder.glob("*.next"))


def test_a_runs_numbers_do_not_depend_on_its_pack(tmp_path, pretrained, tiny_config, tiny_data):
    config = tiny_config.replace(epochs=2)
    with_rnd = train_pack(_members(tmp_path / "a", pretrained, config, ("ltla", "rnd")), tiny_data)
    with_rew = train_pack(_members(tmp_path / "b", pretrained, config, ("ltla", "rew")), tiny_data)
    for x, y in zip(with_rnd[0].history, with_rew[0].history, strict=True):
        assert x["val_error"] == pytest.approx(y["val_error"], rel=1e-4)


def test_a_pack_resumes_exactly_and_only_as_that_pack(tmp_path, pretrained, tiny_config, tiny_data):
    config = tiny_config.replace(epochs=3)
    full = train_pack(_members(tmp_path / "full", pretrained, config), tiny_data)
    short = _members(tmp_path / "cut", pretrained, config.replace(epochs=1))
    train_pack(short, tiny_data)
    resumed = train_pack(_members(tmp_path / "cut", pretrained, config), tiny_data, resume=True)
    for a, b in zip(full, resumed, strict=True):
        assert a.history == b.history
        x = load_checkpoint(a.run_dir / "latest.pt")
        y = load_checkpoint(b.run_dir / "latest.pt")
        assert all(torch.equal(x["model"][k], y["model"][k]) for k in x["model"])
        assert x["optimizer"]["state"].keys() == y["optimizer"]["state"].keys()
    cut = tmp_path / "cut"
    with pytest.raises(
        ValueError, match=r"cannot resume .*ltla alone: it was trained in a pack of 4"
    ):
        train(config.replace(epochs=4), cut / "ltla", tiny_data, resume=True)
    other = _members(cut, pretrained, config.replace(epochs=4), ("ltla", "rnd"))
    with pytest.raises(ValueError, match=r"cannot resume .* in another pack"):
        train_pack(other, tiny_data, resume=True)
    train(config.replace(epochs=1), tmp_path / "alone", tiny_data, init=pretrained)
    lone = [
        PackMember(config.replace(epochs=2), tmp_path / "alone"),
        PackMember(config.replace(epochs=2, seed=5), tmp_path / "other", init=pretrained),
    ]
    with pytest.raises(ValueError, match=r"cannot resume .*alone in a pack: it was trained alone"):
        train_pack(lone, tiny_data, resume=True)


def test_runs_that_cannot_share_a_pack_are_refused_before_anything_is_written(
    tmp_path, pretrained, tiny_config, tiny_data, monkeypatch
):
    members = [
        PackMember(tiny_config.replace(epochs=1), tmp_path / "a", init=pretrained),
        PackMember(tiny_config.replace(epochs=1, T=2, seed=4), tmp_path / "b", init=pretrained),
    ]
    with pytest.raises(ValueError, match=r"cannot share a pack: T differs \(3 vs 2\)"):
        train_pack(members, tiny_data)
    assert not (tmp_path / "a" / "config.json").exists()
    with pytest.raises(ValueError, match="distinct folders"):
        train_pack([members[0], members[0]], tiny_data)
    mixed = _members(tmp_path / "m", pretrained, tiny_config, ("ltla", "ac"))
    with pytest.raises(ValueError, match="critic differs"):
        train_pack(mixed, tiny_data)
    layouts = [members[0], PackMember(tiny_config.replace(epochs=1, channels_last=True),
                                      tmp_path / "c", init=pretrained)]  # fmt: skip
    rng = torch.get_rng_state()
    with pytest.raises(ValueError, match=r"channels_last differs \(False vs True\)"):
        train_pack(layouts, tiny_data)
    assert torch.equal(torch.get_rng_state(), rng)  # refused before any run was seeded
    assert not (tmp_path / "c" / "config.json").exists()
    decodes = [members[0], PackMember(tiny_config.replace(epochs=1, decode_once=True),
                                      tmp_path / "d", init=pretrained)]  # fmt: skip
    with pytest.raises(ValueError, match=r"decode_once differs \(False vs True\)"):
        train_pack(decodes, tiny_data)
    assert not (tmp_path / "d" / "config.json").exists()
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", False)  # the set-up turns it on
    tuned = [members[0], PackMember(tiny_config.replace(epochs=1, cudnn_benchmark=True),
                                    tmp_path / "e", init=pretrained)]  # fmt: skip
    with pytest.raises(ValueError, match=r"cudnn_benchmark differs \(False vs True\)"):
        train_pack(tuned, tiny_data)
    assert torch.backends.cudnn.benchmark is False  # refused before a set-up turned it on
    assert not (tmp_path / "e" / "config.json").exists()
    convs = [members[0], PackMember(tiny_config.replace(epochs=1, packed_convs="grouped"),
                                    tmp_path / "g", init=pretrained)]  # fmt: skip
    with pytest.raises(ValueError, match=r"packed_convs differs \('auto' vs 'grouped'\)"):
        train_pack(convs, tiny_data)
    assert not (tmp_path / "g" / "config.json").exists()
    graphs = [members[0], PackMember(tiny_config.replace(epochs=1, cuda_graph=True),
                                     tmp_path / "f", init=pretrained)]  # fmt: skip
    with pytest.raises(ValueError, match=r"cuda_graph differs \(False vs True\)"):
        train_pack(graphs, tiny_data)  # not the first run's setting for all
    assert not (tmp_path / "f" / "config.json").exists()


def test_pretraining_packs(tmp_path, tiny_config, tiny_data):
    members = [PackMember(tiny_config.replace(seed=s), tmp_path / f"p{s}") for s in (1, 2)]
    packed = train_pack(members, tiny_data, stage="pretrain")
    alone = [
        Trainer(m.config, tmp_path / f"s{i}", tiny_data, stage="pretrain").fit()
        for i, m in enumerate(members)
    ]
    for a, b in zip(packed, alone, strict=True):
        assert a.stage == "pretrain"
        for x, y in zip(a.history, b.history, strict=True):
            assert x["val_error"] == pytest.approx(y["val_error"], rel=1e-3)


def test_a_pretraining_pack_resumes_whatever_the_settings_only_training_reads(
    tmp_path, tiny_config, tiny_data
):
    config = tiny_config.replace(pretrain_epochs=1)
    members = [PackMember(config.replace(seed=s), tmp_path / f"p{s}") for s in (1, 2)]
    train_pack(members, tiny_data, stage="pretrain")
    # A resumed pretraining keeps its recorded train-only settings, whatever is asked.
    more = [
        PackMember(m.config.replace(pretrain_epochs=2, frozen_batchnorm=fb), m.out_dir)
        for m, fb in zip(members, ("train", "eval"), strict=True)
    ]
    results = train_pack(more, tiny_data, stage="pretrain", resume=True)
    assert [r.epochs for r in results] == [2, 2]


def test_one_adam_over_stacked_parameters_is_r_adams():
    torch.manual_seed(0)
    R = 3
    stacked = torch.nn.Parameter(torch.randn(R, 4, 5))
    singles = [torch.nn.Parameter(stacked.detach()[r].clone()) for r in range(R)]
    trained = {"w": torch.tensor([True, False, True])}
    packed = PackedAdam([("w", stacked)], trained, lr=1e-2, weight_decay=1e-3)
    adams = [torch.optim.Adam([p], lr=1e-2, weight_decay=1e-3) for p in singles]
    for _ in range(5):
        grads = torch.randn(R, 4, 5)
        stacked.grad = grads.clone()
        packed.step()
        for r, (p, adam) in enumerate(zip(singles, adams, strict=True)):
            if trained["w"][r]:
                p.grad = grads[r].clone()
                adam.step()
    for r in range(R):  # per element: bit for bit; the run that does not train it is untouched
        assert torch.equal(stacked.detach()[r], singles[r].detach()), r
    solo = [torch.optim.Adam([torch.nn.Parameter(torch.zeros(4, 5))], lr=1e-2) for _ in range(R)]
    packed.write_runs(solo, [["w"], [], ["w"]])
    assert torch.equal(
        solo[2].state_dict()["state"][0]["exp_avg"], adams[2].state_dict()["state"][0]["exp_avg"]
    )
    assert solo[1].state_dict()["state"] == {}


def test_clipping_is_per_run():
    torch.manual_seed(1)
    R = 3
    params = [torch.nn.Parameter(torch.zeros(R, 6)), torch.nn.Parameter(torch.zeros(R, 2, 2))]
    grads = [torch.randn(R, 6) * torch.tensor([[1.0], [10.0], [0.01]]), torch.randn(R, 2, 2)]
    for p, g in zip(params, grads, strict=True):
        p.grad = g.clone()
    norms = clip_per_run(params, torch.tensor([1.0, 1.0, 5.0]))
    for r in range(R):
        singles = [torch.nn.Parameter(torch.zeros_like(g[r])) for g in grads]
        for p, g in zip(singles, grads, strict=True):
            p.grad = g[r].clone()
        expected = torch.nn.utils.clip_grad_norm_(singles, [1.0, 1.0, 5.0][r])
        torch.testing.assert_close(norms[r], expected)
        for p, single in zip(params, singles, strict=True):
            torch.testing.assert_close(p.grad[r], single.grad)


@pytest.mark.parametrize("killed_after", range(7))
def test_an_interrupted_commit_is_finished_or_undone(tmp_path, killed_after):
    """Run a's latest and best, run b's latest, of epoch 1, committed over epoch 0; a kill
    after ``killed_after`` of the six file operations (three pending writes, bests first, then
    three renames in the same order)."""
    runs = [tmp_path / "a", tmp_path / "b"]
    for run in runs:
        run.mkdir()
        save_checkpoint(run / "latest.pt", {"epoch": 0})
    save_checkpoint(runs[0] / "best.pt", {"epoch": 0})
    writes = [
        (runs[0] / "latest.pt", {"epoch": 1}),
        (runs[0] / "best.pt", {"epoch": 1}),
        (runs[1] / "latest.pt", {"epoch": 1}),
    ]
    order = [writes[1], writes[0], writes[2]]  # what commit does: bests first
    for i, (path, state) in enumerate(order):
        if i < killed_after:
            save_checkpoint(pending(path), state)
    for i, (path, _) in enumerate(order):
        if 3 + i < killed_after:
            pending(path).replace(path)
    recover(runs)
    expected = 1 if killed_after >= 3 else 0
    for path in (runs[0] / "latest.pt", runs[0] / "best.pt", runs[1] / "latest.pt"):
        assert load_checkpoint(path)["epoch"] == expected, path  # best.pt never lags behind
    assert not list(tmp_path.glob("*/*.next"))
    commit(writes)
    assert {load_checkpoint(path)["epoch"] for path, _ in writes} == {1}


def test_a_pack_is_recovered_from_any_of_its_runs_records(tmp_path):
    """reproduce recovers an interrupted commit before it reads any run's epoch: from one
    run's config.json it finds the others (relative to it, so the folder may move)."""
    runs = [tmp_path / "ltla" / "seed-0", tmp_path / "rnd" / "seed-0"]
    record = ["ltla/seed-0", "rnd/seed-0"]
    for index, run in enumerate(runs):
        run.mkdir(parents=True)
        with RunDir(run).locked() as folder:
            folder.write_record("config.json", {"pack": {"runs": record, "index": index}})
        save_checkpoint(run / "latest.pt", {"epoch": 0})
        save_checkpoint(pending(run / "latest.pt"), {"epoch": 1})
    pending(runs[0] / "latest.pt").replace(runs[0] / "latest.pt")  # killed after one rename
    assert pack_members(runs[1]) == [r.resolve() for r in runs]
    recover_recorded([runs[0]])
    assert [load_checkpoint(r / "latest.pt")["epoch"] for r in runs] == [1, 1]


def test_runs_with_a_critic_no_pack_takes_are_keyed_to_train_alone(tmp_path, tiny_config):
    """reproduce groups runs by pack_key: a critic of returns or a plugin's critic, which
    PackTrainer refuses, must get a key of its own, not a pack that aborts the table."""
    from pyskick.training.pack import pack_key

    def key(seed: int, **changes):
        config = tiny_config.replace(seed=seed, **changes)
        return pack_key(PackMember(config, tmp_path / f"{seed}-{changes}"), done=0)

    residual = {"critic": "critic"}
    assert key(1, **residual) == key(2, **residual)  # packable: one pack for the seeds
    for changes in (
        {"critic": "critic", "critic_residual": False},
        {"critic": "asymm-critic", "critic_residual": False},
        {"critic": "my-plugin-critic"},
    ):
        assert key(1, **changes) != key(2, **changes), changes
        assert key(1, **changes)[0] == "alone"
