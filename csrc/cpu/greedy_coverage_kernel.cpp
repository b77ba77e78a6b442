// CPU kernel of greedy_coverage: one trajectory per (b, start), parallel over them.
//
// With utilities in [0, 1], the gain of adding view v is sum_t min(U[v, t], r_t), where
// r_t = max(1 - cov_t, 0) is what is left to cover of target t: the same quantity as
// Cov(S + v) - Cov(S), with half the arithmetic. The decision uses float64 gains summed over 8
// interleaved lanes (t mod 8), exactly as the CUDA kernel does. To go fast, every candidate is
// first estimated in float32 (8 candidates at a time, AVX2 where the CPU has it) and float64
// gains are only computed when the estimates cannot tell the best apart, which a proven error
// bound decides: the chosen action is the one a float64-only search picks, bit for bit.
// Several trajectories of one sample advance in lockstep so that their dependency chains overlap.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/checks.h"
#include "ops/greedy_coverage.h"

// The 32-byte vectors below never cross a call boundary (everything using them is inlined), so
// GCC's warning that returning them differs without AVX does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace pyskick {

namespace {

// float32 x 8: GCC vector extensions compile to AVX2 in the AVX2 clone and to SSE pairs in the
// baseline one, so both clones share one source.
typedef float f8 __attribute__((vector_size(32)));
typedef std::int32_t i8 __attribute__((vector_size(32)));
constexpr std::int64_t kBlock = 8;  // targets per f8
constexpr std::int64_t kGroup = 8;  // candidates estimated together (one f8 of estimates)
constexpr std::int64_t kLanes = 4;  // trajectories advanced in lockstep

// The moves from every view, built once per call: for each view, the distinct views its actions
// lead to, each with the lowest action reaching it (a view reached by an earlier action has the
// same gain and loses the tie), in action order, padded with dummies to G = A rounded up to
// kGroup candidates, i.e. G / kGroup groups.
struct Moves {
  std::int64_t G;
  std::vector<std::int64_t> count, action, view;  // [V], [V, A], [V, A]
  std::vector<std::int64_t> position;             // [V, V]: index of a view in `view`, or -1
  std::vector<std::int64_t> offset;               // [V, G]: the candidate's row (dummies: 0)
  std::vector<std::uint8_t> real;                 // [V, G / kGroup]: bit j: not a dummy
};

Moves build_moves(std::int64_t N, std::int64_t M, std::int64_t dN, std::int64_t dM,
                  bool wrap_azimuth, bool wrap_elevation, std::int64_t row_stride) {
  const std::int64_t V = N * M;
  const std::int64_t A = dN * dM;
  const std::int64_t G = (A + kGroup - 1) / kGroup * kGroup;
  Moves moves{G,
              std::vector<std::int64_t>(V, 0),
              std::vector<std::int64_t>(V * A),
              std::vector<std::int64_t>(V * A),
              std::vector<std::int64_t>(V * V, -1),
              std::vector<std::int64_t>(V * G, 0),
              std::vector<std::uint8_t>(V * G / kGroup, 0)};
  for (std::int64_t v = 0; v < V; ++v) {
    std::int64_t& n = moves.count[v];
    for (std::int64_t a = 0; a < A; ++a) {
      const std::int64_t ne_raw = v / M + a / dM - dN / 2;
      const std::int64_t na_raw = v % M + a % dM - dM / 2;
      const std::int64_t ne = wrap_elevation ? wrap_index(ne_raw, N) : clip_index(ne_raw, N);
      const std::int64_t na = wrap_azimuth ? wrap_index(na_raw, M) : clip_index(na_raw, M);
      const std::int64_t to = ne * M + na;
      if (moves.position[v * V + to] >= 0) continue;
      moves.position[v * V + to] = n;
      moves.action[v * A + n] = a;
      moves.view[v * A + n] = to;
      moves.offset[v * G + n] = to * row_stride;
      moves.real[v * G / kGroup + n / kGroup] |= static_cast<std::uint8_t>(1u << (n % kGroup));
      ++n;
    }
  }
  return moves;
}

struct Problem {
  const float* coverage;
  std::int64_t S, steps, V, A, G;
  const std::int64_t *count, *action, *view, *position, *offset;  // see Moves
  const std::uint8_t* real;
  std::int64_t blocks;      // Vp / kBlock, Vp = V rounded up to kBlock
  std::int64_t row_stride;  // V, or Vp when rows are read from a zero-padded copy
  float margin;             // >= 4 * |float32 estimate - float64 gain| (see greedy_coverage_cpu)
};

// One trajectory's state. Coverage and residual are padded to Vp (coverage 1, residual 0;
// padded utilities are 0), so padded targets add exactly 0.
struct Lane {
  std::vector<double> cov;
  std::vector<float> residual_f;     // the residual rounded to float32
  std::vector<std::int64_t> chosen;  // stamps: == id means the view is in the trajectory
  std::vector<float> estimate;       // [G]: float32 gains of the current candidates
  std::vector<std::uint8_t> open;    // [G / kGroup]: bit j: a real candidate not yet chosen
  std::int64_t id = -1, cur = 0, best = 0;
  Lane(std::int64_t V, std::int64_t Vp, std::int64_t G)
      : cov(Vp), residual_f(Vp, 0.f), chosen(V, -1), estimate(G), open(G / kGroup) {}
};

// Per-thread scratch.
struct Scratch {
  std::vector<float> padded;  // [V, Vp] copy of one sample's utilities when V % kBlock != 0
  std::vector<Lane> lanes;
  std::int64_t trajectory_id = 0, padded_sample = -1;
  Scratch(std::int64_t V, std::int64_t Vp, std::int64_t G)
      : padded(V % kBlock ? V * Vp : 0, 0.f), lanes(kLanes, Lane(V, Vp, G)) {}
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
// r_t = max(1 - cov_t, 0) is recomputed here: this path is rare, add_view is not.
PYSKICK_INLINE double residual_at(const double* cov, std::int64_t t) {
  return std::max(1.0 - cov[t], 0.0);
}

PYSKICK_INLINE double coverage_gain(const float* __restrict row, const double* __restrict cov,
                                    std::int64_t V) {
  double acc[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
  std::int64_t t = 0;
  for (; t + 8 <= V; t += 8) {
    for (int l = 0; l < 8; ++l) {
      acc[l] += std::min(static_cast<double>(row[t + l]), residual_at(cov, t + l));
    }
  }
  for (int l = 0; t < V; ++t, ++l) {
    acc[l] += std::min(static_cast<double>(row[t]), residual_at(cov, t));
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

PYSKICK_INLINE f8 load8(const float* p) {
  f8 x;
  std::memcpy(&x, p, sizeof x);
  return x;
}

typedef std::uint32_t u8 __attribute__((vector_size(32)));
constexpr u8 kLaneBit = {1, 2, 4, 8, 16, 32, 64, 128};

// The lanes of a bit set, as a mask (-1 / 0 per lane), and back.
PYSKICK_INLINE f8 max8(const f8& a, const f8& b) { return a < b ? b : a; }

PYSKICK_INLINE i8 lane_mask(std::uint32_t bits) {
  return ((u8{} + bits) & kLaneBit) != 0;
}

PYSKICK_INLINE std::uint32_t reduce_or(const u8& bits) {
  u8 x = bits;
  x |= __builtin_shuffle(x, u8{4, 5, 6, 7, 0, 1, 2, 3});
  x |= __builtin_shuffle(x, u8{2, 3, 0, 1, 6, 7, 4, 5});
  x |= __builtin_shuffle(x, u8{1, 0, 3, 2, 5, 4, 7, 6});
  return x[0];
}

PYSKICK_INLINE std::uint32_t lane_bits(const i8& mask) {
  return reduce_or(reinterpret_cast<u8>(mask) & kLaneBit);
}

// Pairwise sums within 128-bit halves, as AVX's haddps: [a0+a1, a2+a3, b0+b1, b2+b3, a4+a5, ...].
PYSKICK_INLINE f8 hadd(const f8& a, const f8& b) {
  return __builtin_shuffle(a, b, i8{0, 2, 8, 10, 4, 6, 12, 14}) +
         __builtin_shuffle(a, b, i8{1, 3, 9, 11, 5, 7, 13, 15});
}

// float32 estimates of the gains of kGroup candidates (rows + offset[j]), the 8 totals by one
// transposed reduction; within margin / 4 of the float64 gains whatever the summation order.
PYSKICK_INLINE f8 estimate_group(const float* rows, const std::int64_t* offset,
                                 const float* __restrict residual, std::int64_t blocks) {
  f8 acc[kGroup] = {};
  for (std::int64_t k = 0; k < blocks; ++k) {
    const f8 r = load8(residual + k * kBlock);
    for (int j = 0; j < kGroup; ++j) {
      const f8 u = load8(rows + offset[j] + k * kBlock);
      acc[j] += u < r ? u : r;
    }
  }
  const f8 q0 = hadd(hadd(acc[0], acc[1]), hadd(acc[2], acc[3]));
  const f8 q1 = hadd(hadd(acc[4], acc[5]), hadd(acc[6], acc[7]));
  return __builtin_shuffle(q0, q1, i8{0, 1, 2, 3, 8, 9, 10, 11}) +
         __builtin_shuffle(q0, q1, i8{4, 5, 6, 7, 12, 13, 14, 15});
}

// The same for a group whose last kGroup / 2 candidates are dummies (estimates 0): half the work.
PYSKICK_INLINE f8 estimate_half_group(const float* rows, const std::int64_t* offset,
                                      const float* __restrict residual, std::int64_t blocks) {
  f8 acc[kGroup / 2] = {};
  for (std::int64_t k = 0; k < blocks; ++k) {
    const f8 r = load8(residual + k * kBlock);
    for (int j = 0; j < kGroup / 2; ++j) {
      const f8 u = load8(rows + offset[j] + k * kBlock);
      acc[j] += u < r ? u : r;
    }
  }
  const f8 q = hadd(hadd(acc[0], acc[1]), hadd(acc[2], acc[3]));
  return __builtin_shuffle(q, f8{}, i8{0, 1, 2, 3, 8, 8, 8, 8}) +
         __builtin_shuffle(q, f8{}, i8{4, 5, 6, 7, 8, 8, 8, 8});
}

// Adds a (padded) row of utilities to the running coverage, 4 targets at a time; `first`: the
// coverage was empty (0 + u is u: no need to clear it first).
PYSKICK_INLINE void add_view(const float* __restrict row, Lane& lane, std::int64_t V,
                             std::int64_t blocks, bool first) {
  typedef float f4 __attribute__((vector_size(16)));
  typedef double d4 __attribute__((vector_size(32)));
  double* __restrict cov = lane.cov.data();
  float* __restrict residual_f = lane.residual_f.data();
  for (std::int64_t t = 0; t < blocks * kBlock; t += 4) {
    f4 u;
    std::memcpy(&u, row + t, sizeof u);
    d4 c = __builtin_convertvector(u, d4);
    if (!first) {
      d4 before;
      std::memcpy(&before, cov + t, sizeof before);
      c += before;
    }
    d4 r = 1.0 - c;
    r = r < 0.0 ? 0.0 : r;  // std::max(1 - cov, 0.0)
    const f4 nearest = __builtin_convertvector(r, f4);
    std::memcpy(cov + t, &c, sizeof c);
    std::memcpy(residual_f + t, &nearest, sizeof nearest);
  }
  if (first) {  // padded targets: fully covered, nothing left
    for (std::int64_t t = V; t < blocks * kBlock; ++t) {
      cov[t] = 1.0;
      residual_f[t] = 0.f;
    }
  }
}

// Whether U[v, t] >= r_t for every target. Such a view's float64 gain is the float64 sum of the
// residuals, which (rounding being monotone) no other view's float64 gain exceeds. For a float u
// and r_f = r rounded to nearest, u > r_f implies u >= r and u < r_f implies u < r; only u == r_f
// (r_f > 0: r >= 2^-53 when not 0) needs the float64 comparison.
PYSKICK_INLINE bool saturates(const float* __restrict row, const Lane& lane, std::int64_t V,
                              std::int64_t blocks) {
  const float* __restrict residual_f = lane.residual_f.data();
  i8 below = {}, unsure = {};
  for (std::int64_t k = 0; k < blocks; ++k) {
    const f8 u = load8(row + k * kBlock);
    const f8 r = load8(residual_f + k * kBlock);
    below |= u < r;
    unsure |= (u == r) & (r != 0.f);
  }
  if (lane_bits(below)) return false;
  if (!lane_bits(unsure)) return true;
  for (std::int64_t t = 0; t < V; ++t) {
    if (static_cast<double>(row[t]) < residual_at(lane.cov.data(), t)) return false;
  }
  return true;
}

// The float64-best candidate of the lane's current view (its index in Problem::view): only
// candidates whose estimate is within the margin of the best estimate can be it. A lone survivor
// needs no float64 gain at all; nor does a first survivor that saturates; otherwise the
// survivors' float64 gains decide, strict > keeping the lowest action index. `visited`: the k
// views of the trajectory so far (they gain exactly 0).
PYSKICK_INLINE std::int64_t best_candidate(const Problem& p, const float* U, const float* rows,
                                           const std::int64_t* visited, std::int64_t k,
                                           Lane& lane) {
  const std::int64_t cur = lane.cur;
  const std::int64_t n = p.count[cur];
  const std::int64_t groups = (n + kGroup - 1) / kGroup;
  const std::uint8_t* real = p.real + cur * (p.G / kGroup);
  const std::int64_t* offset = p.offset + cur * p.G;
  const std::int64_t* position = p.position + cur * p.V;
  std::uint8_t* open = lane.open.data();
  float* estimate = lane.estimate.data();
  for (std::int64_t g = 0; g < groups; ++g) open[g] = real[g];
  for (std::int64_t i = 0; i < k; ++i) {
    const std::int64_t c = position[visited[i]];
    if (c >= 0) open[c / kGroup] &= static_cast<std::uint8_t>(~(1u << (c % kGroup)));
  }
  f8 top8 = {};
  for (std::int64_t g = 0; g < groups; ++g) {
    const f8 e =
        n - g * kGroup <= kGroup / 2
            ? estimate_half_group(rows, offset + g * kGroup, lane.residual_f.data(), p.blocks)
            : estimate_group(rows, offset + g * kGroup, lane.residual_f.data(), p.blocks);
    const f8 kept = lane_mask(open[g]) ? e : f8{};
    std::memcpy(estimate + g * kGroup, &kept, sizeof kept);
    top8 = max8(top8, kept);
  }
  top8 = max8(top8, __builtin_shuffle(top8, i8{4, 5, 6, 7, 0, 1, 2, 3}));
  top8 = max8(top8, __builtin_shuffle(top8, i8{2, 3, 0, 1, 6, 7, 4, 5}));
  top8 = max8(top8, __builtin_shuffle(top8, i8{1, 0, 3, 2, 5, 4, 7, 6}));
  const float threshold = top8[0] - p.margin;
  // Survivors (real candidates within the margin) as bit sets of up to 64 candidates: one
  // horizontal reduction per 4 groups, no data-dependent branch in the usual single word.
  std::int64_t first = -1;
  bool lone = false;
  for (std::int64_t w = 0; w * 8 < groups; ++w) {
    const std::int64_t g_end = std::min(groups, (w + 1) * 8);
    std::uint64_t word = 0;
    for (std::int64_t g0 = w * 8; g0 < g_end; g0 += 4) {
      u8 x = {};
      for (std::int64_t g = g0; g < std::min(g_end, g0 + 4); ++g) {
        const u8 in = reinterpret_cast<u8>(load8(estimate + g * kGroup) >= threshold);
        x |= in & ((kLaneBit & (u8{} + real[g])) << (8 * (g - g0)));
      }
      word |= static_cast<std::uint64_t>(reduce_or(x)) << (8 * (g0 - w * 8));
    }
    if (!word) continue;
    lone = first < 0 && (word & (word - 1)) == 0;
    if (first < 0) first = w * 64 + __builtin_ctzll(word);
  }
  if (lone) return first;
  // Ties at the top are common once little is left to cover.
  const auto is_open = [&](std::int64_t c) { return (open[c / kGroup] >> (c % kGroup)) & 1u; };
  if (is_open(first) && saturates(rows + offset[first], lane, p.V, p.blocks)) return first;
  const std::int64_t* view = p.view + cur * p.A;
  double best_gain = -std::numeric_limits<double>::infinity();
  std::int64_t best = 0;
  for (std::int64_t c = first; c < n; ++c) {
    if (!(estimate[c] >= threshold)) continue;
    const double gain = is_open(c) ? coverage_gain(U + view[c] * p.V, lane.cov.data(), p.V)
                                   : 0.0;
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
  if (V % kBlock) {
    if (s.padded_sample != sample) {
      for (std::int64_t v = 0; v < V; ++v) {
        std::memcpy(&s.padded[v * p.row_stride], U + v * V, V * sizeof(float));
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
    add_view(rows + lane.cur * p.row_stride, lane, V, p.blocks, true);
    lane.chosen[lane.cur] = lane.id;
    views[(begin + i) * (p.steps + 1)] = lane.cur;
  }
  for (std::int64_t k = 0; k < p.steps; ++k) {
    for (std::int64_t i = 0; i < count; ++i) {
      Lane& lane = s.lanes[i];
      lane.best = best_candidate(p, U, rows, views + (begin + i) * (p.steps + 1), k + 1, lane);
    }
    for (std::int64_t i = 0; i < count; ++i) {
      Lane& lane = s.lanes[i];
      const std::int64_t next = p.view[lane.cur * p.A + lane.best];
      if (lane.chosen[next] != lane.id && k + 1 < p.steps) {  // the last view changes nothing
        add_view(rows + next * p.row_stride, lane, V, p.blocks, false);
        lane.chosen[next] = lane.id;
      }
      actions[(begin + i) * p.steps + k] = p.action[lane.cur * p.A + lane.best];
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

// How many of x[0, n) are outside [0, 1] (NaN included); n < 2^31.
PYSKICK_TARGET_CLONES
std::int64_t count_out_of_range(const float* x, std::int64_t n) {
  i8 bad = {};
  std::int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    const f8 v = load8(x + i);
    bad += ((v >= 0.f) & (v <= 1.f)) + 1;  // -1 (in range) + 1 = 0
  }
  std::int64_t count = 0;
  for (int j = 0; j < kBlock; ++j) count += bad[j];
  for (; i < n; ++i) count += !(x[i] >= 0.f && x[i] <= 1.f);
  return count;
}

constexpr std::int64_t kChunk = 64;

}  // namespace

GreedyStatus greedy_coverage_cpu(const float* coverage, const std::int64_t* starts,
                                 std::int64_t* actions, std::int64_t* views, std::int64_t B,
                                 std::int64_t S, std::int64_t steps, std::int64_t N,
                                 std::int64_t M, std::int64_t dN, std::int64_t dM,
                                 bool wrap_azimuth, bool wrap_elevation) {
  const std::int64_t V = N * M;
  for (std::int64_t i = 0; i < B * S; ++i) {
    if (starts[i] < 0 || starts[i] >= V) return GreedyStatus::kStartOutOfRange;
  }
  const std::int64_t total = B * V * V;
  constexpr std::int64_t kCheckChunk = 1 << 16;
  const std::int64_t check_chunks = (total + kCheckChunk - 1) / kCheckChunk;
  std::int64_t out_of_range = 0;
#pragma omp parallel for schedule(static) reduction(+ : out_of_range) if (check_chunks > 1)
  for (std::int64_t c = 0; c < check_chunks; ++c) {
    const std::int64_t begin = c * kCheckChunk;
    out_of_range += count_out_of_range(coverage + begin, std::min(kCheckChunk, total - begin));
  }
  if (out_of_range) return GreedyStatus::kCoverageOutOfRange;
  // Each float32 term is within 2^-24 of its float64 value (min is 1-Lipschitz and the residual
  // is rounded once) and the Vp terms sum to at most Vp, so float32 summation in any order stays
  // within Vp * Vp * 2^-24 (1 + Vp * 2^-24) of the float64 gain, itself within Vp^2 * 2^-53 of
  // exact. A candidate is out only when its estimate is below the best estimate by more than
  // twice that: the margin is twice that again, which also covers rounding `top - margin`.
  const std::int64_t blocks = (V + kBlock - 1) / kBlock;
  const double Vp = static_cast<double>(blocks * kBlock);
  const float margin = static_cast<float>(4.0 * Vp * (Vp + 1.0) * 0x1p-24);
  const std::int64_t row_stride = V % kBlock ? blocks * kBlock : V;
  const Moves moves = build_moves(N, M, dN, dM, wrap_azimuth, wrap_elevation, row_stride);
  const Problem problem{coverage,
                        S,
                        steps,
                        V,
                        dN * dM,
                        moves.G,
                        moves.count.data(),
                        moves.action.data(),
                        moves.view.data(),
                        moves.position.data(),
                        moves.offset.data(),
                        moves.real.data(),
                        blocks,
                        row_stride,
                        margin};
  const std::int64_t trajectories = B * S;
#pragma omp parallel if (trajectories > kChunk)
  {
    Scratch scratch(V, blocks * kBlock, moves.G);
    const std::int64_t chunks = (trajectories + kChunk - 1) / kChunk;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t c = 0; c < chunks; ++c) {
      run_trajectories(problem, c * kChunk, std::min((c + 1) * kChunk, trajectories), starts,
                       actions, views, scratch);
    }
  }
  return GreedyStatus::kOk;
}

}  // namespace pyskick
