// rotate_viewgrid: per-sample roll of a viewgrid along azimuth and elevation.
#pragma once

#include <cstdint>

namespace pyskick {

// out[b, n, m] = grid[b, (n + s * e_b) mod N, (m + s * a_b) mod M] with s = -1 when `inverse`,
// else +1. Each view (C*H*W elements) is a contiguous block of `view_bytes` bytes, so one kernel
// serves every dtype. grid, out: [B, N, M, view_bytes]; azimuth_shift: [B];
// elevation_shift: [B] or nullptr (no elevation roll).
void rotate_viewgrid_cpu(const std::uint8_t* grid, std::uint8_t* out, std::int64_t B,
                         std::int64_t N, std::int64_t M, std::int64_t view_bytes,
                         const std::int64_t* azimuth_shift, const std::int64_t* elevation_shift,
                         bool inverse);

#ifdef PYSKICK_WITH_CUDA
// Same contract; every pointer is device memory; runs on `stream` (a cudaStream_t).
void rotate_viewgrid_cuda(const std::uint8_t* grid, std::uint8_t* out, std::int64_t B,
                          std::int64_t N, std::int64_t M, std::int64_t view_bytes,
                          const std::int64_t* azimuth_shift, const std::int64_t* elevation_shift,
                          bool inverse, std::uintptr_t stream);
#endif

}  // namespace pyskick
