"""Kernels of pyskick: validated wrappers over the C++/CUDA ops, with pure-PyTorch twins.

Every op takes ``backend="auto" | "native" | "reference"``. ``auto`` runs the native kernel
when one was built for the tensors' device and otherwise the twin in
:mod:`pyskick.ops._reference` (warning once). ``rotate_viewgrid``, ``coverage_matrix``,
``greedy_coverage`` and ``nms_rewards`` run as torch operators (``torch.ops.pyskick.*``: fake
kernels for ``torch.compile``, names in the profiler); ``rotate_viewgrid`` is differentiable in
a float32 grid, the others are not. ``docs/kernels.md`` walks through adding an op.
"""

from __future__ import annotations

from pyskick.ops._native import build_info, has_cuda, has_native
from pyskick.ops.coverage import coverage_matrix
from pyskick.ops.greedy import greedy_coverage
from pyskick.ops.nms import nms_rewards
from pyskick.ops.render import render_mesh_views
from pyskick.ops.viewgrid import rotate_viewgrid

OPS = (
    "rotate_viewgrid",
    "coverage_matrix",
    "greedy_coverage",
    "nms_rewards",
    "render_mesh_views",
)

__all__ = [
    "OPS",
    "build_info",
    "coverage_matrix",
    "greedy_coverage",
    "has_cuda",
    "has_native",
    "nms_rewards",
    "render_mesh_views",
    "rotate_viewgrid",
]
