// CPU kernel of render_mesh_views: one camera per iteration, parallel over the N * M cameras.
// Every step mirrors pyskick.ops._reference.render_mesh_views in double precision.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/render_mesh_views.h"

namespace pyskick {

namespace {

constexpr double kPi = 3.14159265358979323846;

struct Camera {
  double c[3];  // position
  double r[3];  // image right
  double u[3];  // image up
  double f[3];  // forward (towards the origin)
};

Camera make_camera(double elevation_deg, double azimuth_deg, double distance) {
  const double e = elevation_deg * (kPi / 180.0);
  const double a = azimuth_deg * (kPi / 180.0);
  const double ce = std::cos(e), se = std::sin(e), ca = std::cos(a), sa = std::sin(a);
  Camera cam{};
  cam.c[0] = distance * (-(ce * sa));
  cam.c[1] = distance * se;
  cam.c[2] = distance * (ce * ca);
  cam.r[0] = ca;
  cam.r[1] = 0.0;
  cam.r[2] = sa;
  cam.u[0] = sa * se;
  cam.u[1] = ce;
  cam.u[2] = -(ca * se);
  cam.f[0] = ce * sa;
  cam.f[1] = -se;
  cam.f[2] = -(ce * ca);
  return cam;
}

// Unit per-vertex normals: sums of the adjacent faces' cross products (zero when none).
std::vector<double> vertex_normals(const float* vertices, const std::int32_t* faces,
                                   std::int64_t P, std::int64_t F) {
  std::vector<double> n(static_cast<std::size_t>(3 * P), 0.0);
  for (std::int64_t k = 0; k < F; ++k) {
    const std::int32_t* fk = faces + 3 * k;
    const float* p0 = vertices + 3 * fk[0];
    const float* p1 = vertices + 3 * fk[1];
    const float* p2 = vertices + 3 * fk[2];
    double e1[3], e2[3];
    for (int d = 0; d < 3; ++d) {
      e1[d] = static_cast<double>(p1[d]) - static_cast<double>(p0[d]);
      e2[d] = static_cast<double>(p2[d]) - static_cast<double>(p0[d]);
    }
    const double c0 = e1[1] * e2[2] - e1[2] * e2[1];
    const double c1 = e1[2] * e2[0] - e1[0] * e2[2];
    const double c2 = e1[0] * e2[1] - e1[1] * e2[0];
    for (int corner = 0; corner < 3; ++corner) {
      double* nv = n.data() + 3 * fk[corner];
      nv[0] += c0;
      nv[1] += c1;
      nv[2] += c2;
    }
  }
  for (std::int64_t i = 0; i < P; ++i) {
    double* nv = n.data() + 3 * i;
    const double len = std::sqrt(nv[0] * nv[0] + nv[1] * nv[1] + nv[2] * nv[2]);
    if (len > 0.0) {
      nv[0] /= len;
      nv[1] /= len;
      nv[2] /= len;
    }
  }
  return n;
}

}  // namespace

void render_mesh_views_cpu(const float* vertices, const std::int32_t* faces,
                           const float* elevations_deg, const float* azimuths_deg,
                           const float* lights, float* out, std::int64_t P, std::int64_t F,
                           std::int64_t N, std::int64_t M, std::int64_t L,
                           std::int64_t image_size, std::int64_t supersample, double ambient,
                           double diffuse, double specular, double shininess, double albedo,
                           double fov_deg, double distance, double background) {
  const std::int64_t H = image_size;
  const std::int64_t ss = supersample;
  const std::int64_t S = H * ss;
  const std::vector<double> normals = vertex_normals(vertices, faces, P, F);

  // Unit light directions and intensities.
  std::vector<double> light_dir(static_cast<std::size_t>(3 * L));
  std::vector<double> light_int(static_cast<std::size_t>(L));
  for (std::int64_t l = 0; l < L; ++l) {
    const double x = lights[4 * l], y = lights[4 * l + 1], z = lights[4 * l + 2];
    const double len = std::sqrt(x * x + y * y + z * z);
    light_dir[3 * l] = x / len;
    light_dir[3 * l + 1] = y / len;
    light_dir[3 * l + 2] = z / len;
    light_int[l] = lights[4 * l + 3];
  }

  const double half = 0.5 * static_cast<double>(S);
  const double focal = half / std::tan(fov_deg * (kPi / 180.0) * 0.5);
  const double block = static_cast<double>(ss * ss);

#pragma omp parallel
  {
    std::vector<double> sx(static_cast<std::size_t>(P)), sy(static_cast<std::size_t>(P));
    std::vector<double> iz(static_cast<std::size_t>(P)), shade(static_cast<std::size_t>(P));
    std::vector<char> in_front(static_cast<std::size_t>(P));
    std::vector<double> zbuf(static_cast<std::size_t>(S * S));
    std::vector<double> color(static_cast<std::size_t>(S * S));
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t view = 0; view < N * M; ++view) {
      const Camera cam = make_camera(static_cast<double>(elevations_deg[view / M]),
                                     static_cast<double>(azimuths_deg[view % M]), distance);
      // Project and shade every vertex.
      for (std::int64_t i = 0; i < P; ++i) {
        const double px = vertices[3 * i], py = vertices[3 * i + 1], pz = vertices[3 * i + 2];
        const double dx = px - cam.c[0], dy = py - cam.c[1], dz = pz - cam.c[2];
        const double xc = dx * cam.r[0] + dz * cam.r[2];
        const double yc = dx * cam.u[0] + dy * cam.u[1] + dz * cam.u[2];
        const double zc = dx * cam.f[0] + dy * cam.f[1] + dz * cam.f[2];
        in_front[i] = zc >= kNearPlane;
        const double inv = in_front[i] ? 1.0 / zc : 0.0;
        iz[i] = inv;
        sx[i] = half + focal * xc * inv;
        sy[i] = half - focal * yc * inv;

        // View vector from the vertex to the camera.
        double vx = -dx, vy = -dy, vz = -dz;
        const double vlen = std::sqrt(vx * vx + vy * vy + vz * vz);
        if (vlen > 0.0) {
          vx /= vlen;
          vy /= vlen;
          vz /= vlen;
        }
        const double* n = normals.data() + 3 * i;
        double diff_sum = 0.0, spec_sum = 0.0;
        for (std::int64_t l = 0; l < L; ++l) {
          const double* ld = light_dir.data() + 3 * l;
          const double ndl = n[0] * ld[0] + n[1] * ld[1] + n[2] * ld[2];
          const double sgn = ndl < 0.0 ? -1.0 : 1.0;
          const double adl = ndl * sgn;
          const double rx = 2.0 * adl * (sgn * n[0]) - ld[0];
          const double ry = 2.0 * adl * (sgn * n[1]) - ld[1];
          const double rz = 2.0 * adl * (sgn * n[2]) - ld[2];
          const double rv = rx * vx + ry * vy + rz * vz;
          const double spec = rv > 0.0 ? std::pow(rv, shininess) : 0.0;
          diff_sum = diff_sum + light_int[l] * adl;
          spec_sum = spec_sum + light_int[l] * spec;
        }
        const double s = albedo * (ambient + diffuse * diff_sum) + specular * spec_sum;
        shade[i] = std::min(std::max(s, 0.0), 1.0);
      }

      std::fill(zbuf.begin(), zbuf.end(), 0.0);
      std::fill(color.begin(), color.end(), background);
      for (std::int64_t k = 0; k < F; ++k) {
        const std::int32_t a = faces[3 * k], b = faces[3 * k + 1], c = faces[3 * k + 2];
        if (!in_front[a] || !in_front[b] || !in_front[c]) continue;
        const double x0 = sx[a], y0 = sy[a], x1 = sx[b], y1 = sy[b], x2 = sx[c], y2 = sy[c];
        const double area = (x1 - x0) * (y2 - y0) - (y1 - y0) * (x2 - x0);
        if (!(area != 0.0)) continue;
        // Conservative pixel range; the edge tests below decide coverage.
        const double lo_x = std::max(std::min({x0, x1, x2}), 0.0);
        const double lo_y = std::max(std::min({y0, y1, y2}), 0.0);
        const double hi_x = std::max({x0, x1, x2}), hi_y = std::max({y0, y1, y2});
        if (hi_x < 0.0 || hi_y < 0.0 || lo_x > static_cast<double>(S) ||
            lo_y > static_cast<double>(S))
          continue;
        // Clamp before converting: far-off vertices project to huge coordinates.
        const double Sd = static_cast<double>(S);
        const std::int64_t j0 = std::max<std::int64_t>(0, static_cast<std::int64_t>(lo_x) - 1);
        const std::int64_t j1 = std::min<std::int64_t>(
            S - 1, static_cast<std::int64_t>(std::min(hi_x, Sd)) + 1);
        const std::int64_t i0 = std::max<std::int64_t>(0, static_cast<std::int64_t>(lo_y) - 1);
        const std::int64_t i1 = std::min<std::int64_t>(
            S - 1, static_cast<std::int64_t>(std::min(hi_y, Sd)) + 1);
        for (std::int64_t i = i0; i <= i1; ++i) {
          const double qy = static_cast<double>(i) + 0.5;
          // The y halves of the edge functions are constant along a row.
          const double r0 = (x2 - x1) * (qy - y1), r1 = (x0 - x2) * (qy - y2);
          const double r2 = (x1 - x0) * (qy - y0);
          bool entered = false;
          for (std::int64_t j = j0; j <= j1; ++j) {
            const double qx = static_cast<double>(j) + 0.5;
            const double w0 = r0 - (y2 - y1) * (qx - x1);
            const double w1 = r1 - (y0 - y2) * (qx - x2);
            const double w2 = r2 - (y1 - y0) * (qx - x0);
            const bool inside = area > 0.0 ? (w0 >= 0.0 && w1 >= 0.0 && w2 >= 0.0)
                                           : (w0 <= 0.0 && w1 <= 0.0 && w2 <= 0.0);
            // Each edge function is monotonic along a row (so are rounded subtractions and
            // products), so the covered pixels of a row are contiguous: stop after leaving.
            if (!inside) {
              if (entered) break;
              continue;
            }
            entered = true;
            const double b0 = w0 / area, b1 = w1 / area, b2 = w2 / area;
            const double depth = b0 * iz[a] + b1 * iz[b] + b2 * iz[c];
            const std::int64_t pix = i * S + j;
            if (depth > zbuf[pix]) {  // strict: ties keep the lowest face index
              zbuf[pix] = depth;
              color[pix] = b0 * shade[a] + b1 * shade[b] + b2 * shade[c];
            }
          }
        }
      }

      // Box-filter each supersample block (row-major sum) into the output pixel.
      float* dst = out + view * H * H;
      for (std::int64_t oi = 0; oi < H; ++oi) {
        for (std::int64_t oj = 0; oj < H; ++oj) {
          double sum = 0.0;
          for (std::int64_t di = 0; di < ss; ++di) {
            const double* row = color.data() + (oi * ss + di) * S + oj * ss;
            for (std::int64_t dj = 0; dj < ss; ++dj) sum += row[dj];
          }
          dst[oi * H + oj] = static_cast<float>(std::min(std::max(sum / block, 0.0), 1.0));
        }
      }
    }
  }
}

}  // namespace pyskick
