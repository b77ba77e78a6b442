"""Episode animations of real tiny runs: one GIF frame per glimpse, deterministic, MP4 only with
imageio-ffmpeg; bad input writes nothing."""

from __future__ import annotations

import itertools
import sys

import numpy as np
import pytest
from PIL import Image, ImageSequence

from pyskick.run_dir import load_policy
from pyskick.viz import visualize_run
from pyskick.viz.animation import FRAME_MS, write_animation
from pyskick.viz.run_figures import choose_examples


def gif_frames(path) -> list[np.ndarray]:
    """The RGB frames of a GIF (checked to loop forever, :data:`FRAME_MS` each)."""
    with Image.open(path) as image:
        assert image.format == "GIF"
        assert image.info["loop"] == 0
        frames = []
        for frame in ImageSequence.Iterator(image):
            assert frame.info["duration"] == FRAME_MS
            frames.append(np.asarray(frame.convert("RGB")))
    return frames


def test_gif_has_one_frame_per_glimpse_and_is_deterministic(tiny_runs, tmp_path):
    grids = tiny_runs.data.val
    mean = tiny_runs.data.channel_mean
    T = load_policy(tiny_runs.ltla, "cpu").T
    paths = visualize_run(
        tiny_runs.ltla, grids, channel_mean=mean, out_dir=tmp_path / "a", examples=2,
        heatmaps=False, animations=("gif",),
    )  # fmt: skip
    chosen, _ = choose_examples(grids.shape[0], 2, 0, 12)
    names = [f"example{k}_grid{i}_episode.{suffix}" for k, i in enumerate(chosen.tolist())
             for suffix in ("png", "gif")]  # fmt: skip
    assert [p.name for p in paths] == names
    for path in paths[1::2]:
        with Image.open(path) as image:
            assert image.n_frames == T == 3
            assert image.width >= 500, image.size
            assert image.height >= 200, image.size
        frames = gif_frames(path)
        assert len({frame.shape for frame in frames}) == 1
        assert all(frame.std() > 5.0 for frame in frames), "a blank frame"
        for before, after in itertools.pairwise(frames):
            assert np.abs(before.astype(int) - after.astype(int)).sum() > 0
    # Same seed, same bytes.
    again = visualize_run(
        tiny_runs.ltla, grids, channel_mean=mean, out_dir=tmp_path / "b", examples=2,
        heatmaps=False, animations=("gif",),
    )  # fmt: skip
    for first, second in zip(paths, again, strict=True):
        assert first.read_bytes() == second.read_bytes(), first.name


def test_frames_show_the_views_seen_so_far(tiny_runs, tmp_path):
    """The left panel fades unseen views to grey: it changes as views are seen, and the faded
    first frame has less contrast than the last."""
    paths = visualize_run(
        tiny_runs.ltla, tiny_runs.data.val, channel_mean=tiny_runs.data.channel_mean,
        out_dir=tmp_path, examples=1, heatmaps=False, animations=("gif",), seed=4,
    )  # fmt: skip
    frames = gif_frames(paths[1])
    left = [frame[:, : frame.shape[1] // 2].astype(float) for frame in frames]
    assert not np.array_equal(left[0], left[-1])


def test_one_glimpse_run_gets_one_frame(tiny_runs, tmp_path):
    paths = visualize_run(
        tiny_runs.one_view, tiny_runs.data.val, channel_mean=tiny_runs.data.channel_mean,
        out_dir=tmp_path, examples=1, animations=("gif",),
    )  # fmt: skip
    assert [p.suffix for p in paths] == [".png", ".gif"]
    with Image.open(paths[1]) as image:
        assert image.n_frames == 1


def test_bad_animation_input_writes_nothing(tiny_runs, tmp_path, monkeypatch):
    out = tmp_path / "never"
    grids = tiny_runs.data.val
    mean = tiny_runs.data.channel_mean
    with pytest.raises(ValueError, match="animation format must be one of gif, mp4, got 'avi'"):
        visualize_run(tiny_runs.ltla, grids, channel_mean=mean, out_dir=out, animations=["avi"])
    with pytest.raises(TypeError, match=r"a sequence of formats such as \('gif',\), got 'gif'"):
        visualize_run(tiny_runs.ltla, grids, channel_mean=mean, out_dir=out, animations="gif")
    with pytest.raises(ValueError, match="animation formats repeat"):
        visualize_run(
            tiny_runs.ltla, grids, channel_mean=mean, out_dir=out, animations=["gif", "gif"]
        )
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # as if not installed
    with pytest.raises(ImportError, match="pip install imageio-ffmpeg"):
        visualize_run(tiny_runs.ltla, grids, channel_mean=mean, out_dir=out, animations=["mp4"])
    frame = np.zeros((8, 8, 3), np.uint8)
    with pytest.raises(ValueError, match="at least one frame"):
        write_animation([], out / "a.gif")
    with pytest.raises(ValueError, match="differ in size"):
        write_animation([frame, frame[:4]], out / "a.gif")
    with pytest.raises(ValueError, match=r"must end with \.gif or \.mp4"):
        write_animation([frame], out / "a.png")
    with pytest.raises(ImportError, match="pip install imageio-ffmpeg"):
        write_animation([frame], out / "a.mp4")
    assert not out.exists()


def test_mp4_with_imageio_ffmpeg(tiny_runs, tmp_path):
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")
    paths = visualize_run(
        tiny_runs.ltla, tiny_runs.data.val, channel_mean=tiny_runs.data.channel_mean,
        out_dir=tmp_path, examples=1, heatmaps=False, animations=("gif", "mp4"),
    )  # fmt: skip
    assert [p.suffix for p in paths] == [".png", ".gif", ".mp4"]
    data = paths[2].read_bytes()
    assert data[4:8] == b"ftyp"  # an ISO media (MP4) file
    frames, seconds = imageio_ffmpeg.count_frames_and_secs(str(paths[2]))
    assert frames == 3  # T glimpses
    assert seconds == pytest.approx(3 * FRAME_MS / 1000, abs=0.1)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in paths)
