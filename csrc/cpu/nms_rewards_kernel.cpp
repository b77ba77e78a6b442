// CPU kernel of nms_rewards: one sample per iteration, parallel over the batch.
#include <algorithm>
#include <vector>

#include "common/checks.h"
#include "ops/nms_rewards.h"

namespace pyskick {

void nms_rewards_cpu(const float* scores, float* out, std::int64_t B, std::int64_t N,
                     std::int64_t M, std::int64_t k, std::int64_t radius) {
  const std::int64_t V = N * M;
#pragma omp parallel if (B * V > 4096)
  {
    std::vector<char> suppressed(static_cast<std::size_t>(V));
#pragma omp for schedule(static)
    for (std::int64_t b = 0; b < B; ++b) {
      const float* s = scores + b * V;
      float* o = out + b * V;
      std::fill(o, o + V, 0.f);
      std::fill(suppressed.begin(), suppressed.end(), 0);
      for (std::int64_t iter = 0; iter < k; ++iter) {
        std::int64_t best = -1;
        for (std::int64_t v = 0; v < V; ++v) {
          if (!suppressed[v] && (best < 0 || s[v] > s[best])) best = v;  // ties: lowest index
        }
        if (best < 0) break;
        o[best] = s[best];
        const std::int64_t pn = best / M;
        const std::int64_t pm = best % M;
        const std::int64_t r_az = std::min(radius, M / 2);  // a wider window covers the ring
        for (std::int64_t n = std::max<std::int64_t>(pn - radius, 0);
             n <= std::min(pn + radius, N - 1); ++n) {
          for (std::int64_t da = -r_az; da <= r_az; ++da) {
            suppressed[n * M + wrap_index(pm + da, M)] = 1;
          }
        }
      }
    }
  }
}

}  // namespace pyskick
