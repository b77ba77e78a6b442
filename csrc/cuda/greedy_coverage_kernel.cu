// CUDA kernel of greedy_coverage: one thread per (b, start) trajectory. Each thread keeps its
// running coverage (double) and chosen-set flags in shared memory, strided by blockDim so that
// neighbouring threads touch neighbouring banks. Gains use the same formula and summation order
// as the CPU kernel, so both backends give identical trajectories.
#include "common/cuda_utils.cuh"
#include "ops/greedy_coverage.h"

namespace pyskick {

namespace {

constexpr std::int64_t kSharedBudget = 48 * 1024;
constexpr std::int64_t kBytesPerView = sizeof(double) + sizeof(char);

__device__ __forceinline__ std::int64_t move_axis(std::int64_t i, std::int64_t n, bool wrap) {
  if (wrap) {
    const std::int64_t r = i % n;
    return r < 0 ? r + n : r;
  }
  return i < 0 ? 0 : (i >= n ? n - 1 : i);
}

// sum_t min(row[t], max(1 - cov_t, 0)) over 8 interleaved lanes (target t in lane t mod 8),
// combined pairwise: the CPU kernel's and the twin's order, so the three agree bit for bit.
// Unrolled by 8 with every lane index known at compile time, the lanes stay in registers (an
// array indexed by t % 8 at run time spills to a local stack frame). cov is strided by T.
__device__ __forceinline__ double coverage_gain(const float* __restrict__ row,
                                                const double* __restrict__ cov, int T,
                                                std::int64_t V) {
  double acc[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
  std::int64_t t = 0;
  for (; t + 8 <= V; t += 8) {
#pragma unroll
    for (int l = 0; l < 8; ++l) {
      const double residual = fmax(1.0 - cov[(t + l) * T], 0.0);
      acc[l] += fmin(static_cast<double>(row[t + l]), residual);
    }
  }
#pragma unroll
  for (int l = 0; l < 7; ++l) {
    if (t + l < V) {
      const double residual = fmax(1.0 - cov[(t + l) * T], 0.0);
      acc[l] += fmin(static_cast<double>(row[t + l]), residual);
    }
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

__global__ void greedy_coverage_kernel(const float* __restrict__ coverage,
                                       const std::int64_t* __restrict__ starts,
                                       std::int64_t* __restrict__ actions,
                                       std::int64_t* __restrict__ views, std::int64_t B,
                                       std::int64_t S, std::int64_t steps, std::int64_t N,
                                       std::int64_t M, std::int64_t dN, std::int64_t dM,
                                       bool wrap_azimuth, bool wrap_elevation) {
  extern __shared__ unsigned char smem[];
  const std::int64_t V = N * M;
  const int tid = threadIdx.x;
  const int T = blockDim.x;
  double* cov = reinterpret_cast<double*>(smem);
  char* chosen = reinterpret_cast<char*>(cov + V * T);
  const std::int64_t bs = static_cast<std::int64_t>(blockIdx.x) * T + tid;
  if (bs >= B * S) return;
  const float* U = coverage + (bs / S) * V * V;
  std::int64_t* act = actions + bs * steps;
  std::int64_t* vis = views + bs * (steps + 1);
  // Starts out of [0, V) (unchecked calls, check_values=False) are clamped: undefined
  // trajectories, never an out-of-bounds read.
  std::int64_t cur = starts[bs];
  cur = cur < 0 ? 0 : (cur >= V ? V - 1 : cur);
  for (std::int64_t t = 0; t < V; ++t) {
    cov[t * T + tid] = static_cast<double>(U[cur * V + t]);
    chosen[t * T + tid] = 0;
  }
  chosen[cur * T + tid] = 1;
  vis[0] = cur;
  const std::int64_t A = dN * dM;
  for (std::int64_t k = 0; k < steps; ++k) {
    const std::int64_t e = cur / M;
    const std::int64_t a = cur % M;
    double best_gain = -INFINITY;
    std::int64_t best_action = 0;
    std::int64_t best_view = cur;
    for (std::int64_t ai = 0; ai < A; ++ai) {
      const std::int64_t ne = move_axis(e + ai / dM - dN / 2, N, wrap_elevation);
      const std::int64_t na = move_axis(a + ai % dM - dM / 2, M, wrap_azimuth);
      const std::int64_t v = ne * M + na;
      double gain = 0.0;
      if (!chosen[v * T + tid]) gain = coverage_gain(U + v * V, cov + tid, T, V);
      if (gain > best_gain) {  // strict: ties keep the lowest action index
        best_gain = gain;
        best_action = ai;
        best_view = v;
      }
    }
    if (!chosen[best_view * T + tid]) {
      const float* row = U + best_view * V;
      for (std::int64_t t = 0; t < V; ++t) cov[t * T + tid] += static_cast<double>(row[t]);
      chosen[best_view * T + tid] = 1;
    }
    act[k] = best_action;
    vis[k + 1] = best_view;
    cur = best_view;
  }
}

}  // namespace

void greedy_coverage_cuda(const float* coverage, const std::int64_t* starts,
                          std::int64_t* actions, std::int64_t* views, std::int64_t B,
                          std::int64_t S, std::int64_t steps, std::int64_t N, std::int64_t M,
                          std::int64_t dN, std::int64_t dM, bool wrap_azimuth,
                          bool wrap_elevation, std::uintptr_t stream) {
  const std::int64_t V = N * M;
  const std::int64_t trajectories = B * S;
  if (trajectories == 0) return;
  std::int64_t threads = kSharedBudget / (V * kBytesPerView);
  PYSKICK_CHECK_INPUT(threads >= 1, "greedy_coverage: the CUDA kernel supports at most ",
                      kSharedBudget / kBytesPerView, " views per grid, got V=", V,
                      "; use the CPU backend for larger grids");
  threads = threads > 64 ? 64 : threads;
  const std::size_t shared = static_cast<std::size_t>(threads * V * kBytesPerView);
  greedy_coverage_kernel<<<ceil_div(trajectories, threads), static_cast<unsigned int>(threads),
                           shared, as_stream(stream)>>>(coverage, starts, actions, views, B, S,
                                                        steps, N, M, dN, dM, wrap_azimuth,
                                                        wrap_elevation);
  PYSKICK_CUDA_LAUNCH_CHECK();
}

}  // namespace pyskick
