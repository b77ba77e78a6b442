"""Architecture configuration of the completion agent and its named presets."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, get_args

InitScheme = Literal["xavier", "normal", "uniform"]
INIT_SCHEMES: tuple[str, ...] = get_args(InitScheme)

_TUPLE_FIELDS = {"conv_channels": 3, "deconv_channels": 2}
_BOOL_FIELDS = (
    "act_on_elevation",
    "act_on_azimuth",
    "act_on_time",
    "known_azimuth",
    "mean_subtract",
)
_MIN_VIEW_SIZE = 16


@dataclass(frozen=True)
class ModelConfig:
    """Shapes and switches of :class:`~pyskick.models.CompletionPolicy` and its critics.

    Defaults are the paper's SUN360 model (docs/paper-reference.md §3). Derived sizes are
    properties, never stored fields, so a saved config cannot contradict itself.
    """

    n_elevations: int = 4
    """N, number of elevations of the viewgrid (rows of the decoded grid)."""
    n_azimuths: int = 8
    """M, number of azimuths of the viewgrid (columns of the decoded grid)."""
    channels: int = 3
    """C, channels of one view (3 for RGB scenes, 1 for grayscale objects)."""
    view_size: int = 32
    """H = W, side of one square view in pixels; a multiple of 8, at least 16 (paper: 32)."""
    n_actions: int = 15
    """A, number of discrete camera motions the act head scores (paper: 3 x 5 = 15)."""
    conv_channels: tuple[int, int, int] = (32, 32, 64)
    """Output channels of the three 5x5 convolutions of the image encoder."""
    sense_size: int = 256
    """Width of the image encoder's output (its final Linear)."""
    proprio_embed_size: int = 16
    """Width of the proprioception embedding (Linear(P -> this) + ReLU)."""
    fuse_size: int = 256
    """Width of both Linear layers of Fuse and of its BatchNorm; the LSTM input size."""
    hidden_size: int = 256
    """Hidden (and cell) size of the aggregating LSTM."""
    act_size: int = 128
    """Width of the two hidden layers of the act head and of the critics."""
    decode_start_channels: int = 64
    """Channels of the decoder's first feature map, of side view_size / 8 (paper: 64 x 4 x 4)."""
    deconv_channels: tuple[int, int] = (256, 128)
    """Output channels of the first two transposed convolutions of the decoder."""
    grid_view_size: int = 128
    """Full-observability critic: per-view projection of the image encoding (paper: 128)."""
    grid_size: int = 256
    """Full-observability critic: width of the fused whole-grid encoding (paper: 256)."""
    act_on_elevation: bool = True
    """Feed the absolute elevation index to the act head and partial critic (``--actOnElev``)."""
    act_on_azimuth: bool = False
    """Feed the absolute azimuth index to the act head and partial critic (``--actOnAzim``)."""
    act_on_time: bool = True
    """Feed the time step t (a raw number, 0..T-1) to the act head and partial critic."""
    known_azimuth: bool = False
    """Proprioception carries the absolute azimuth as a 4th entry (``--knownAzim``)."""
    mean_subtract: bool = True
    """Views are mean-subtracted, so the decoder ends in LeakyReLU(0.8); otherwise in ReLU."""
    init: InitScheme = "xavier"
    """Weight initialisation scheme: "xavier" (paper default), "normal" or "uniform".

    The schemes are in docs/paper-reference.md §3.9.
    """

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in _TUPLE_FIELDS:
                _check_int_tuple(f.name, value, _TUPLE_FIELDS[f.name])
            elif f.name in _BOOL_FIELDS:
                if not isinstance(value, bool):
                    raise TypeError(f"ModelConfig.{f.name} must be a bool, got {value!r}")
            elif f.name == "init":
                if value not in INIT_SCHEMES:
                    raise ValueError(
                        f"ModelConfig.init must be one of {', '.join(INIT_SCHEMES)}, got {value!r}"
                    )
            else:
                _check_positive_int(f.name, value)
        if self.view_size % 8 != 0 or self.view_size < _MIN_VIEW_SIZE:
            # Three stride-2 transposed convolutions start from view_size / 8, and the encoder's
            # three k3 s2 pools need at least 16 pixels to leave a 1x1 map.
            raise ValueError(
                "ModelConfig.view_size must be a multiple of 8 and at least "
                f"{_MIN_VIEW_SIZE}, got {self.view_size}"
            )

    # ---- derived sizes -------------------------------------------------------------------

    @property
    def n_views(self) -> int:
        """V = N * M, number of views in a grid."""
        return self.n_elevations * self.n_azimuths

    @property
    def proprio_size(self) -> int:
        """P: commanded (d_elev, d_azim), absolute elevation, and the azimuth when known."""
        return 3 + int(self.known_azimuth)

    @property
    def encoder_map_size(self) -> int:
        """Side of the image encoder's last feature map: three k3 s2 pools (3 for 32 px)."""
        side = self.view_size
        for _ in range(3):
            side = (side - 3) // 2 + 1
        return side

    @property
    def encoder_flat_size(self) -> int:
        """Width of the flattened last feature map (576 = 64 * 3 * 3 for the paper)."""
        return self.conv_channels[2] * self.encoder_map_size**2

    @property
    def fuse_input_size(self) -> int:
        """Width of concat(image encoding, proprioception embedding) (272 for the paper)."""
        return self.sense_size + self.proprio_embed_size

    @property
    def decode_start_size(self) -> int:
        """Side of the decoder's first feature map (4 for 32 px views)."""
        return self.view_size // 8

    @property
    def decode_linear_size(self) -> int:
        """Width of the decoder's Linear layer (1024 = 64 * 4 * 4 for the paper)."""
        return self.decode_start_channels * self.decode_start_size**2

    @property
    def decoded_channels(self) -> int:
        """Channels of the decoder's last map, V * C; channel (n * M + m) * C + c."""
        return self.n_views * self.channels

    @property
    def act_input_size(self) -> int:
        """Width of the act head's input: h, deltas and the selected side inputs (260)."""
        return (
            self.hidden_size
            + 2
            + int(self.act_on_elevation)
            + int(self.act_on_azimuth)
            + int(self.act_on_time)
        )

    @property
    def full_critic_input_size(self) -> int:
        """Width of the full-observability critic's input: h, deltas, elev, azim, t, grid (517)."""
        return self.hidden_size + 5 + self.grid_size

    @property
    def grid_shape(self) -> tuple[int, int, int, int, int]:
        """``(N, M, C, H, W)``: a viewgrid this model takes (a batch is ``[n, N, M, C, H, W]``
        uint8)."""
        return (self.n_elevations, self.n_azimuths, self.channels, self.view_size, self.view_size)

    def check_grids(self, grids: object, *, who: str = "this model", empty_ok: bool = True) -> None:
        """Refuse viewgrids this model cannot take (the one check of grids against a model).

        Args:
            grids: ``[n, N, M, C, H, W]`` uint8 tensor.
            who: the model, as the message names it.
            empty_ok: whether ``n = 0`` is allowed.

        Raises:
            TypeError: not a uint8 tensor.
            GridShapeError: another shape (one line with the expected and the given shapes).
        """
        import torch

        from pyskick.errors import GridShapeError

        if not isinstance(grids, torch.Tensor):
            raise TypeError(f"grids must be a torch.Tensor, got {type(grids).__name__}")
        if grids.dtype != torch.uint8:
            raise TypeError(f"grids must be uint8 (raw 0-255 views), got {grids.dtype}")
        expected = self.grid_shape
        if (
            grids.dim() != 6
            or tuple(grids.shape[1:]) != expected
            or (not empty_ok and grids.shape[0] == 0)
        ):
            n = "n" if empty_ok else "n>0"
            raise GridShapeError(
                f"grids must have shape [{n}, {', '.join(map(str, expected))}] for {who}, "
                f"got {list(grids.shape)}"
            )

    # ---- plain-type round trip -----------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain ``dict`` of ints, bools, strings and lists, for checkpoints, JSON and TOML."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelConfig:
        """Build a config from :meth:`to_dict`'s output; missing keys take the defaults.

        Raises:
            ValueError: on a key that is not a field, or on a value the config rejects.
            TypeError: on a value of the wrong type.
        """
        if not isinstance(data, Mapping):
            raise TypeError(f"ModelConfig.from_dict needs a mapping, got {type(data).__name__}")
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise ValueError(
                f"ModelConfig got unknown keys {', '.join(unknown)}; valid keys: {', '.join(names)}"
            )
        kwargs: dict[str, Any] = {
            key: tuple(value) if key in _TUPLE_FIELDS and isinstance(value, list) else value
            for key, value in data.items()
        }
        return cls(**kwargs)


def _check_positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"ModelConfig.{name} must be an int, got {value!r}")
    if value < 1:
        raise ValueError(f"ModelConfig.{name} must be positive, got {value}")


def _check_int_tuple(name: str, value: object, length: int) -> None:
    if not isinstance(value, tuple) or len(value) != length:
        raise TypeError(f"ModelConfig.{name} must be a tuple of {length} ints, got {value!r}")
    for item in value:
        _check_positive_int(name, item)


_PAPER_SUN360 = ModelConfig()

PRESETS: Mapping[str, ModelConfig] = MappingProxyType(
    {
        "paper-sun360": _PAPER_SUN360,
        "paper-modelnet": dataclasses.replace(
            _PAPER_SUN360, n_elevations=5, n_azimuths=9, channels=1
        ),
        # Same structure as paper-sun360 at about a quarter of the widths, so that a T=4 training
        # step at batch 32 is quick on 2 CPU cores (docs/model.md has the timings).
        "cpu-demo": dataclasses.replace(
            _PAPER_SUN360,
            conv_channels=(16, 16, 32),
            sense_size=128,
            fuse_size=128,
            hidden_size=128,
            act_size=64,
            decode_start_channels=32,
            deconv_channels=(64, 32),
            grid_view_size=64,
            grid_size=128,
        ),
    }
)
"""Named model configs: the paper's two datasets and a small CPU demo (read-only)."""


def preset(name: str) -> ModelConfig:
    """The :class:`ModelConfig` registered as ``name`` in :data:`PRESETS`.

    Raises:
        ValueError: if ``name`` is not a preset; the message lists the valid names.
    """
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(
            f"unknown model preset {name!r}; valid presets: {', '.join(PRESETS)}"
        ) from None
