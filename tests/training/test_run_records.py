"""A run started from Python records what ``pyskick train`` records, and ``load_policy`` reads
any run or checkpoint back with how it acts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from pyskick.checkpoint import load_checkpoint, save_checkpoint
from pyskick.config import TrainConfig
from pyskick.data import GridSpec, write_viewgrids
from pyskick.errors import UserError
from pyskick.files import file_digest
from pyskick.run_dir import RunDir, load_model_config, load_policy
from pyskick.training import TrainData, pretrain, train

SPEC = GridSpec(
    n_elevations=3,
    n_azimuths=4,
    channels=1,
    view_size=16,
    elevations_deg=(30.0, 0.0, -30.0),
    azimuths_deg=(0.0, 90.0, 180.0, 270.0),
    fov_deg=45.0,
    channel_mean=(120.0,),
    preset="custom",
)


@pytest.fixture
def data_file(tmp_path: Path, smooth_grids) -> Path:
    splits = {
        "train": smooth_grids(16, seed=1),
        "val": smooth_grids(6, seed=2),
        "test": smooth_grids(3, seed=3),
    }
    return write_viewgrids(tmp_path / "tiny.h5", splits, SPEC, source="smooth random fields")


def test_runs_trained_from_python_record_their_data_file_and_one_view_run(
    tmp_path: Path, data_file: Path, tiny_config
) -> None:
    config = tiny_config.replace(epochs=1, pretrain_epochs=1)
    data = TrainData.from_file(data_file)
    assert data.source == data_file
    one = pretrain(config, tmp_path / "one", data).run_dir
    ltla = train(config, tmp_path / "ltla", data, init=one).run_dir

    digest = file_digest(data_file)
    assert json.loads((one / "dataset.json").read_text()) == {
        "path": str(data_file.resolve()),
        "sha256": digest,
    }
    assert RunDir(ltla).dataset_record() == {
        "path": str(data_file.resolve()),
        "sha256": digest,
        "init": str(one.resolve()),
        "init_sha256": file_digest(one / "best.pt"),
        "init_relative": "../one",
    }
    assert RunDir(ltla).recorded_config()["stage"] == "train"

    saved = load_policy(ltla)
    assert (saved.stage, saved.T, saved.actor) == ("train", config.T, "learned")
    assert saved.init == one.resolve()
    assert saved.checkpoint == ltla / "best.pt"
    assert saved.config.T == config.T
    assert not saved.policy.training
    assert load_model_config(ltla) == saved.policy.config
    pretrained = load_policy(one / "latest.pt")
    assert (pretrained.stage, pretrained.T, pretrained.actor, pretrained.init) == (
        "pretrain",
        1,
        "learned",
        None,
    )


def test_a_resume_from_python_takes_its_one_view_run_moved_and_refuses_another(
    tmp_path: Path, data_file: Path, tiny_config
) -> None:
    # train(init=..., resume=True): the run's own one-view model at another place (the same
    # bytes) is recorded from then on; another model is refused before anything changes.
    config, data, one, other, ltla = _ltla_of_a_one_view_run(tmp_path, data_file, tiny_config)
    best = (ltla / "best.pt").read_bytes()
    moved = tmp_path / "moved"
    one.rename(moved)
    before = {p.name: p.read_bytes() for p in ltla.iterdir() if p.is_file()}
    with pytest.raises(UserError, match="another model"):
        train(config.replace(epochs=2), ltla, data, init=other, resume=True)
    assert {p.name: p.read_bytes() for p in ltla.iterdir() if p.is_file()} == before
    # Before a resume, every record names the old place.
    assert load_policy(ltla).init == one.resolve()
    train(config.replace(epochs=2), ltla, data, init=moved, resume=True)
    assert load_checkpoint(ltla / "latest.pt")["init"] == str(moved.resolve())
    assert RunDir(ltla).recorded_init() == moved.resolve()
    # A best.pt of before the move names the old place; dataset.json, of the same model, wins.
    (ltla / "best.pt").write_bytes(best)
    assert load_checkpoint(ltla / "best.pt")["init"] == str(one.resolve())
    assert load_policy(ltla).init == moved.resolve()
    # ... but not when it records another model than the checkpoint.
    record = json.loads((ltla / "dataset.json").read_text())
    (ltla / "dataset.json").write_text(json.dumps({**record, "init_sha256": "0" * 64}))
    assert load_policy(ltla).init == one.resolve()


def _ltla_of_a_one_view_run(
    root: Path, data_file: Path, tiny_config: TrainConfig
) -> tuple[TrainConfig, TrainData, Path, Path, Path]:
    """``(config, data, one, other, ltla)``: a one-view run ``root/one``, another one-view
    model ``root/other`` (another seed) and one epoch of ltla ``root/ltla`` from ``one``."""
    config = tiny_config.replace(epochs=1, pretrain_epochs=1)
    data = TrainData.from_file(data_file)
    one = pretrain(config, root / "one", data).run_dir
    other = pretrain(config.replace(seed=9), root / "other", data).run_dir
    ltla = train(config, root / "ltla", data, init=one).run_dir
    return config, data, one, other, ltla


def _files(run: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}


def test_a_project_moved_as_a_whole_finds_its_one_view_run(
    tmp_path: Path, data_file: Path, tiny_config
) -> None:
    # The run and its one-view run moved together: found at the same relative place (the
    # same bytes), by load_policy for a finished run and by a resume without init.
    config, data, _, _, _ = _ltla_of_a_one_view_run(tmp_path / "a", data_file, tiny_config)
    (tmp_path / "a").rename(tmp_path / "b")
    ltla, moved = tmp_path / "b" / "ltla", (tmp_path / "b" / "one").resolve()
    assert load_policy(ltla).init == moved
    train(config.replace(epochs=2), ltla, data, resume=True)
    assert load_checkpoint(ltla / "latest.pt")["init"] == str(moved)
    assert RunDir(ltla).recorded_init() == moved


def test_a_copied_project_goes_on_with_its_own_one_view_run_when_the_original_changed(
    tmp_path: Path, data_file: Path, tiny_config
) -> None:
    # The original's one-view run pretrained further after the copy: the copy's run finds the
    # same bytes at its relative place (load_policy, resume), not the original's new model.
    config, data, one, _, _ = _ltla_of_a_one_view_run(tmp_path / "a", data_file, tiny_config)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    pretrain(config.replace(pretrain_epochs=2), one, data, resume=True)
    shutil.copyfile(one / "latest.pt", one / "best.pt")  # whether or not validation improved
    ltla, own = tmp_path / "b" / "ltla", (tmp_path / "b" / "one").resolve()
    assert load_policy(ltla).init == own
    train(config.replace(epochs=2), ltla, data, resume=True)
    assert load_checkpoint(ltla / "latest.pt")["init"] == str(own)


def test_a_one_view_model_changed_since_the_run_started_is_refused(
    tmp_path: Path, data_file: Path, tiny_config
) -> None:
    # Another model in the one-view run's place (e.g. pretrained further): the run would go
    # on recording a model it did not start from. Refused, init given or not, for ltla too.
    config, data, one, other, ltla = _ltla_of_a_one_view_run(tmp_path, data_file, tiny_config)
    shutil.copyfile(other / "best.pt", one / "best.pt")
    before = _files(ltla)
    for init in (None, one):
        with pytest.raises(UserError, match=r"not the model .* started from .*changed since"):
            train(config.replace(epochs=2), ltla, data, init=init, resume=True)
    assert _files(ltla) == before


def test_a_run_killed_before_its_first_checkpoint_starts_again_from_its_own_one_view_run(
    tmp_path: Path, data_file: Path, tiny_config
) -> None:
    # config.json and dataset.json, no checkpoint: the run starts again from the one-view run
    # it recorded, and refuses another.
    config, data, one, other, ltla = _ltla_of_a_one_view_run(tmp_path, data_file, tiny_config)
    for name in ("latest.pt", "best.pt", "metrics.jsonl"):
        (ltla / name).unlink()
    with pytest.raises(UserError, match="another model"):
        train(config, ltla, data, init=other, resume=True)
    train(config, ltla, data, resume=True)
    state = load_checkpoint(ltla / "latest.pt")
    assert (state["init"], state["init_sha256"]) == (str(one), file_digest(one / "best.pt"))
    assert state["frozen"] == ["sense_im", "sense_pro", "fuse"]


def test_checkpoints_without_the_digest_resume_from_a_moved_one_view_run_of_their_weights(
    tmp_path: Path, data_file: Path, tiny_config
) -> None:
    # Checkpoints of before init_sha256: a one-view run at another place is the run's own when
    # it holds the run's frozen Sense and Fuse bit for bit (the recorded one gone), or the
    # recorded checkpoint's bytes (while there); another model is refused.
    config, data, one, other, ltla = _ltla_of_a_one_view_run(tmp_path, data_file, tiny_config)
    state = load_checkpoint(ltla / "latest.pt")
    for key in ("init_sha256", "init_relative"):
        del state[key]
    save_checkpoint(ltla / "latest.pt", state)
    record = json.loads((ltla / "dataset.json").read_text())
    (ltla / "dataset.json").write_text(
        json.dumps({"path": record["path"], "sha256": record["sha256"], "init": record["init"]})
    )
    copy = shutil.copytree(one, tmp_path / "copy")
    sibling = train(config, tmp_path / "sibling", data, init=one).run_dir  # the same Sense, Fuse
    before = _files(ltla)
    with pytest.raises(UserError, match=r"nothing shows .* the same model .*bytes differ"):
        train(config.replace(epochs=2), ltla, data, init=other, resume=True)
    assert _files(ltla) == before
    one.rename(tmp_path / "moved")
    with pytest.raises(UserError, match=r"nothing shows .* same model .*frozen weights differ"):
        train(config.replace(epochs=2), ltla, data, init=other, resume=True)
    assert _files(ltla) == before
    with pytest.raises(UserError, match=r"nothing shows .* no one-view \(pretraining\) check"):
        train(config.replace(epochs=2), ltla, data, init=sibling, resume=True)
    assert _files(ltla) == before
    train(config.replace(epochs=2), ltla, data, init=copy, resume=True)
    state = load_checkpoint(ltla / "latest.pt")
    assert (state["epoch"], state["init"], state["init_sha256"]) == (1, str(copy), None)


def test_grids_built_in_memory_leave_no_dataset_record(
    tmp_path: Path, tiny_data, tiny_config
) -> None:
    run = pretrain(tiny_config.replace(pretrain_epochs=1), tmp_path / "one", tiny_data).run_dir
    assert (run / "config.json").is_file()
    assert not (run / "dataset.json").exists()
    assert RunDir(run).recorded_init() is None


def test_load_policy_of_a_bare_checkpoint_and_of_a_copied_one(
    tmp_path: Path, data_file: Path, tiny_config
) -> None:
    config = tiny_config.replace(epochs=1, pretrain_epochs=1)
    data = TrainData.from_file(data_file)
    one = pretrain(config, tmp_path / "one", data).run_dir
    ltla = train(config, tmp_path / "ltla", data, init=one).run_dir
    state = load_checkpoint(ltla / "best.pt")

    # A policy without its run: usable as a policy, refused where the run's settings matter.
    bare = save_checkpoint(
        tmp_path / "bare.pt", {"model": state["model"], "model_config": state["model_config"]}
    )
    saved = load_policy(bare)
    assert saved.stage is None
    assert saved.config is None
    for setting in ("T", "actor"):
        with pytest.raises(ValueError, match=r"bare\.pt is not a pyskick training checkpoint"):
            getattr(saved, setting)
    torch.testing.assert_close(
        saved.policy.state_dict(), load_policy(ltla).policy.state_dict(), rtol=0, atol=0
    )

    # A checkpoint without ``init``, copied with its run's records: dataset.json names it.
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(ltla / "dataset.json", copy / "dataset.json")
    state.pop("init")
    save_checkpoint(copy / "best.pt", state)
    assert load_policy(copy).init == one.resolve()

    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_policy(tmp_path / "nowhere")
