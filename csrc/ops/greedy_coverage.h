// greedy_coverage: the demonstration sidekick's greedy coverage trajectories.
#pragma once

#include <cstdint>

namespace pyskick {

// coverage: [B, V, V] float32 (source, target) utilities, V = N*M.
// starts:   [B, S] int64 start views in [0, V).
// actions:  [B, S, steps] int64 out; views: [B, S, steps + 1] int64 out (views[..., 0] = start).
// Actions form a dN x dM grid (both odd): a = (de + dN/2) * dM + (da + dM/2). A move wraps or
// clips each axis. At each step the action maximising the gain of
//   Cov(S) = sum_t min(sum_{s in unique(S)} U[s, t], 1)
// is taken; gains are computed in double, a view already in S gains exactly 0, and ties go to
// the lowest action index. Utilities must lie in [0, 1] and starts in [0, V): the CPU kernel
// checks both first and returns what is wrong (writing nothing); the CUDA kernel relies on the
// caller's check of the utilities and clamps starts into range (never reading out of bounds).
enum class GreedyStatus { kOk = 0, kCoverageOutOfRange = 1, kStartOutOfRange = 2 };

GreedyStatus greedy_coverage_cpu(const float* coverage, const std::int64_t* starts, std::int64_t* actions,
                         std::int64_t* views, std::int64_t B, std::int64_t S, std::int64_t steps,
                         std::int64_t N, std::int64_t M, std::int64_t dN, std::int64_t dM,
                         bool wrap_azimuth, bool wrap_elevation);

#ifdef PYSKICK_WITH_CUDA
void greedy_coverage_cuda(const float* coverage, const std::int64_t* starts,
                          std::int64_t* actions, std::int64_t* views, std::int64_t B,
                          std::int64_t S, std::int64_t steps, std::int64_t N, std::int64_t M,
                          std::int64_t dN, std::int64_t dM, bool wrap_azimuth,
                          bool wrap_elevation, std::uintptr_t stream);
#endif

}  // namespace pyskick
