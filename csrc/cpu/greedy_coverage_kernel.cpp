// CPU kernel of greedy_coverage: one trajectory per (b, start), parallel over them.
//
// With utilities in [0, 1], the gain of adding view v is sum_t min(U[v, t], r_t), where
// r_t = max(1 - cov_t, 0) is what is left to cover of target t: the same quantity as
// Cov(S + v) - Cov(S), with half the arithmetic. The decision uses float64 gains summed over 4
// interleaved lanes (t mod 4), exactly as the CUDA kernel does. To go fast, every candidate is
// first screened with float32 (8 lanes, AVX2 where available) and only those within the float32
// error bound of the best are recomputed in float64: the chosen action is the one a float64-only
// search picks, bit for bit.
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
  float screen_margin;              // >= 2 * |float32 gain - float64 gain|
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
  std::vector<float> residual_f;
  std::vector<std::int64_t> chosen, evaluated;
  std::vector<float> screened;  // float32 gain per action of the current step
  std::int64_t trajectory_id = 0, step_id = 0;
  Scratch(std::int64_t V, std::int64_t A)
      : cov(V), residual(V), residual_f(V), chosen(V, -1), evaluated(V, -1), screened(A) {}
};

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PYSKICK_TARGET_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define PYSKICK_TARGET_CLONES
#endif

// The float64 gain that decides: 4 lanes (t mod 4), combined as (l0 + l1) + (l2 + l3).
inline double exact_gain(const float* row, const double* residual, std::int64_t V) {
  double acc[4] = {0.0, 0.0, 0.0, 0.0};
  std::int64_t t = 0;
  for (; t + 4 <= V; t += 4) {
    for (int l = 0; l < 4; ++l) acc[l] += std::min(static_cast<double>(row[t + l]), residual[t + l]);
  }
  for (int l = 0; t < V; ++t, ++l) acc[l] += std::min(static_cast<double>(row[t]), residual[t]);
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

// A float32 estimate of exact_gain, within Problem::screen_margin / 2 of it.
inline float screen_gain(const float* row, const float* residual, std::int64_t V) {
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  std::int64_t t = 0;
  for (; t + 8 <= V; t += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += std::min(row[t + l], residual[t + l]);
  }
  for (int l = 0; t < V; ++t, ++l) acc[l] += std::min(row[t], residual[t]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

inline void add_view(const float* row, Scratch& s, std::int64_t V) {
  for (std::int64_t t = 0; t < V; ++t) {
    s.cov[t] += static_cast<double>(row[t]);
    s.residual[t] = std::max(1.0 - s.cov[t], 0.0);
    s.residual_f[t] = static_cast<float>(s.residual[t]);
  }
}

inline void run_trajectory(const Problem& p, std::int64_t bs, const std::int64_t* starts,
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
    // Screen: float32 gains; a view already chosen gains exactly 0; a view reached by an
    // earlier action of this step has the same gain and loses the tie (marked -1).
    float best_screened = -1.f;
    for (std::int64_t ai = 0; ai < p.A; ++ai) {
      const std::int64_t v = reachable[ai];
      float g = -1.f;
      if (s.evaluated[v] != step) {
        s.evaluated[v] = step;
        g = s.chosen[v] == id ? 0.f : screen_gain(U + v * V, s.residual_f.data(), V);
      }
      s.screened[ai] = g;
      best_screened = std::max(best_screened, g);
    }
    // Decide: float64 gains of the candidates that can still be the best.
    const float threshold = best_screened - p.screen_margin;
    double best_gain = -std::numeric_limits<double>::infinity();
    std::int64_t best_action = 0;
    for (std::int64_t ai = 0; ai < p.A; ++ai) {
      const float g = s.screened[ai];
      if (g < 0.f || g < threshold) continue;
      const std::int64_t v = reachable[ai];
      const double gain = s.chosen[v] == id ? 0.0 : exact_gain(U + v * V, s.residual.data(), V);
      if (gain > best_gain) {  // strict: ties keep the lowest action index
        best_gain = gain;
        best_action = ai;
      }
    }
    const std::int64_t best_view = reachable[best_action];
    if (s.chosen[best_view] != id) {
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
  // Each of the V float32 terms is within 2^-24 of its float64 value (min is 1-Lipschitz; the
  // residual is rounded once) and every partial sum is <= V, so 8-lane float32 summation stays
  // within (V + 1) * V * 2^-24 of the float64 gain; the margin doubles that, twice.
  const float margin = static_cast<float>(4.0 * static_cast<double>((V + 1) * V) * 0x1p-24);
  const Problem problem{coverage, S, steps, V, dN * dM, table.data(), margin};
  const std::int64_t trajectories = B * S;
#pragma omp parallel if (trajectories > kChunk)
  {
    Scratch scratch(V, dN * dM);
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
