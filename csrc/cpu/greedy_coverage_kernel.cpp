// CPU kernel of greedy_coverage: one trajectory per (b, start), parallel over them.
#include <algorithm>
#include <limits>
#include <vector>

#include "common/checks.h"
#include "ops/greedy_coverage.h"

namespace pyskick {

void greedy_coverage_cpu(const float* coverage, const std::int64_t* starts, std::int64_t* actions,
                         std::int64_t* views, std::int64_t B, std::int64_t S, std::int64_t steps,
                         std::int64_t N, std::int64_t M, std::int64_t dN, std::int64_t dM,
                         bool wrap_azimuth, bool wrap_elevation) {
  const std::int64_t V = N * M;
  const std::int64_t A = dN * dM;
#pragma omp parallel
  {
    std::vector<double> cov(static_cast<std::size_t>(V));
    std::vector<char> chosen(static_cast<std::size_t>(V));
#pragma omp for schedule(dynamic, 16)
    for (std::int64_t bs = 0; bs < B * S; ++bs) {
      const float* U = coverage + (bs / S) * V * V;
      std::int64_t* act = actions + bs * steps;
      std::int64_t* vis = views + bs * (steps + 1);
      std::int64_t cur = starts[bs];
      std::fill(chosen.begin(), chosen.end(), 0);
      for (std::int64_t t = 0; t < V; ++t) cov[t] = static_cast<double>(U[cur * V + t]);
      chosen[cur] = 1;
      vis[0] = cur;
      for (std::int64_t k = 0; k < steps; ++k) {
        const std::int64_t e = cur / M;
        const std::int64_t a = cur % M;
        double best_gain = -std::numeric_limits<double>::infinity();
        std::int64_t best_action = 0;
        std::int64_t best_view = cur;
        for (std::int64_t act_idx = 0; act_idx < A; ++act_idx) {
          const std::int64_t ne_raw = e + act_idx / dM - dN / 2;
          const std::int64_t na_raw = a + act_idx % dM - dM / 2;
          const std::int64_t ne = wrap_elevation ? wrap_index(ne_raw, N) : clip_index(ne_raw, N);
          const std::int64_t na = wrap_azimuth ? wrap_index(na_raw, M) : clip_index(na_raw, M);
          const std::int64_t v = ne * M + na;
          double gain = 0.0;
          if (!chosen[v]) {
            const float* row = U + v * V;
            for (std::int64_t t = 0; t < V; ++t) {
              gain += std::min(cov[t] + static_cast<double>(row[t]), 1.0) - std::min(cov[t], 1.0);
            }
          }
          if (gain > best_gain) {  // strict: ties keep the lowest action index
            best_gain = gain;
            best_action = act_idx;
            best_view = v;
          }
        }
        if (!chosen[best_view]) {
          const float* row = U + best_view * V;
          for (std::int64_t t = 0; t < V; ++t) cov[t] += static_cast<double>(row[t]);
          chosen[best_view] = 1;
        }
        act[k] = best_action;
        vis[k + 1] = best_view;
        cur = best_view;
      }
    }
  }
}

}  // namespace pyskick
