"""The viewgrids a run trains and validates on, checked once."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from pyskick.errors import UserError, UserTypeError

if TYPE_CHECKING:
    from pyskick.data.hdf5_read import ViewgridFile
    from pyskick.data.spec import GridSpec


@dataclass(frozen=True)
class TrainData:
    """Training and validation viewgrids and the dataset's channel mean.

    Attributes:
        train: ``[n, N, M, C, H, W]`` uint8 training viewgrids (kept on the CPU; batches are
            moved to the device).
        val: ``[n_val, N, M, C, H, W]`` uint8 validation viewgrids of the same shape.
        channel_mean: C per-channel means on the 0–255 scale, subtracted before dividing by 255.
        spec: the dataset's geometry (set by :meth:`from_file`), handed to registered actor
            factories; None for grids without one.
        source: the HDF5 file the grids were read from (set by :meth:`from_file`); the
            trainer records its path and digest in ``RUN/dataset.json``. None for grids
            built in memory.
        file: the opened file itself (set by :meth:`from_file`): the command's reference to
            its dataset, which hashes the file once (:attr:`ViewgridFile.digest`).
    """

    train: Tensor
    val: Tensor
    channel_mean: tuple[float, ...]
    spec: GridSpec | None = None
    source: Path | None = None
    file: ViewgridFile | None = None

    def __post_init__(self) -> None:
        for name in ("train", "val"):
            grids = getattr(self, name)
            if not isinstance(grids, Tensor):
                raise UserTypeError(
                    f"{name} grids must be a torch.Tensor, got {type(grids).__name__}"
                )
            if grids.dtype != torch.uint8:
                raise UserTypeError(f"{name} grids must be uint8, got {grids.dtype}")
            if grids.dim() != 6 or grids.shape[0] == 0:
                raise UserError(
                    f"{name} grids must be a non-empty [n, N, M, C, H, W] tensor, "
                    f"got shape {list(grids.shape)}"
                )
            if grids.shape[4] != grids.shape[5]:
                raise UserError(f"{name} views must be square, got {list(grids.shape[4:])}")
        if self.train.shape[1:] != self.val.shape[1:]:
            raise UserError(
                f"train and val viewgrids differ in shape: {list(self.train.shape[1:])} vs "
                f"{list(self.val.shape[1:])}"
            )
        mean = tuple(float(x) for x in self.channel_mean)
        if len(mean) != self.train.shape[3]:
            raise UserError(
                f"channel_mean has {len(mean)} values for {self.train.shape[3]} channels"
            )
        object.__setattr__(self, "channel_mean", mean)
        if self.spec is not None:
            self._check_spec()
        if self.source is not None:
            object.__setattr__(self, "source", Path(self.source))

    def _check_spec(self) -> None:
        from pyskick.data.spec import GridSpec

        if not isinstance(self.spec, GridSpec):
            raise UserTypeError(f"spec must be a GridSpec or None, got {type(self.spec).__name__}")
        if tuple(self.spec.view_shape) != tuple(self.train.shape[1:]):
            raise UserError(
                f"spec describes viewgrids {list(self.spec.view_shape)} but the grids are "
                f"{list(self.train.shape[1:])}"
            )

    @property
    def grid_shape(self) -> tuple[int, int, int, int]:
        """``(N, M, C, H)``."""
        N, M, C, H = self.train.shape[1:5]
        return int(N), int(M), int(C), int(H)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str] | ViewgridFile) -> TrainData:
        """Load the train and val splits of a viewgrid HDF5 file, given by path or already
        opened (needs :mod:`pyskick.data`)."""
        from pyskick.data import ViewgridFile

        source = path if isinstance(path, ViewgridFile) else ViewgridFile(path)
        return cls(
            source.split("train").load(),
            source.split("val").load(),
            tuple(source.spec.channel_mean),
            source.spec,
            source.path,
            source,
        )
