// CPU kernel of greedy_coverage: one trajectory per (b, start), parallel over them.
//
// With utilities in [0, 1], the gain of adding view v is sum_t min(U[v, t], r_t), where
// r_t = max(1 - cov_t, 0) is what is left to cover of target t: the same quantity as
// Cov(S + v) - Cov(S), with half the arithmetic. Sums run in double over 4 interleaved lanes
// (t mod 4), so AVX2 and scalar code give identical results.
#include <algorithm>
#include <limits>
#include <vector>

#include "common/checks.h"
#include "ops/greedy_coverage.h"

namespace pyskick {

namespace {

constexpr int kLanes = 4;

struct Problem {
  const float* coverage;
  std::int64_t B, S, steps, N, M, dN, dM;
  bool wrap_azimuth, wrap_elevation;
};

// Per-thread scratch: running coverage, residual and the chosen/evaluated marks.
struct Scratch {
  std::vector<double> cov, residual;
  std::vector<std::int64_t> chosen, evaluated;  // stamps: == current id means "set"
  std::int64_t trajectory_id = 0, step_id = 0;
  explicit Scratch(std::int64_t V)
      : cov(V), residual(V), chosen(V, -1), evaluated(V, -1) {}
};

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PYSKICK_TARGET_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define PYSKICK_TARGET_CLONES
#endif

PYSKICK_TARGET_CLONES
double coverage_gain(const float* row, const double* residual, std::int64_t V) {
  double acc[kLanes] = {0.0, 0.0, 0.0, 0.0};
  std::int64_t t = 0;
  for (; t + kLanes <= V; t += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += std::min(static_cast<double>(row[t + l]), residual[t + l]);
  }
  for (int l = 0; t < V; ++t, ++l) acc[l] += std::min(static_cast<double>(row[t]), residual[t]);
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

void add_view(const float* row, Scratch& s, std::int64_t V) {
  for (std::int64_t t = 0; t < V; ++t) {
    s.cov[t] += static_cast<double>(row[t]);
    s.residual[t] = std::max(1.0 - s.cov[t], 0.0);
  }
}

void run_trajectory(const Problem& p, std::int64_t bs, const std::int64_t* starts,
                    std::int64_t* actions, std::int64_t* views, Scratch& s) {
  const std::int64_t V = p.N * p.M;
  const std::int64_t A = p.dN * p.dM;
  const float* U = p.coverage + (bs / p.S) * V * V;
  std::int64_t* act = actions + bs * p.steps;
  std::int64_t* vis = views + bs * (p.steps + 1);
  const std::int64_t id = s.trajectory_id++;
  std::int64_t cur = starts[bs];
  std::fill(s.cov.begin(), s.cov.end(), 0.0);
  add_view(U + cur * V, s, V);
  s.chosen[cur] = id;
  vis[0] = cur;
  for (std::int64_t k = 0; k < p.steps; ++k) {
    const std::int64_t step = s.step_id++;
    const std::int64_t e = cur / p.M;
    const std::int64_t a = cur % p.M;
    double best_gain = -std::numeric_limits<double>::infinity();
    std::int64_t best_action = 0;
    std::int64_t best_view = cur;
    for (std::int64_t ai = 0; ai < A; ++ai) {
      const std::int64_t ne_raw = e + ai / p.dM - p.dN / 2;
      const std::int64_t na_raw = a + ai % p.dM - p.dM / 2;
      const std::int64_t ne = p.wrap_elevation ? wrap_index(ne_raw, p.N) : clip_index(ne_raw, p.N);
      const std::int64_t na = p.wrap_azimuth ? wrap_index(na_raw, p.M) : clip_index(na_raw, p.M);
      const std::int64_t v = ne * p.M + na;
      // A view reached by an earlier action of this step has the same gain and loses the tie.
      if (s.evaluated[v] == step) continue;
      s.evaluated[v] = step;
      const double gain = s.chosen[v] == id ? 0.0 : coverage_gain(U + v * V, s.residual.data(), V);
      if (gain > best_gain) {  // strict: ties keep the lowest action index
        best_gain = gain;
        best_action = ai;
        best_view = v;
      }
    }
    if (s.chosen[best_view] != id) {
      add_view(U + best_view * V, s, V);
      s.chosen[best_view] = id;
    }
    act[k] = best_action;
    vis[k + 1] = best_view;
    cur = best_view;
  }
}

}  // namespace

bool greedy_coverage_cpu(const float* coverage, const std::int64_t* starts, std::int64_t* actions,
                         std::int64_t* views, std::int64_t B, std::int64_t S, std::int64_t steps,
                         std::int64_t N, std::int64_t M, std::int64_t dN, std::int64_t dM,
                         bool wrap_azimuth, bool wrap_elevation) {
  const std::int64_t V = N * M;
  const std::int64_t total = B * V * V;
  std::int64_t out_of_range = 0;
#pragma omp parallel for schedule(static) reduction(+ : out_of_range) if (total > (1 << 16))
  for (std::int64_t i = 0; i < total; ++i) {
    out_of_range += !(coverage[i] >= 0.f && coverage[i] <= 1.f);  // NaN counts too
  }
  if (out_of_range) return false;
  const Problem problem{coverage, B, S, steps, N, M, dN, dM, wrap_azimuth, wrap_elevation};
#pragma omp parallel
  {
    Scratch scratch(V);
#pragma omp for schedule(dynamic, 64)
    for (std::int64_t bs = 0; bs < B * S; ++bs) {
      run_trajectory(problem, bs, starts, actions, views, scratch);
    }
  }
  return true;
}

}  // namespace pyskick
