"""Episode animations: one frame per glimpse (the views seen so far, the reconstruction after
that glimpse, the move taken next), written as an animated GIF (Pillow) or an MP4 (only with
the optional ``imageio-ffmpeg``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from torch import Tensor

from pyskick._io import atomic_path
from pyskick.errors import UserError, UserTypeError
from pyskick.viz._mpl import pyplot
from pyskick.viz.episodes import Episodes
from pyskick.viz.layout import GridLayout, mosaic, to_uint8
from pyskick.viz.steps import move_text, step_panel

FORMATS = ("gif", "mp4")
"""Animation formats, also the file suffixes: ``gif`` (Pillow, always available with
matplotlib) and ``mp4`` (needs ``imageio-ffmpeg``)."""
MP4_HINT = "MP4 animations need imageio-ffmpeg: pip install imageio-ffmpeg"
FRAME_MS = 1000
"""How long each frame shows, in milliseconds."""
FRAME_DPI = 90
PANEL_INCHES = 4.2
UNSEEN_TINT = np.array([225.0, 228.0, 235.0])
"""The light blue-grey the views not seen yet fade to in the left panel."""
UNSEEN_FADE = 0.7
"""How far they fade (0: not at all, 1: flat tint)."""
MP4_BLOCK = 16
"""MP4 frames are padded (white) to multiples of this (the codec's macro block)."""


def check_formats(formats: Sequence[str]) -> tuple[str, ...]:
    """Validate animation formats (each of :data:`FORMATS`, no repeats).

    Raises:
        TypeError: a single string instead of a sequence of formats.
        ValueError: an unknown or repeated format.
        ImportError: ``mp4`` without ``imageio-ffmpeg`` (one line saying how to install it).
    """
    if isinstance(formats, str):
        raise UserTypeError(
            f"animations must be a sequence of formats such as ('gif',), got {formats!r}"
        )
    formats = tuple(formats)
    for fmt in formats:
        if fmt not in FORMATS:
            raise UserError(f"animation format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if len(set(formats)) != len(formats):
        raise UserError(f"animation formats repeat: {', '.join(formats)}")
    if "mp4" in formats:
        try:
            import imageio_ffmpeg  # noqa: F401
        except ImportError:
            raise ImportError(MP4_HINT) from None
    return formats


def episode_frames(
    ep: Episodes,
    k: int,
    truth: Tensor,
    mean: Sequence[float] | None,
    *,
    title: str,
) -> list[np.ndarray]:
    """The frames of episode ``k``, one per glimpse, all of one size.

    Frame ``t`` shows, left, the true viewgrid with the views not seen by glimpse ``t`` faded
    (light blue-grey) and, right, the reconstruction after glimpse ``t`` (views seen so far
    pasted); both mark the current view (red), the views seen before (gold), the moves made
    (white) and the move taken next (red arrow, also written in the title).

    Args:
        ep: recorded episodes (:func:`~pyskick.viz.episodes.record_episodes`).
        k: which episode.
        truth: ``[N, M, C, H, W]`` uint8 true viewgrid of episode ``k``.
        mean: the per-channel mean the reconstructions are denormalised with (None: none).
        title: what the frames are of (e.g. the viewgrid and the actor).

    Returns:
        ``T`` RGB frames ``[height, width, 3]`` uint8.
    """
    plt = pyplot()
    layout = GridLayout.of(truth)
    height, width = layout.size
    true_image = mosaic(truth.cpu())
    visited = ep.visited[k].tolist()
    T = ep.decoded.shape[0]
    frames = []
    for t in range(T):
        fig, axes = plt.subplots(
            1,
            2,
            figsize=(2 * PANEL_INCHES, PANEL_INCHES * height / width + 1.0),
            layout="constrained",
        )
        try:
            seen = set(visited[: t + 1])
            step_panel(
                axes[0],
                ep,
                k,
                t,
                _fade_unseen(true_image, layout, seen),
                layout,
                f"views seen: {len(seen)} of {layout.N * layout.M}",
            )
            error = 1000 * float(ep.errors[t, k])
            step_panel(
                axes[1],
                ep,
                k,
                t,
                mosaic(to_uint8(ep.decoded[t, k], mean)),
                layout,
                f"reconstruction after glimpse {t + 1}: err×1000 {error:.2f}",
            )
            fig.suptitle(f"{title}\nglimpse {t + 1} of {T}: {move_text(ep, k, t)}", fontsize=9)
            frames.append(_render(fig))
        finally:
            plt.close(fig)
    return frames


def write_animation(frames: Sequence[np.ndarray], out: Path, *, frame_ms: int = FRAME_MS) -> Path:
    """Write ``frames`` (RGB ``[height, width, 3]`` uint8, one size) to ``out`` atomically, as
    a looping GIF or an MP4 by ``out``'s suffix (``.gif``, ``.mp4``).

    Raises:
        ValueError: no frames, frames of different sizes, or another suffix.
        ImportError: an MP4 without ``imageio-ffmpeg``.
    """
    if not frames:
        raise UserError("an animation needs at least one frame")
    if len({frame.shape for frame in frames}) != 1:
        raise UserError("animation frames differ in size")
    fmt = out.suffix.lower()[1:]
    if fmt not in FORMATS:
        raise UserError(f"animation path must end with .gif or .mp4, got {out}")
    check_formats([fmt])
    writer = _write_gif if fmt == "gif" else _write_mp4
    return _atomic(out, lambda tmp: writer(frames, tmp, frame_ms))


def _fade_unseen(image: np.ndarray, layout: GridLayout, seen: set[int]) -> np.ndarray:
    """``image`` (an RGB mosaic) with every view not in ``seen`` faded to :data:`UNSEEN_TINT`."""
    out = image.astype(np.float64)
    for view in range(layout.N * layout.M):
        if view in seen:
            continue
        n, m = divmod(view, layout.M)
        y, x = n * (layout.H + layout.gap), m * (layout.W + layout.gap)
        cell = out[y : y + layout.H, x : x + layout.W]
        cell[:] = cell * (1 - UNSEEN_FADE) + UNSEEN_TINT * UNSEEN_FADE
    return out.round().astype(np.uint8)


def _render(fig: Any) -> np.ndarray:
    """The figure's pixels at :data:`FRAME_DPI` (its fixed size, no tight cropping: every
    frame of an animation must have the same size)."""
    fig.set_dpi(FRAME_DPI)
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()


def _atomic(out: Path, write: Callable[[Path], None]) -> Path:
    """Run ``write`` on a temporary file next to ``out`` (same suffix), then rename it."""
    with atomic_path(out) as tmp:  # the temporary keeps the suffix: writers choose by it
        write(tmp)
    return out


def _write_gif(frames: Sequence[np.ndarray], out: Path, frame_ms: int) -> None:
    from PIL import Image

    # One adaptive palette per frame, no dithering (flat panels stay flat); deterministic.
    images = [
        Image.fromarray(frame).quantize(
            colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
        )
        for frame in frames
    ]
    images[0].save(
        out,
        format="GIF",
        save_all=True,
        append_images=images[1:],
        duration=frame_ms,
        loop=0,
    )


def _write_mp4(frames: Sequence[np.ndarray], out: Path, frame_ms: int) -> None:
    import imageio_ffmpeg

    height, width = frames[0].shape[:2]
    padded_h = -(-height // MP4_BLOCK) * MP4_BLOCK
    padded_w = -(-width // MP4_BLOCK) * MP4_BLOCK
    writer = imageio_ffmpeg.write_frames(
        str(out),
        (padded_w, padded_h),
        fps=1000.0 / frame_ms,
        codec="libx264",
        pix_fmt_in="rgb24",
        pix_fmt_out="yuv420p",
        macro_block_size=MP4_BLOCK,
        ffmpeg_log_level="error",
    )
    writer.send(None)  # start ffmpeg
    try:
        for frame in frames:
            canvas = np.full((padded_h, padded_w, 3), 255, dtype=np.uint8)
            canvas[:height, :width] = frame
            writer.send(canvas)
    finally:
        writer.close()
