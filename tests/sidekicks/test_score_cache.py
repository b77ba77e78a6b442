"""Score keys, score files, the score cache and sharded scoring (tiny real sidekicks)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pyskick.sidekicks import has_scores
from pyskick.sidekicks import scores as scores_module
from pyskick.sidekicks.reward import RewardSidekick
from pyskick.sidekicks.scores import (
    CACHE_GROUP,
    ScoreMeta,
    cached_scores,
    compute_scores_sharded,
    grids_digest,
    read_score_meta,
    read_scores,
    score_key,
    write_scores,
)
from pyskick.testing import run_python

ENTRY = Path(__file__).with_name("scores_entry.py")
_spec = importlib.util.spec_from_file_location("scores_entry", ENTRY)
assert _spec is not None
assert _spec.loader is not None
entry = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(entry)
ViewMeans, example_grids = entry.ViewMeans, entry.example_grids
CPU = torch.device("cpu")


def compute_count(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def _env() -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    env.pop("WORLD_SIZE", None)
    return env


def test_a_cache_hit_does_not_recompute(tmp_path: Path) -> None:
    log, grids = tmp_path / "log", example_grids()
    first = cached_scores(ViewMeans(log), grids, T=3, device=CPU, cache_dir=tmp_path)
    again = cached_scores(ViewMeans(log), grids, T=3, device=CPU, cache_dir=tmp_path)
    assert compute_count(log) == 1
    direct = ViewMeans().compute_scores(grids, T=3, device=CPU)
    for scores in (first, again):
        assert set(scores) == {"means", "peak"}
        assert torch.equal(scores["means"], direct["means"])
        assert torch.equal(scores["peak"], direct["peak"])
    entry_file = tmp_path / "scores" / f"{score_key(ViewMeans(), grids, 3)}.h5"
    meta = read_score_meta(entry_file)
    assert meta["sidekick"] == "view-means"
    assert meta["options"] == {"scale": 1.0}
    assert list(meta["splits"]) == [CACHE_GROUP]
    # Other options are another entry.
    cached_scores(ViewMeans(log, scale=2.0), grids, T=3, device=CPU, cache_dir=tmp_path)
    assert compute_count(log) == 2


def test_prepare_computes_once_through_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYSKICK_CACHE_DIR", str(tmp_path / "cache"))
    log, grids = tmp_path / "log", example_grids()
    for _ in range(2):
        sidekick = ViewMeans(log)
        sidekick.prepare(grids, T=2, device=CPU)
        assert sidekick.loaded is not None
        assert sidekick.loaded["means"].shape == (7, 2, 3)
    assert compute_count(log) == 1
    assert len(list((tmp_path / "cache" / "scores").glob("*.h5"))) == 1


def test_an_unreadable_cache_entry_is_recomputed(tmp_path: Path) -> None:
    log, grids = tmp_path / "log", example_grids()
    path = tmp_path / "scores" / f"{score_key(ViewMeans(), grids, 2)}.h5"
    path.parent.mkdir()
    path.write_bytes(b"not hdf5")
    scores = cached_scores(ViewMeans(log), grids, T=2, device=CPU, cache_dir=tmp_path)
    assert compute_count(log) == 1
    assert torch.equal(read_scores(path, CACHE_GROUP, score_key(ViewMeans(), grids, 2))["peak"],
                       scores["peak"])  # fmt: skip


def test_the_key_follows_grids_model_options_and_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    grids = example_grids()
    key = score_key(ViewMeans(), grids, 2)
    assert key == score_key(ViewMeans(), grids.clone(), 2)  # content, not identity
    changed = grids.clone()
    changed[3, 1, 2, 0, 0, 0] ^= 1
    assert score_key(ViewMeans(), changed, 2) != key
    assert score_key(ViewMeans(), grids[:6], 2) != key
    assert score_key(ViewMeans(scale=0.5), grids, 2) != key

    class Other(ViewMeans):
        """Another class with the same options: other code, other scores."""

    assert score_key(Other(), grids, 2) != key
    # The name a sidekick is registered (or known) under is not part of the key.
    alias = ViewMeans()
    alias.name = "view-means-alias"
    assert score_key(alias, grids, 2) == key
    # The rew sidekick: the model checkpoint's bytes and the NMS options, not T.
    ckpt = tmp_path / "best.pt"
    ckpt.write_bytes(b"weights v1")
    rew = RewardSidekick(ckpt, channel_mean=(0.0,), k=4, radius=1)
    rew_key = score_key(rew, grids, 4)
    assert score_key(rew, grids, 8) == rew_key
    assert score_key(RewardSidekick(ckpt, channel_mean=(0.0,), k=5), grids, 4) != rew_key
    ckpt.write_bytes(b"weights v2")
    assert score_key(rew, grids, 4) != rew_key
    monkeypatch.setattr(scores_module, "__version__", "999.0")
    assert score_key(ViewMeans(), grids, 2) != key


def test_a_plugin_sidekicks_key_follows_its_distribution_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pyskick_rnd_rewards.sidekick import RandomRewardSidekick

    grids = example_grids()
    plugin = RandomRewardSidekick(seed=0)
    versions = scores_module.code_versions(plugin)
    assert versions["pyskick-rnd-rewards"] == importlib.metadata.version("pyskick-rnd-rewards")
    assert list(scores_module.code_versions(ViewMeans())) == ["pyskick"]  # a test module
    key = score_key(plugin, grids, 4)
    real = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata, "version", lambda name: "9.9" if "rnd" in name else real(name)
    )
    assert score_key(plugin, grids, 4) != key  # an upgraded plugin never reuses old scores


def test_sidekicks_without_scores_have_no_key() -> None:
    from pyskick.sidekicks import make_sidekick

    none = make_sidekick("none", one_view=None, spec=None, config=None)
    assert not has_scores(none)
    assert has_scores(ViewMeans())
    with pytest.raises(ValueError, match="sidekick 'none' has no scores"):
        score_key(none, example_grids(), 2)
    assert not hasattr(none, "score_options")  # the trio is ScoredSidekick's alone


def _meta(sidekick: ViewMeans, splits: dict[str, torch.Tensor]) -> ScoreMeta:
    return ScoreMeta.of(
        sidekick, 2, {name: score_key(sidekick, g, 2) for name, g in splits.items()}
    )


def test_score_files_round_trip_and_refuse_stale_scores(tmp_path: Path) -> None:
    sidekick = ViewMeans()
    splits = {"train": example_grids(7), "val": example_grids(3)}
    computed = {name: sidekick.compute_scores(g, T=2, device=CPU) for name, g in splits.items()}
    path = write_scores(tmp_path / "s.h5", computed, meta=_meta(sidekick, splits))
    for name, grids in splits.items():
        back = read_scores(path, name, score_key(sidekick, grids, 2))
        assert back.keys() == computed[name].keys()
        for score in back:
            assert torch.equal(back[score], computed[name][score])
            assert back[score].dtype == computed[name][score].dtype
    with h5py.File(path) as f:
        assert f.attrs["pyskick_scores"] == 2
        assert json.loads(f.attrs["options"]) == {"scale": 1.0}
        assert f["val/means"].shape == (3, 2, 3)
    # A version-1 file keyed its scores by the registry name: refused by its version, not
    # reported as stale data.
    old = tmp_path / "v1.h5"
    old.write_bytes(path.read_bytes())
    with h5py.File(old, "a") as f:
        f.attrs["pyskick_scores"] = 1
    with pytest.raises(ValueError, match="has score format 1; this pyskick reads 2"):
        read_scores(old, "train", score_key(sidekick, splits["train"], 2))
    with pytest.raises(ValueError, match=r"^stale scores: computed for other data/model/options"):
        read_scores(path, "train", score_key(ViewMeans(scale=3.0), splits["train"], 2))
    with pytest.raises(ValueError, match=r"^stale scores"):
        read_scores(path, "val", score_key(sidekick, splits["train"], 2))
    with pytest.raises(ValueError, match="has no split 'test'; its splits: train, val"):
        read_scores(path, "test", "0" * 64)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_scores(tmp_path / "missing.h5", "train", "0" * 64)
    plain = tmp_path / "plain.h5"
    with h5py.File(plain, "w") as f:
        f["train"] = [1, 2]
    with pytest.raises(ValueError, match="not a pyskick score file"):
        read_score_meta(plain)


def test_prepare_loads_a_score_file_and_refuses_a_stale_one(tmp_path: Path) -> None:
    grids = example_grids()
    splits = {"train": grids}
    computed = {"train": ViewMeans().compute_scores(grids, T=2, device=CPU)}
    path = write_scores(tmp_path / "s.h5", computed, meta=_meta(ViewMeans(), splits))
    log = tmp_path / "log"
    sidekick = ViewMeans(log)
    sidekick.scores_file = path
    sidekick.prepare(grids, T=2, device=CPU)
    assert sidekick.loaded is not None
    assert torch.equal(sidekick.loaded["means"], computed["train"]["means"])
    assert compute_count(log) == 0
    stale = ViewMeans(log, scale=2.0)
    stale.scores_file = path
    with pytest.raises(ValueError, match=r"^stale scores .*computed with options \{"):
        stale.prepare(grids, T=2, device=CPU)
    assert stale.loaded is None


@pytest.mark.parametrize(
    ("scores", "error", "message"),
    [
        ({"means": torch.zeros(6, 2)}, ValueError, "disagree in their first dimension"),
        ({"means": torch.tensor(1.0)}, ValueError, "first dimension must be the 7 samples"),
        ({"means": [1, 2]}, TypeError, "must be a tensor"),
        ({"a/b": torch.zeros(7)}, ValueError, "without '/'"),
        ({}, TypeError, "non-empty dict"),
    ],
)
def test_bad_scores_write_nothing(
    tmp_path: Path, scores: dict, error: type[Exception], message: str
) -> None:
    meta = _meta(ViewMeans(), {"train": example_grids()})
    good = {"means": torch.zeros(7), "peak": torch.zeros(7, dtype=torch.int64)}
    with pytest.raises(error, match=message):
        write_scores(tmp_path / "s.h5", {"train": good | scores if scores else {}}, meta=meta)
    with pytest.raises(ValueError, match="does not exist"):
        write_scores(tmp_path / "no" / "s.h5", {"train": good}, meta=meta)
    with pytest.raises(ValueError, match="split 'val' has no key"):
        write_scores(tmp_path / "s.h5", {"val": good}, meta=meta)
    assert list(tmp_path.iterdir()) == []


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(1, 5),
    tail=st.lists(st.integers(1, 3), max_size=2),
    dtype=st.sampled_from([torch.float32, torch.float64, torch.int64, torch.uint8, torch.bool]),
)
def test_any_tensor_survives_a_score_file(
    tmp_path_factory: pytest.TempPathFactory, n: int, tail: list[int], dtype: torch.dtype
) -> None:
    value = (torch.rand(n, *tail) * 200).to(dtype)
    meta = ScoreMeta("x", {}, "k", {"train": "key"})
    path = write_scores(tmp_path_factory.mktemp("f") / "s.h5", {"train": {"v": value}}, meta=meta)
    back = read_scores(path, "train", "key")["v"]
    assert back.dtype == dtype
    assert torch.equal(back, value)


def test_one_process_shards_nothing() -> None:
    grids = example_grids()
    assert torch.equal(
        compute_scores_sharded(ViewMeans(), grids, T=2, device=CPU)["means"],
        ViewMeans().compute_scores(grids, T=2, device=CPU)["means"],
    )
    with pytest.raises(ValueError, match="first dimension"):
        compute_scores_sharded(_WrongLength(), grids, T=2, device=CPU)


class _WrongLength(ViewMeans):
    def compute_scores(self, grids: torch.Tensor, *, T: int, device: torch.device) -> dict:
        return {"means": torch.zeros(len(grids) + 1)}


def test_concurrent_processes_compute_once(tmp_path: Path) -> None:
    cache, log = tmp_path / "cache", tmp_path / "log"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(ENTRY),
                "cached",
                str(tmp_path / f"out{i}.json"),
                str(cache),
                str(log),
                "2",
            ],
            env=_env(),
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    errors = [proc.communicate(timeout=120)[1] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], errors
    assert compute_count(log) == 1
    digests = {json.loads((tmp_path / f"out{i}.json").read_text())["digest"] for i in range(2)}
    assert digests == {entry.digest(ViewMeans().compute_scores(example_grids(), T=2, device=CPU))}
    waited = [err for err in errors if "waiting for another process" in err]
    assert len(waited) == 1
    assert "reusing cached view-means scores" in waited[0]


def test_torchrun_shards_and_matches_one_process(tmp_path: Path) -> None:
    log = tmp_path / "log"
    run_python(ENTRY, "sharded", tmp_path, log, cwd=tmp_path, ranks=2)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    single = entry.digest(ViewMeans().compute_scores(example_grids(), T=2, device=CPU))
    for result in ranks:
        assert result["world"] == 2
        assert result["sharded"] == result["solo"] == single
        assert result["cached"] == [single, single]
        assert result["failure"].startswith("scoring with sidekick 'view-means' failed on rank 1")
    # Sharded: slices of 3 and 4 grids; solo: rank 0 alone scores all 7; cached: one more
    # sharded computation for the miss, none for the hit.
    sizes = sorted(int(line.split()[1]) for line in log.read_text().splitlines())
    assert sizes == sorted([3, 4, 7, 3, 4])
    assert len(list((tmp_path / "cache" / "scores").glob("*.h5"))) == 1


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [((2, 4, 8, 3, 2, 2), torch.uint8), ((3, 5), torch.float32), ((0, 4, 8, 3, 2, 2), torch.uint8),
     ((3, 0, 2), torch.float32), ((), torch.float32)],
)  # fmt: skip
def test_grids_digest_is_the_sha256_of_dtype_shape_and_bytes(
    shape: tuple[int, ...], dtype: torch.dtype
) -> None:
    grids = (torch.arange(max(1, torch.Size(shape).numel())) % 251)[: torch.Size(shape).numel()]
    grids = grids.to(dtype).reshape(shape)
    expected = hashlib.sha256(f"{dtype}{tuple(shape)}".encode())
    expected.update(grids.numpy().tobytes())
    assert grids_digest(grids) == expected.hexdigest()
    # A transposed view digests as its row-major copy.
    if grids.dim() >= 2:
        assert grids_digest(grids.transpose(0, 1)) == grids_digest(
            grids.transpose(0, 1).contiguous()
        )
