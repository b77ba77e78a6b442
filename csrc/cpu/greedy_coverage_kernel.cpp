// CPU kernel of greedy_coverage: one trajectory per (b, start), parallel over them.
//
// With utilities in [0, 1], the gain of adding view v is sum_t min(U[v, t], r_t), where
// r_t = max(1 - cov_t, 0) is what is left to cover of target t: the same quantity as
// Cov(S + v) - Cov(S), with half the arithmetic. The decision uses float64 gains summed over 8
// interleaved lanes (t mod 8), exactly as the CUDA kernel does. To go fast, every candidate is
// first estimated in float32 (8 candidates at a time, AVX2 where the CPU has it) and float64
// gains are only computed when the estimates cannot tell the best apart; the chosen action is
// the one a float64-only search picks, bit for bit. Several trajectories of one sample advance
// in lockstep so that their dependency chains overlap.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/checks.h"
#include "ops/greedy_coverage.h"

namespace pyskick {

namespace {

struct Problem {
  const float* coverage;
  std::int64_t S, steps, V, A;
  const std::int64_t *moves, *move_action, *move_view;  // see Moves
  std::int64_t blocks;              // ceil(V / kBlock)
  float margin;                     // >= 4 * |float32 estimate - float64 gain|
};

// The moves from every view, built once per call: for each view, the distinct views its actions
// lead to, each with the lowest action reaching it (a view reached by an earlier action has the
// same gain and loses the tie), in action order.
struct Moves {
  std::vector<std::int64_t> count, action, view;  // [V], [V, A], [V, A]
};

Moves build_moves(std::int64_t N, std::int64_t M, std::int64_t dN, std::int64_t dM,
                  bool wrap_azimuth, bool wrap_elevation) {
  const std::int64_t V = N * M;
  const std::int64_t A = dN * dM;
  Moves moves{std::vector<std::int64_t>(V, 0), std::vector<std::int64_t>(V * A),
              std::vector<std::int64_t>(V * A)};
  for (std::int64_t v = 0; v < V; ++v) {
    std::int64_t* action = &moves.action[v * A];
    std::int64_t* view = &moves.view[v * A];
    std::int64_t& n = moves.count[v];
    for (std::int64_t a = 0; a < A; ++a) {
      const std::int64_t ne_raw = v / M + a / dM - dN / 2;
      const std::int64_t na_raw = v % M + a % dM - dM / 2;
      const std::int64_t ne = wrap_elevation ? wrap_index(ne_raw, N) : clip_index(ne_raw, N);
      const std::int64_t na = wrap_azimuth ? wrap_index(na_raw, M) : clip_index(na_raw, M);
      const std::int64_t to = ne * M + na;
      if (std::find(view, view + n, to) != view + n) continue;
      action[n] = a;
      view[n++] = to;
    }
  }
  return moves;
}

// float32 x 8: GCC vector extensions compile to AVX2 in the AVX2 clone and to SSE pairs in the
// baseline one, so both clones share one source.
typedef float f8 __attribute__((vector_size(32)));
constexpr std::int64_t kBlock = 8;  // floats per f8
constexpr std::int64_t kGroup = 8;  // candidates estimated together
constexpr std::int64_t kLanes = 4;  // trajectories advanced in lockstep

// One trajectory's state. Coverage and residuals are padded to Vp, a multiple of kBlock
// (coverage 1, residual 0; padded utilities are 0), so padded targets add exactly 0.
struct Lane {
  std::vector<double> cov, residual;
  std::vector<float> residual_f;      // the residual rounded to float32
  std::vector<std::int64_t> chosen;   // stamps: == id means the view is in the trajectory
  std::vector<float> estimate;        // float32 gain of each candidate of the current step
  std::int64_t id = -1, cur = 0, best = 0;
  Lane(std::int64_t V, std::int64_t Vp, std::int64_t A)
      : cov(Vp), residual(Vp, 0.0), residual_f(Vp, 0.f), chosen(V, -1),
        estimate((A + kGroup - 1) / kGroup * kGroup, 0.f) {}
};

// Per-thread scratch.
struct Scratch {
  std::vector<float> zero;    // a row of Vp zeros: what a view already chosen is estimated with
  std::vector<float> padded;  // [V, Vp] copy of one sample's utilities when V % kBlock != 0
  std::vector<Lane> lanes;
  std::int64_t trajectory_id = 0, padded_sample = -1;
  Scratch(std::int64_t V, std::int64_t Vp, std::int64_t A)
      : zero(Vp, 0.f), padded(V % kBlock ? V * Vp : 0, 0.f), lanes(kLanes, Lane(V, Vp, A)) {}
};

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PYSKICK_TARGET_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define PYSKICK_TARGET_CLONES
#endif
// Everything below runs inside the cloned function, so it must be inlined there.
#define PYSKICK_INLINE inline __attribute__((always_inline))

// The float64 gain that decides: sum_t min(U[v, t], r_t) over 8 lanes (t mod 8), combined
// pairwise, exactly as the CUDA kernel computes it.
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

PYSKICK_INLINE f8 load8(const float* p) {
  f8 x;
  std::memcpy(&x, p, sizeof x);
  return x;
}

// Pairwise sums within 128-bit halves, as AVX's haddps: [a0+a1, a2+a3, b0+b1, b2+b3, a4+a5, ...].
PYSKICK_INLINE f8 hadd(f8 a, f8 b) {
  typedef int i8 __attribute__((vector_size(32)));
  return __builtin_shuffle(a, b, i8{0, 2, 8, 10, 4, 6, 12, 14}) +
         __builtin_shuffle(a, b, i8{1, 3, 9, 11, 5, 7, 13, 15});
}

// float32 estimates of the gains of kGroup candidates (rows), the 8 totals by one transposed
// reduction. Within Problem::margin / 4 of the float64 gains whatever the summation order.
PYSKICK_INLINE f8 estimate_group(const float* const* rows, const float* __restrict residual,
                                 std::int64_t blocks) {
  f8 acc[kGroup] = {};
  for (std::int64_t k = 0; k < blocks; ++k) {
    const f8 r = load8(residual + k * kBlock);
    for (int j = 0; j < kGroup; ++j) {
      const f8 u = load8(rows[j] + k * kBlock);
      acc[j] += u < r ? u : r;
    }
  }
  typedef int i8 __attribute__((vector_size(32)));
  const f8 q0 = hadd(hadd(acc[0], acc[1]), hadd(acc[2], acc[3]));
  const f8 q1 = hadd(hadd(acc[4], acc[5]), hadd(acc[6], acc[7]));
  return __builtin_shuffle(q0, q1, i8{0, 1, 2, 3, 8, 9, 10, 11}) +
         __builtin_shuffle(q0, q1, i8{4, 5, 6, 7, 12, 13, 14, 15});
}

// Adds a (padded) row of utilities to the running coverage, 4 targets at a time.
PYSKICK_INLINE void add_view(const float* __restrict row, Lane& lane, std::int64_t blocks) {
  typedef float f4 __attribute__((vector_size(16)));
  typedef double d4 __attribute__((vector_size(32)));
  double* __restrict cov = lane.cov.data();
  double* __restrict residual = lane.residual.data();
  float* __restrict residual_f = lane.residual_f.data();
  for (std::int64_t t = 0; t < blocks * kBlock; t += 4) {
    f4 u;
    d4 c;
    std::memcpy(&u, row + t, sizeof u);
    std::memcpy(&c, cov + t, sizeof c);
    c += __builtin_convertvector(u, d4);
    d4 r = 1.0 - c;
    r = r < 0.0 ? 0.0 : r;  // std::max(1 - cov, 0.0)
    const f4 nearest = __builtin_convertvector(r, f4);
    std::memcpy(cov + t, &c, sizeof c);
    std::memcpy(residual + t, &r, sizeof r);
    std::memcpy(residual_f + t, &nearest, sizeof nearest);
  }
}

// Whether U[v, t] >= r_t for every target. Such a view's float64 gain is the float64 sum of the
// residuals, which (rounding being monotone) no other view's float64 gain exceeds. For a float u
// and r_f = r rounded to nearest, u > r_f implies u >= r and u < r_f implies u < r; only u == r_f
// (r_f > 0: r >= 2^-53 when not 0) needs the float64 comparison.
PYSKICK_INLINE bool saturates(const float* __restrict row, const Lane& lane, std::int64_t V,
                              std::int64_t blocks) {
  typedef int i8 __attribute__((vector_size(32)));
  typedef long long l4 __attribute__((vector_size(32)));
  const float* __restrict residual_f = lane.residual_f.data();
  i8 below = {}, unsure = {};
  for (std::int64_t k = 0; k < blocks; ++k) {
    const f8 u = load8(row + k * kBlock);
    const f8 r = load8(residual_f + k * kBlock);
    below |= u < r;
    unsure |= (u == r) & (r != 0.f);
  }
  const l4 b = reinterpret_cast<l4>(below), e = reinterpret_cast<l4>(unsure);
  if (b[0] | b[1] | b[2] | b[3]) return false;
  if (!(e[0] | e[1] | e[2] | e[3])) return true;
  for (std::int64_t t = 0; t < V; ++t) {
    if (static_cast<double>(row[t]) < lane.residual[t]) return false;
  }
  return true;
}

// The float64-best candidate (its index in `view`): only candidates whose estimate is within the
// margin of the best estimate can be it. A lone survivor needs no float64 gain at all; nor does a
// first survivor that saturates; otherwise the survivors' float64 gains decide, strict > keeping
// the lowest action index.
PYSKICK_INLINE std::int64_t best_candidate(const Problem& p, const float* U, const float* rows,
                                           std::int64_t row_stride, const float* zero,
                                           const std::int64_t* view, std::int64_t n,
                                           Lane& lane) {
  float* estimate = lane.estimate.data();
  const std::int64_t* chosen = lane.chosen.data();
  const std::int64_t id = lane.id;
  f8 top8 = {};
  for (std::int64_t g = 0; g < n; g += kGroup) {
    const float* group[kGroup];
    for (int j = 0; j < kGroup; ++j) {
      const bool open = g + j < n && chosen[view[g + j]] != id;
      group[j] = open ? rows + view[g + j] * row_stride : zero;
    }
    const f8 sums = estimate_group(group, lane.residual_f.data(), p.blocks);
    std::memcpy(estimate + g, &sums, sizeof sums);
    top8 = top8 < sums ? sums : top8;
  }
  float top = 0.f;
  for (int j = 0; j < kGroup; ++j) top = std::max(top, top8[j]);
  const float threshold = top - p.margin;
  std::int64_t survivors = 0, first = 0;
  for (std::int64_t c = n - 1; c >= 0; --c) {
    const bool survives = estimate[c] >= threshold;
    survivors += survives;
    first = survives ? c : first;
  }
  if (survivors == 1) return first;
  // Ties at the top are common once little is left to cover.
  if (chosen[view[first]] != id && saturates(rows + view[first] * row_stride, lane, p.V, p.blocks)) {
    return first;
  }
  double best_gain = -std::numeric_limits<double>::infinity();
  std::int64_t best = 0;
  for (std::int64_t c = first; c < n; ++c) {
    if (estimate[c] < threshold) continue;
    const double gain = chosen[view[c]] == id
                            ? 0.0
                            : coverage_gain(U + view[c] * p.V, lane.residual.data(), p.V);
    if (gain > best_gain) {
      best_gain = gain;
      best = c;
    }
  }
  return best;
}

// Trajectories [begin, end) of one sample, advanced in lockstep (end - begin <= kLanes).
PYSKICK_INLINE void run_batch(const Problem& p, std::int64_t begin, std::int64_t end,
                              const std::int64_t* starts, std::int64_t* actions,
                              std::int64_t* views, Scratch& s) {
  const std::int64_t V = p.V;
  const std::int64_t sample = begin / p.S;
  const float* U = p.coverage + sample * V * V;
  // Estimates read rows of whole blocks: U itself when V is a multiple of kBlock, else a
  // zero-padded copy of this sample's utilities.
  const float* rows = U;
  std::int64_t row_stride = V;
  if (V % kBlock) {
    row_stride = p.blocks * kBlock;
    if (s.padded_sample != sample) {
      for (std::int64_t v = 0; v < V; ++v) {
        std::memcpy(&s.padded[v * row_stride], U + v * V, V * sizeof(float));
      }
      s.padded_sample = sample;
    }
    rows = s.padded.data();
  }
  const std::int64_t count = end - begin;
  for (std::int64_t i = 0; i < count; ++i) {
    Lane& lane = s.lanes[i];
    lane.id = s.trajectory_id++;
    lane.cur = starts[begin + i];
    std::fill(lane.cov.begin(), lane.cov.begin() + V, 0.0);
    std::fill(lane.cov.begin() + V, lane.cov.end(), 1.0);
    add_view(rows + lane.cur * row_stride, lane, p.blocks);
    lane.chosen[lane.cur] = lane.id;
    views[(begin + i) * (p.steps + 1)] = lane.cur;
  }
  for (std::int64_t k = 0; k < p.steps; ++k) {
    for (std::int64_t i = 0; i < count; ++i) {
      Lane& lane = s.lanes[i];
      lane.best = best_candidate(p, U, rows, row_stride, s.zero.data(),
                                 p.move_view + lane.cur * p.A, p.moves[lane.cur], lane);
    }
    for (std::int64_t i = 0; i < count; ++i) {
      Lane& lane = s.lanes[i];
      const std::int64_t next = p.move_view[lane.cur * p.A + lane.best];
      if (lane.chosen[next] != lane.id && k + 1 < p.steps) {  // the last view changes nothing
        add_view(rows + next * row_stride, lane, p.blocks);
        lane.chosen[next] = lane.id;
      }
      actions[(begin + i) * p.steps + k] = p.move_action[lane.cur * p.A + lane.best];
      views[(begin + i) * (p.steps + 1) + k + 1] = next;
      lane.cur = next;
    }
  }
}

// One chunk of trajectories, compiled for AVX2 and for the baseline ISA (picked at load time);
// dispatching per chunk keeps everything above inlined.
PYSKICK_TARGET_CLONES
void run_trajectories(const Problem& p, std::int64_t begin, std::int64_t end,
                      const std::int64_t* starts, std::int64_t* actions, std::int64_t* views,
                      Scratch& s) {
  while (begin < end) {
    const std::int64_t batch_end = std::min({end, begin + kLanes, (begin / p.S + 1) * p.S});
    run_batch(p, begin, batch_end, starts, actions, views, s);
    begin = batch_end;
  }
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
  const Moves moves = build_moves(N, M, dN, dM, wrap_azimuth, wrap_elevation);
  // Each float32 term is within 2^-24 of its float64 value (min is 1-Lipschitz and the residual
  // is rounded once) and the Vp terms sum to at most Vp, so float32 summation in any order stays
  // within Vp * Vp * 2^-24 (1 + Vp * 2^-24) of the float64 gain, itself within Vp^2 * 2^-53 of
  // exact. A candidate is out only when its estimate is below the best estimate by more than
  // twice that: the margin is twice that again, which also covers rounding `top - margin`.
  const std::int64_t blocks = (V + kBlock - 1) / kBlock;
  const double Vp = static_cast<double>(blocks * kBlock);
  const float margin = static_cast<float>(4.0 * Vp * (Vp + 1.0) * 0x1p-24);
  const Problem problem{coverage,           S,           steps,  V,     dN * dM,
                        moves.count.data(), moves.action.data(), moves.view.data(), blocks, margin};
  const std::int64_t trajectories = B * S;
#pragma omp parallel if (trajectories > kChunk)
  {
    Scratch scratch(V, blocks * kBlock, dN * dM);
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
