// CUDA kernel of nms_rewards: one thread per sample, suppression flags in shared memory.
#include "common/cuda_utils.cuh"
#include "ops/nms_rewards.h"

namespace pyskick {

namespace {

constexpr std::int64_t kSharedBudget = 48 * 1024;

__global__ void nms_rewards_kernel(const float* __restrict__ scores, float* __restrict__ out,
                                   std::int64_t B, std::int64_t N, std::int64_t M,
                                   std::int64_t k, std::int64_t radius) {
  extern __shared__ unsigned char smem[];
  const int tid = threadIdx.x;
  const int T = blockDim.x;
  const std::int64_t b = static_cast<std::int64_t>(blockIdx.x) * T + tid;
  if (b >= B) return;
  const std::int64_t V = N * M;
  unsigned char* suppressed = smem;  // suppressed[v * T + tid]
  const float* s = scores + b * V;
  float* o = out + b * V;
  for (std::int64_t v = 0; v < V; ++v) {
    o[v] = 0.f;
    suppressed[v * T + tid] = 0;
  }
  const std::int64_t r_az = radius < M / 2 ? radius : M / 2;
  for (std::int64_t iter = 0; iter < k; ++iter) {
    std::int64_t best = -1;
    for (std::int64_t v = 0; v < V; ++v) {
      if (!suppressed[v * T + tid] && (best < 0 || s[v] > s[best])) best = v;
    }
    if (best < 0) break;
    o[best] = s[best];
    const std::int64_t pn = best / M;
    const std::int64_t pm = best % M;
    const std::int64_t n_lo = pn - radius < 0 ? 0 : pn - radius;
    const std::int64_t n_hi = pn + radius > N - 1 ? N - 1 : pn + radius;
    for (std::int64_t n = n_lo; n <= n_hi; ++n) {
      for (std::int64_t da = -r_az; da <= r_az; ++da) {
        const std::int64_t m = ((pm + da) % M + M) % M;
        suppressed[(n * M + m) * T + tid] = 1;
      }
    }
  }
}

}  // namespace

void nms_rewards_cuda(const float* scores, float* out, std::int64_t B, std::int64_t N,
                      std::int64_t M, std::int64_t k, std::int64_t radius, std::uintptr_t stream) {
  const std::int64_t V = N * M;
  if (B * V == 0) return;
  radius = radius < (N > M ? N : M) ? radius : (N > M ? N : M);  // no overflow of pn + radius
  std::int64_t threads = kSharedBudget / V;
  PYSKICK_CHECK_INPUT(threads >= 1, "nms_rewards: the CUDA kernel supports at most ",
                      kSharedBudget, " views per grid, got V=", V,
                      "; use the CPU backend for larger grids");
  threads = threads > 128 ? 128 : threads;
  nms_rewards_kernel<<<ceil_div(B, threads), static_cast<unsigned int>(threads),
                       static_cast<std::size_t>(threads * V), as_stream(stream)>>>(
      scores, out, B, N, M, k, radius);
  PYSKICK_CUDA_LAUNCH_CHECK();
}

}  // namespace pyskick
