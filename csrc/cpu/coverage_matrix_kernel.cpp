// CPU kernel of coverage_matrix: one pass over recon, parallel over (b, source).
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/checks.h"
#include "ops/coverage_matrix.h"

namespace pyskick {

namespace {

constexpr int kLanes = 8;

// sum_d (x[d] - y[d])^2 over 8 interleaved float32 lanes (d mod 8), lanes added in double.
double squared_error(const float* x, const float* y, std::int64_t D) {
  float acc[kLanes] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  std::int64_t d = 0;
  for (; d + kLanes <= D; d += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const float diff = x[d + l] - y[d + l];
      acc[l] += diff * diff;
    }
  }
  for (int l = 0; d < D; ++d, ++l) {
    const float diff = x[d] - y[d];
    acc[l] += diff * diff;
  }
  double total = 0.0;
  for (int l = 0; l < kLanes; ++l) total += static_cast<double>(acc[l]);
  return total;
}

}  // namespace

bool coverage_matrix_cpu(const float* recon, const float* grid, float* out, std::int64_t B,
                         std::int64_t N, std::int64_t M, std::int64_t D) {
  const std::int64_t V = N * M;
  std::int64_t non_finite = 0;
  // Pass 1: raw utilities u[b, s, t] written into out.
#pragma omp parallel for schedule(static) reduction(+ : non_finite)
  for (std::int64_t bs = 0; bs < B * V; ++bs) {
    const std::int64_t b = bs / V;
    const std::int64_t j = (bs % V) % M;  // start azimuth of source s
    const float* rec = recon + bs * V * D;
    const float* tru = grid + b * V * D;
    float* u = out + bs * V;
    for (std::int64_t n = 0; n < N; ++n) {
      for (std::int64_t m = 0; m < M; ++m) {
        const std::int64_t slot = n * M + wrap_index(m - j, M);
        const double err = squared_error(rec + slot * D, tru + (n * M + m) * D, D);
        non_finite += !std::isfinite(err);
        u[n * M + m] = static_cast<float>(1.0 / (1000.0 * err + 1e-8));
      }
    }
  }
  // Pass 2: min-max normalisation per target over sources.
#pragma omp parallel for schedule(static)
  for (std::int64_t bt = 0; bt < B * V; ++bt) {
    const std::int64_t b = bt / V;
    const std::int64_t t = bt % V;
    float* col = out + b * V * V + t;
    float lo = std::numeric_limits<float>::infinity();
    float hi = -lo;
    for (std::int64_t s = 0; s < V; ++s) {
      lo = std::min(lo, col[s * V]);
      hi = std::max(hi, col[s * V]);
    }
    const double range = static_cast<double>(hi) - static_cast<double>(lo) + 1e-8;
    for (std::int64_t s = 0; s < V; ++s) {
      col[s * V] = static_cast<float>((static_cast<double>(col[s * V]) - lo) / range);
    }
  }
  return non_finite == 0;
}

}  // namespace pyskick
