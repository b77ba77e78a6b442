"""Data: viewgrid files, converters and procedural datasets."""

from __future__ import annotations
