// CPU kernel of greedy_coverage: one trajectory per (b, start), parallel over them.
//
// With utilities in [0, 1], the gain of adding view v is sum_t min(U[v, t], r_t), where
// r_t = max(1 - cov_t, 0) is what is left to cover of target t: the same quantity as
// Cov(S + v) - Cov(S), with half the arithmetic. Gains are float64 sums over 8 interleaved
// lanes (t mod 8), exactly as the CUDA kernel computes them; the loops are compiled for AVX2
// where the CPU has it. Moves come from a table built once per call.
#include <algorithm>
#include <limits>
#include <vector>

#include "common/checks.h"
#include "ops/greedy_coverage.h"

namespace pyskick {

namespace {

struct Problem {
  const float* coverage;
  std::int64_t S, steps, V, A;
  const std::int64_t* destination;  // [V, A]: the view that action a leads to from view v
};

// The move table, built once per call so that the inner loops do no integer division.
std::vector<std::int64_t> destinations(std::int64_t N, std::int64_t M, std::int64_t dN,
                                       std::int64_t dM, bool wrap_azimuth, bool wrap_elevation) {
  const std::int64_t V = N * M;
  const std::int64_t A = dN * dM;
  std::vector<std::int64_t> table(static_cast<std::size_t>(V * A));
  for (std::int64_t v = 0; v < V; ++v) {
    for (std::int64_t a = 0; a < A; ++a) {
      const std::int64_t ne_raw = v / M + a / dM - dN / 2;
      const std::int64_t na_raw = v % M + a % dM - dM / 2;
      const std::int64_t ne = wrap_elevation ? wrap_index(ne_raw, N) : clip_index(ne_raw, N);
      const std::int64_t na = wrap_azimuth ? wrap_index(na_raw, M) : clip_index(na_raw, M);
      table[v * A + a] = ne * M + na;
    }
  }
  return table;
}

// Per-thread scratch: running coverage, residuals and stamps ("== current id" means set).
struct Scratch {
  std::vector<double> cov, residual;
  std::vector<std::int64_t> chosen, evaluated;
  std::int64_t trajectory_id = 0, step_id = 0;
  explicit Scratch(std::int64_t V) : cov(V), residual(V), chosen(V, -1), evaluated(V, -1) {}
};

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PYSKICK_TARGET_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define PYSKICK_TARGET_CLONES
#endif
// Everything below runs inside the cloned function, so it must be inlined there.
#define PYSKICK_INLINE inline __attribute__((always_inline))

// sum_t min(U[v, t], r_t) in float64 over 8 lanes (t mod 8), combined pairwise.
PYSKICK_INLINE double coverage_gain(const float* __restrict row, const double* __restrict residual,
                                    std::int64_t V) {
  double acc[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
  std::int64_t t = 0;
  for (; t + 8 <= V; t += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += std::min(static_cast<double>(row[t + l]), residual[t + l]);
  }
  for (int l = 0; t < V; ++t, ++l) acc[l] += std::min(static_cast<double>(row[t]), residual[t]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

PYSKICK_INLINE void add_view(const float* __restrict row, Scratch& s, std::int64_t V) {
  double* __restrict cov = s.cov.data();
  double* __restrict residual = s.residual.data();
  for (std::int64_t t = 0; t < V; ++t) {
    cov[t] += static_cast<double>(row[t]);
    residual[t] = std::max(1.0 - cov[t], 0.0);
  }
}

PYSKICK_INLINE void run_trajectory(const Problem& p, std::int64_t bs, const std::int64_t* starts,
                           std::int64_t* actions, std::int64_t* views, Scratch& s) {
  const std::int64_t V = p.V;
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
    const std::int64_t* reachable = p.destination + cur * p.A;
    double best_gain = -std::numeric_limits<double>::infinity();
    std::int64_t best_action = 0;
    for (std::int64_t ai = 0; ai < p.A; ++ai) {
      const std::int64_t v = reachable[ai];
      // A view reached by an earlier action of this step has the same gain and loses the tie.
      if (s.evaluated[v] == step) continue;
      s.evaluated[v] = step;
      const double gain = s.chosen[v] == id ? 0.0 : coverage_gain(U + v * V, s.residual.data(), V);
      if (gain > best_gain) {  // strict: ties keep the lowest action index
        best_gain = gain;
        best_action = ai;
      }
    }
    const std::int64_t best_view = reachable[best_action];
    if (s.chosen[best_view] != id && k + 1 < p.steps) {  // the last view changes no decision
      add_view(U + best_view * V, s, V);
      s.chosen[best_view] = id;
    }
    act[k] = best_action;
    vis[k + 1] = best_view;
    cur = best_view;
  }
}

// One chunk of trajectories, compiled for AVX2 and for the baseline ISA (picked at load time);
// dispatching per chunk keeps the gain loops inlined.
PYSKICK_TARGET_CLONES
void run_trajectories(const Problem& p, std::int64_t begin, std::int64_t end,
                      const std::int64_t* starts, std::int64_t* actions, std::int64_t* views,
                      Scratch& s) {
  for (std::int64_t bs = begin; bs < end; ++bs) run_trajectory(p, bs, starts, actions, views, s);
}

constexpr std::int64_t kChunk = 64;

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
  const std::vector<std::int64_t> table =
      destinations(N, M, dN, dM, wrap_azimuth, wrap_elevation);
  const Problem problem{coverage, S, steps, V, dN * dM, table.data()};
  const std::int64_t trajectories = B * S;
#pragma omp parallel if (trajectories > kChunk)
  {
    Scratch scratch(V);
    const std::int64_t chunks = (trajectories + kChunk - 1) / kChunk;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t c = 0; c < chunks; ++c) {
      run_trajectories(problem, c * kChunk, std::min((c + 1) * kChunk, trajectories), starts,
                       actions, views, scratch);
    }
  }
  return true;
}

}  // namespace pyskick
