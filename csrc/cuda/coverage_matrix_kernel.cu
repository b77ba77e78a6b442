// CUDA kernel of coverage_matrix: one warp per (b, source, target) view pair, then one thread per
// (b, target) for the min-max normalisation. Reductions use a fixed order (per-lane sequential
// sums, then a shuffle tree), so results do not depend on scheduling.
#include "common/cuda_utils.cuh"
#include "ops/coverage_matrix.h"

namespace pyskick {

namespace {

constexpr int kWarpsPerBlock = 8;

__global__ void coverage_utility_kernel(const float* __restrict__ recon,
                                        const float* __restrict__ grid, float* __restrict__ out,
                                        std::int32_t* __restrict__ nonfinite, std::int64_t B,
                                        std::int64_t N, std::int64_t M, std::int64_t D,
                                        bool vec4) {
  const std::int64_t V = N * M;
  const std::int64_t pairs = B * V * V;
  const int lane = threadIdx.x % 32;
  const std::int64_t warp0 = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kWarpsPerBlock;
  for (std::int64_t p = warp0; p < pairs; p += stride) {
    const std::int64_t bs = p / V;  // b * V + s
    const std::int64_t t = p % V;
    const std::int64_t b = bs / V;
    const std::int64_t j = (bs % V) % M;
    const std::int64_t n = t / M;
    const std::int64_t m = t % M;
    const std::int64_t slot = n * M + ((m - j) % M + M) % M;
    const float* x = recon + (bs * V + slot) * D;
    const float* y = grid + (b * V + t) * D;
    float acc = 0.f;
    if (vec4) {
      const float4* x4 = reinterpret_cast<const float4*>(x);
      const float4* y4 = reinterpret_cast<const float4*>(y);
      for (std::int64_t i = lane; i < D / 4; i += 32) {
        const float4 a = x4[i];
        const float4 c = y4[i];
        const float d0 = a.x - c.x, d1 = a.y - c.y, d2 = a.z - c.z, d3 = a.w - c.w;
        acc += d0 * d0 + d1 * d1 + d2 * d2 + d3 * d3;
      }
    } else {
      for (std::int64_t i = lane; i < D; i += 32) {
        const float d0 = x[i] - y[i];
        acc += d0 * d0;
      }
    }
    for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset);
    if (lane == 0) {
      // Every input value enters some squared error: a NaN or infinity in recon or grid (or an
      // overflow of huge finite ones) shows here, without a second pass over the inputs.
      if (!isfinite(acc)) *nonfinite = 1;
      out[p] = static_cast<float>(1.0 / (1000.0 * static_cast<double>(acc) + 1e-8));
    }
  }
}

__global__ void coverage_normalise_kernel(float* __restrict__ out, std::int64_t B,
                                          std::int64_t V) {
  const std::int64_t bt = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (bt >= B * V) return;
  float* col = out + (bt / V) * V * V + bt % V;
  float lo = col[0];
  float hi = col[0];
  for (std::int64_t s = 1; s < V; ++s) {
    lo = fminf(lo, col[s * V]);
    hi = fmaxf(hi, col[s * V]);
  }
  const double range = static_cast<double>(hi) - static_cast<double>(lo) + 1e-8;
  for (std::int64_t s = 0; s < V; ++s) {
    col[s * V] = static_cast<float>((static_cast<double>(col[s * V]) - lo) / range);
  }
}

}  // namespace

void coverage_matrix_cuda(const float* recon, const float* grid, float* out,
                          std::int32_t* nonfinite, std::int64_t B, std::int64_t N, std::int64_t M,
                          std::int64_t D, std::uintptr_t stream) {
  const std::int64_t V = N * M;
  if (B * V == 0) return;
  const cudaStream_t s = as_stream(stream);
  const bool vec4 = D % 4 == 0 && reinterpret_cast<std::uintptr_t>(recon) % 16 == 0 &&
                    reinterpret_cast<std::uintptr_t>(grid) % 16 == 0;
  const std::int64_t pairs = B * V * V;
  const std::int64_t blocks = (pairs + kWarpsPerBlock - 1) / kWarpsPerBlock;
  coverage_utility_kernel<<<static_cast<unsigned int>(blocks < (1 << 30) ? blocks : (1 << 30)),
                            32 * kWarpsPerBlock, 0, s>>>(recon, grid, out, nonfinite, B, N, M,
                                                         D, vec4);
  PYSKICK_CUDA_LAUNCH_CHECK();
  coverage_normalise_kernel<<<ceil_div(B * V, 256), 256, 0, s>>>(out, B, V);
  PYSKICK_CUDA_LAUNCH_CHECK();
}

}  // namespace pyskick
