// CPU kernel of rotate_viewgrid: one memcpy per view, parallel over (b, n, m).
#include <cstring>

#include "common/checks.h"
#include "ops/rotate_viewgrid.h"

namespace pyskick {

void rotate_viewgrid_cpu(const std::uint8_t* grid, std::uint8_t* out, std::int64_t B,
                         std::int64_t N, std::int64_t M, std::int64_t view_bytes,
                         const std::int64_t* azimuth_shift, const std::int64_t* elevation_shift,
                         bool inverse) {
  const std::int64_t views = B * N * M;
#pragma omp parallel for schedule(static) if (views * view_bytes > (1 << 20))
  for (std::int64_t idx = 0; idx < views; ++idx) {
    const std::int64_t b = idx / (N * M);
    const std::int64_t n = (idx / M) % N;
    const std::int64_t m = idx % M;
    // Reduce the shift first so that negating it can never overflow.
    std::int64_t a = wrap_index(azimuth_shift[b], M);
    std::int64_t e = elevation_shift ? wrap_index(elevation_shift[b], N) : 0;
    if (inverse) {
      a = (M - a) % M;
      e = (N - e) % N;
    }
    const std::int64_t src = (b * N + (n + e) % N) * M + (m + a) % M;
    std::memcpy(out + idx * view_bytes, grid + src * view_bytes,
                static_cast<std::size_t>(view_bytes));
  }
}

}  // namespace pyskick
