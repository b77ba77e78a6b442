// coverage_matrix: the demonstration sidekick's normalised utility of every view for every target.
#pragma once

#include <cstdint>

namespace pyskick {

// recon: [B, V, N, M, D] float32, the one-view reconstruction from start view s = (i, j), in the
//        start-relative frame (slot m holds absolute azimuth (j + m) mod M); D = C*H*W.
// grid:  [B, N, M, D] float32, the true (preprocessed) grid in the absolute frame.
// out:   [B, V, V] float32, out[b, s, t] for source s and target t = (n, m):
//        err = sum_d (recon[b, s, n, (m - j) mod M, d] - grid[b, n, m, d])^2
//        u   = 1 / (1000 * err + 1e-8)
//        out = (u - min_s u) / (max_s u - min_s u + 1e-8)   (min/max over sources, per target)
// Per-view sums accumulate in float32 over 8 interleaved lanes (d mod 8) that are added in
// double, so the order is fixed and independent of the thread count.
// Returns false when some err is not finite: every recon and grid value enters some err, so a
// NaN or infinite input always shows (as can an overflow of huge finite values); the caller
// then finds which input is to blame. The check costs nothing on the hot path.
bool coverage_matrix_cpu(const float* recon, const float* grid, float* out, std::int64_t B,
                         std::int64_t N, std::int64_t M, std::int64_t D);

#ifdef PYSKICK_WITH_CUDA
// The same on the GPU, ordered on `stream`: instead of returning, it sets the device int32
// `*nonfinite` to 1 when some err is not finite (the caller zeroes it and reads it after).
void coverage_matrix_cuda(const float* recon, const float* grid, float* out,
                          std::int32_t* nonfinite, std::int64_t B, std::int64_t N, std::int64_t M,
                          std::int64_t D, std::uintptr_t stream);
#endif

}  // namespace pyskick
