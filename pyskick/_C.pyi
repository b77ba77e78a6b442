# Typed stub of the compiled module pyskick._C (csrc/bindings.cpp). Addresses are
# Tensor.data_ptr() values; `stream` is torch.cuda.current_stream().cuda_stream. Call the
# validated wrappers in pyskick.ops instead of these. tests/ops/test_native_stub.py checks that
# this file declares the module's functions with their argument names and return types.
from typing import Any

class InputError(ValueError):
    """A kernel's check of the caller's values failed; pyskick.ops raises it as UserError."""

def build_info() -> dict[str, Any]: ...
def has_cuda() -> bool: ...
def get_num_threads() -> int: ...
def set_num_threads(n: int) -> None: ...
def rotate_viewgrid_cpu(
    grid: int,
    out: int,
    B: int,
    N: int,
    M: int,
    view_bytes: int,
    azimuth_shift: int,
    elevation_shift: int,
    inverse: bool,
) -> None: ...
def rotate_viewgrid_cuda(
    grid: int,
    out: int,
    B: int,
    N: int,
    M: int,
    view_bytes: int,
    azimuth_shift: int,
    elevation_shift: int,
    inverse: bool,
    stream: int,
) -> None: ...
def coverage_matrix_cpu(
    recon: int, grid: int, out: int, B: int, N: int, M: int, D: int, nonfinite: int
) -> None: ...
def coverage_matrix_cuda(
    recon: int, grid: int, out: int, B: int, N: int, M: int, D: int, nonfinite: int, stream: int
) -> None: ...
def greedy_coverage_cpu(
    coverage: int,
    starts: int,
    actions: int,
    views: int,
    B: int,
    S: int,
    steps: int,
    N: int,
    M: int,
    dN: int,
    dM: int,
    wrap_azimuth: bool,
    wrap_elevation: bool,
) -> None: ...
def greedy_coverage_cuda(
    coverage: int,
    starts: int,
    actions: int,
    views: int,
    B: int,
    S: int,
    steps: int,
    N: int,
    M: int,
    dN: int,
    dM: int,
    wrap_azimuth: bool,
    wrap_elevation: bool,
    stream: int,
) -> None: ...
def nms_rewards_cpu(scores: int, out: int, B: int, N: int, M: int, k: int, radius: int) -> None: ...
def nms_rewards_cuda(
    scores: int, out: int, B: int, N: int, M: int, k: int, radius: int, stream: int
) -> None: ...
def render_mesh_views_cpu(
    vertices: int,
    faces: int,
    elevations_deg: int,
    azimuths_deg: int,
    lights: int,
    out: int,
    P: int,
    F: int,
    N: int,
    M: int,
    L: int,
    image_size: int,
    supersample: int,
    ambient: float,
    diffuse: float,
    specular: float,
    shininess: float,
    albedo: float,
    fov_deg: float,
    distance: float,
    background: float,
) -> None: ...
