// CUDA kernel of rotate_viewgrid: one block per destination view, 16-byte copies when aligned.
#include "common/cuda_utils.cuh"
#include "ops/rotate_viewgrid.h"

namespace pyskick {

namespace {

__device__ __forceinline__ std::int64_t wrap_dev(std::int64_t i, std::int64_t n) {
  const std::int64_t r = i % n;
  return r < 0 ? r + n : r;
}

template <typename VecT>
__global__ void rotate_viewgrid_kernel(const VecT* __restrict__ grid, VecT* __restrict__ out,
                                       std::int64_t B, std::int64_t N, std::int64_t M,
                                       std::int64_t view_vecs,
                                       const std::int64_t* __restrict__ azimuth_shift,
                                       const std::int64_t* __restrict__ elevation_shift,
                                       bool inverse) {
  const std::int64_t views = B * N * M;
  for (std::int64_t idx = blockIdx.x; idx < views; idx += gridDim.x) {
    const std::int64_t b = idx / (N * M);
    const std::int64_t n = (idx / M) % N;
    const std::int64_t m = idx % M;
    std::int64_t a = wrap_dev(azimuth_shift[b], M);
    std::int64_t e = elevation_shift ? wrap_dev(elevation_shift[b], N) : 0;
    if (inverse) {
      a = (M - a) % M;
      e = (N - e) % N;
    }
    const std::int64_t src = (b * N + (n + e) % N) * M + (m + a) % M;
    const VecT* from = grid + src * view_vecs;
    VecT* to = out + idx * view_vecs;
    for (std::int64_t i = threadIdx.x; i < view_vecs; i += blockDim.x) to[i] = from[i];
  }
}

template <typename VecT>
void launch(const std::uint8_t* grid, std::uint8_t* out, std::int64_t B, std::int64_t N,
            std::int64_t M, std::int64_t view_bytes, const std::int64_t* azimuth_shift,
            const std::int64_t* elevation_shift, bool inverse, cudaStream_t stream) {
  const std::int64_t views = B * N * M;
  const unsigned int blocks = static_cast<unsigned int>(views < (1 << 30) ? views : (1 << 30));
  rotate_viewgrid_kernel<VecT><<<blocks, 256, 0, stream>>>(
      reinterpret_cast<const VecT*>(grid), reinterpret_cast<VecT*>(out), B, N, M,
      view_bytes / static_cast<std::int64_t>(sizeof(VecT)), azimuth_shift, elevation_shift,
      inverse);
  PYSKICK_CUDA_LAUNCH_CHECK();
}

}  // namespace

void rotate_viewgrid_cuda(const std::uint8_t* grid, std::uint8_t* out, std::int64_t B,
                          std::int64_t N, std::int64_t M, std::int64_t view_bytes,
                          const std::int64_t* azimuth_shift, const std::int64_t* elevation_shift,
                          bool inverse, std::uintptr_t stream) {
  if (B * N * M == 0 || view_bytes == 0) return;
  const auto aligned = [](const void* p, std::uintptr_t k) {
    return reinterpret_cast<std::uintptr_t>(p) % k == 0;
  };
  const cudaStream_t s = as_stream(stream);
  if (view_bytes % 16 == 0 && aligned(grid, 16) && aligned(out, 16)) {
    launch<uint4>(grid, out, B, N, M, view_bytes, azimuth_shift, elevation_shift, inverse, s);
  } else if (view_bytes % 4 == 0 && aligned(grid, 4) && aligned(out, 4)) {
    launch<std::uint32_t>(grid, out, B, N, M, view_bytes, azimuth_shift, elevation_shift, inverse,
                          s);
  } else {
    launch<std::uint8_t>(grid, out, B, N, M, view_bytes, azimuth_shift, elevation_shift, inverse,
                         s);
  }
}

}  // namespace pyskick
