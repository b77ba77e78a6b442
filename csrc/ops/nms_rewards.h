// nms_rewards: greedy non-maximum suppression of one-view score maps.
#pragma once

#include <cstdint>

namespace pyskick {

// scores, out: [B, N, M] float32. For each sample, k times: take the highest not-yet-suppressed
// cell (ties: lowest row-major index), copy its score to out, and suppress every cell within
// Chebyshev distance `radius` (azimuth wraps, elevation clips). All other cells of out are 0.
// Stops early when every cell is suppressed. The CPU kernel returns false when a score is NaN
// or infinite (the output is then unspecified); the CUDA kernel relies on the caller's check.
bool nms_rewards_cpu(const float* scores, float* out, std::int64_t B, std::int64_t N,
                     std::int64_t M, std::int64_t k, std::int64_t radius);

#ifdef PYSKICK_WITH_CUDA
void nms_rewards_cuda(const float* scores, float* out, std::int64_t B, std::int64_t N,
                      std::int64_t M, std::int64_t k, std::int64_t radius, std::uintptr_t stream);
#endif

}  // namespace pyskick
