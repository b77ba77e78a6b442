// CPU kernel of nms_rewards: one sample per iteration, parallel over the batch.
//
// The cells still available are a bitset; the suppression window of every cell is precomputed
// once per call as a bitset too, so suppressing is a few word-wide AND-NOTs.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/checks.h"
#include "ops/nms_rewards.h"

namespace pyskick {

namespace {

using Word = std::uint64_t;
constexpr std::int64_t kBits = 64;

// windows[v * W + w]: bit i of word w set when cell w*64+i lies within `radius` of cell v
// (azimuth ring distance, elevation clipped).
std::vector<Word> suppression_windows(std::int64_t N, std::int64_t M, std::int64_t radius,
                                      std::int64_t W) {
  const std::int64_t V = N * M;
  std::vector<Word> windows(static_cast<std::size_t>(V * W), 0);
  const std::int64_t r_az = std::min(radius, M / 2);  // a wider window covers the whole ring
  for (std::int64_t v = 0; v < V; ++v) {
    const std::int64_t pn = v / M;
    const std::int64_t pm = v % M;
    for (std::int64_t n = std::max<std::int64_t>(pn - radius, 0);
         n <= std::min(pn + radius, N - 1); ++n) {
      for (std::int64_t da = -r_az; da <= r_az; ++da) {
        const std::int64_t cell = n * M + wrap_index(pm + da, M);
        windows[v * W + cell / kBits] |= Word{1} << (cell % kBits);
      }
    }
  }
  return windows;
}

}  // namespace

bool nms_rewards_cpu(const float* scores, float* out, std::int64_t B, std::int64_t N,
                     std::int64_t M, std::int64_t k, std::int64_t radius) {
  const std::int64_t V = N * M;
  const std::int64_t W = (V + kBits - 1) / kBits;
  radius = std::min(radius, std::max(N, M));  // reaches every cell already; no overflow below
  const std::vector<Word> windows = suppression_windows(N, M, radius, W);
  const std::int64_t peaks = std::min(k, V);  // each peak removes at least itself
  std::int64_t non_finite = 0;
#pragma omp parallel if (B * V * std::max<std::int64_t>(peaks, 1) > (1 << 16))
  {
    std::vector<Word> available(static_cast<std::size_t>(W));
#pragma omp for schedule(static) reduction(+ : non_finite)
    for (std::int64_t b = 0; b < B; ++b) {
      const float* s = scores + b * V;
      float* o = out + b * V;
      std::memset(o, 0, static_cast<std::size_t>(V) * sizeof(float));
      for (std::int64_t v = 0; v < V; ++v) non_finite += !std::isfinite(s[v]);
      std::fill(available.begin(), available.end(), ~Word{0});
      if (V % kBits) available[W - 1] = (Word{1} << (V % kBits)) - 1;
      for (std::int64_t iter = 0; iter < peaks; ++iter) {
        std::int64_t best = -1;
        for (std::int64_t w = 0; w < W; ++w) {
          for (Word bits = available[w]; bits; bits &= bits - 1) {
            const std::int64_t v = w * kBits + __builtin_ctzll(bits);
            if (best < 0 || s[v] > s[best]) best = v;  // ascending order: ties keep the lowest
          }
        }
        if (best < 0) break;
        o[best] = s[best];
        const Word* window = windows.data() + best * W;
        for (std::int64_t w = 0; w < W; ++w) available[w] &= ~window[w];
      }
    }
  }
  return non_finite == 0;
}

}  // namespace pyskick
