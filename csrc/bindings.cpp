// Python bindings of pyskick._C: bindings only, no kernel logic.
//
// Kernels are torch-free: tensors arrive as raw addresses (Tensor.data_ptr()) with their sizes,
// and CUDA kernels also get the caller's stream (torch.cuda.current_stream().cuda_stream). The
// Python wrappers in pyskick/ops validate dtype, device, shape, contiguity and index ranges
// first; the checks here are a last guard (sizes, null pointers) behind them.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>

#ifdef PYSKICK_WITH_OPENMP
#include <omp.h>
#endif

#include "common/checks.h"
#include "ops/coverage_matrix.h"
#include "ops/greedy_coverage.h"
#include "ops/nms_rewards.h"
#include "ops/render_mesh_views.h"
#include "ops/rotate_viewgrid.h"

namespace py = pybind11;
using std::int64_t;
using std::uintptr_t;

namespace {

template <typename T>
T* ptr(uintptr_t address) {
  return reinterpret_cast<T*>(address);
}

void check_sizes(const char* op, std::initializer_list<int64_t> sizes) {
  for (const int64_t s : sizes) PYSKICK_CHECK(s >= 0, op, ": sizes must be non-negative, got ", s);
}

void check_pointer(const char* op, const char* name, uintptr_t address, int64_t numel) {
  PYSKICK_CHECK(numel == 0 || address != 0, op, ": ", name, " is a null pointer");
}

py::dict build_info() {
  py::dict info;
  info["version"] = PYSKICK_VERSION;
  info["compiler"] = PYSKICK_CXX_COMPILER;
#ifdef PYSKICK_WITH_OPENMP
  info["openmp"] = true;
  info["openmp_version"] = static_cast<int>(_OPENMP);
#else
  info["openmp"] = false;
  info["openmp_version"] = py::none();
#endif
#ifdef PYSKICK_WITH_CUDA
  info["cuda"] = true;
  info["cuda_version"] = PYSKICK_CUDA_VERSION;
  info["cuda_architectures"] = std::string(PYSKICK_CUDA_ARCHS);
#else
  info["cuda"] = false;
  info["cuda_version"] = py::none();
  info["cuda_architectures"] = py::none();
#endif
#ifdef PYSKICK_SANITIZE
  info["sanitizers"] = "address,undefined";  // `make sanitize`'s build, not for production
#else
  info["sanitizers"] = py::none();
#endif
  return info;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "pyskick native kernels (torch-free C++/CUDA; see pyskick.ops for the API)";

  m.def("build_info", &build_info, "How the module was built: compiler, OpenMP, CUDA.");
  m.def("has_cuda", []() {
#ifdef PYSKICK_WITH_CUDA
    return true;
#else
    return false;
#endif
  });
  m.def("get_num_threads", []() {
#ifdef PYSKICK_WITH_OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
  });
  m.def("set_num_threads", [](int n) {
    PYSKICK_CHECK(n >= 1, "set_num_threads: n must be >= 1, got ", n);
#ifdef PYSKICK_WITH_OPENMP
    omp_set_num_threads(n);
#endif
  });

  // ---------------------------------------------------------------- rotate_viewgrid
  m.def(
      "rotate_viewgrid_cpu",
      [](uintptr_t grid, uintptr_t out, int64_t B, int64_t N, int64_t M, int64_t view_bytes,
         uintptr_t azimuth_shift, uintptr_t elevation_shift, bool inverse) {
        check_sizes("rotate_viewgrid", {B, N, M, view_bytes});
        const int64_t numel = B * N * M * view_bytes;
        if (numel == 0) return;
        check_pointer("rotate_viewgrid", "grid", grid, numel);
        check_pointer("rotate_viewgrid", "out", out, numel);
        check_pointer("rotate_viewgrid", "azimuth_shift", azimuth_shift, B);
        py::gil_scoped_release release;
        pyskick::rotate_viewgrid_cpu(ptr<const std::uint8_t>(grid), ptr<std::uint8_t>(out), B, N,
                                     M, view_bytes, ptr<const int64_t>(azimuth_shift),
                                     ptr<const int64_t>(elevation_shift), inverse);
      },
      py::arg("grid"), py::arg("out"), py::arg("B"), py::arg("N"), py::arg("M"),
      py::arg("view_bytes"), py::arg("azimuth_shift"), py::arg("elevation_shift"),
      py::arg("inverse"));

  // ---------------------------------------------------------------- coverage_matrix
  m.def(
      "coverage_matrix_cpu",
      [](uintptr_t recon, uintptr_t grid, uintptr_t out, int64_t B, int64_t N, int64_t M,
         int64_t D) {
        check_sizes("coverage_matrix", {B, N, M, D});
        if (B * N * M == 0) return true;
        check_pointer("coverage_matrix", "recon", recon, D);
        check_pointer("coverage_matrix", "grid", grid, D);
        check_pointer("coverage_matrix", "out", out, 1);
        py::gil_scoped_release release;
        // False: a squared error was not finite; the wrapper names the non-finite input.
        return pyskick::coverage_matrix_cpu(ptr<const float>(recon), ptr<const float>(grid),
                                            ptr<float>(out), B, N, M, D);
      },
      py::arg("recon"), py::arg("grid"), py::arg("out"), py::arg("B"), py::arg("N"), py::arg("M"),
      py::arg("D"));

  // ---------------------------------------------------------------- greedy_coverage
  m.def(
      "greedy_coverage_cpu",
      [](uintptr_t coverage, uintptr_t starts, uintptr_t actions, uintptr_t views, int64_t B,
         int64_t S, int64_t steps, int64_t N, int64_t M, int64_t dN, int64_t dM,
         bool wrap_azimuth, bool wrap_elevation) {
        check_sizes("greedy_coverage", {B, S, steps, N, M, dN, dM});
        if (B * S == 0) return;
        PYSKICK_CHECK(N * M > 0, "greedy_coverage: empty grid");
        PYSKICK_CHECK(dN % 2 == 1 && dM % 2 == 1, "greedy_coverage: action grid must be odd");
        check_pointer("greedy_coverage", "coverage", coverage, 1);
        check_pointer("greedy_coverage", "starts", starts, 1);
        check_pointer("greedy_coverage", "views", views, 1);
        check_pointer("greedy_coverage", "actions", actions, steps);
        bool valid;
        {
          py::gil_scoped_release release;
          valid = pyskick::greedy_coverage_cpu(ptr<const float>(coverage),
                                               ptr<const int64_t>(starts), ptr<int64_t>(actions),
                                               ptr<int64_t>(views), B, S, steps, N, M, dN, dM,
                                               wrap_azimuth, wrap_elevation);
        }
        PYSKICK_CHECK(valid, "greedy_coverage: coverage must lie in [0, 1] (as coverage_matrix ",
                      "returns), got values outside it or NaN");
      },
      py::arg("coverage"), py::arg("starts"), py::arg("actions"), py::arg("views"), py::arg("B"),
      py::arg("S"), py::arg("steps"), py::arg("N"), py::arg("M"), py::arg("dN"), py::arg("dM"),
      py::arg("wrap_azimuth"), py::arg("wrap_elevation"));

  // ---------------------------------------------------------------- nms_rewards
  m.def(
      "nms_rewards_cpu",
      [](uintptr_t scores, uintptr_t out, int64_t B, int64_t N, int64_t M, int64_t k,
         int64_t radius) {
        check_sizes("nms_rewards", {B, N, M, k, radius});
        if (B * N * M == 0) return;
        check_pointer("nms_rewards", "scores", scores, 1);
        check_pointer("nms_rewards", "out", out, 1);
        bool finite;
        {
          py::gil_scoped_release release;
          finite = pyskick::nms_rewards_cpu(ptr<const float>(scores), ptr<float>(out), B, N, M, k,
                                            radius);
        }
        PYSKICK_CHECK(finite, "nms_rewards: scores contains NaN or infinite values");
      },
      py::arg("scores"), py::arg("out"), py::arg("B"), py::arg("N"), py::arg("M"), py::arg("k"),
      py::arg("radius"));

  // ---------------------------------------------------------------- render_mesh_views
  m.def(
      "render_mesh_views_cpu",
      [](uintptr_t vertices, uintptr_t faces, uintptr_t elevations_deg, uintptr_t azimuths_deg,
         uintptr_t lights, uintptr_t out, int64_t P, int64_t F, int64_t N, int64_t M, int64_t L,
         int64_t image_size, int64_t supersample, double ambient, double diffuse,
         double specular, double shininess, double albedo, double fov_deg, double distance,
         double background) {
        check_sizes("render_mesh_views", {P, F, N, M, L});
        PYSKICK_CHECK(image_size >= 1 && supersample >= 1 && image_size * supersample <= 4096,
                      "render_mesh_views: bad image_size ", image_size, " or supersample ",
                      supersample);
        PYSKICK_CHECK(P <= (int64_t{1} << 31) && F <= (int64_t{1} << 40),
                      "render_mesh_views: mesh too large");
        PYSKICK_CHECK(fov_deg > 0.0 && fov_deg < 180.0 && distance > 0.0,
                      "render_mesh_views: bad fov_deg ", fov_deg, " or distance ", distance);
        if (N * M == 0) return;
        check_pointer("render_mesh_views", "vertices", vertices, P);
        check_pointer("render_mesh_views", "faces", faces, F);
        check_pointer("render_mesh_views", "elevations_deg", elevations_deg, N);
        check_pointer("render_mesh_views", "azimuths_deg", azimuths_deg, M);
        check_pointer("render_mesh_views", "lights", lights, L);
        check_pointer("render_mesh_views", "out", out, 1);
        py::gil_scoped_release release;
        pyskick::render_mesh_views_cpu(
            ptr<const float>(vertices), ptr<const std::int32_t>(faces),
            ptr<const float>(elevations_deg), ptr<const float>(azimuths_deg),
            ptr<const float>(lights), ptr<float>(out), P, F, N, M, L, image_size, supersample,
            ambient, diffuse, specular, shininess, albedo, fov_deg, distance, background);
      },
      py::arg("vertices"), py::arg("faces"), py::arg("elevations_deg"), py::arg("azimuths_deg"),
      py::arg("lights"), py::arg("out"), py::arg("P"), py::arg("F"), py::arg("N"), py::arg("M"),
      py::arg("L"), py::arg("image_size"), py::arg("supersample"), py::arg("ambient"),
      py::arg("diffuse"), py::arg("specular"), py::arg("shininess"), py::arg("albedo"),
      py::arg("fov_deg"), py::arg("distance"), py::arg("background"));

#ifdef PYSKICK_WITH_CUDA
  // CUDA entry points: same arguments plus the stream; the GIL is kept (launches are async).
  m.def(
      "rotate_viewgrid_cuda",
      [](uintptr_t grid, uintptr_t out, int64_t B, int64_t N, int64_t M, int64_t view_bytes,
         uintptr_t azimuth_shift, uintptr_t elevation_shift, bool inverse, uintptr_t stream) {
        check_sizes("rotate_viewgrid", {B, N, M, view_bytes});
        if (B * N * M * view_bytes == 0) return;
        check_pointer("rotate_viewgrid", "grid", grid, 1);
        check_pointer("rotate_viewgrid", "out", out, 1);
        check_pointer("rotate_viewgrid", "azimuth_shift", azimuth_shift, 1);
        pyskick::rotate_viewgrid_cuda(ptr<const std::uint8_t>(grid), ptr<std::uint8_t>(out), B, N,
                                      M, view_bytes, ptr<const int64_t>(azimuth_shift),
                                      ptr<const int64_t>(elevation_shift), inverse, stream);
      },
      py::arg("grid"), py::arg("out"), py::arg("B"), py::arg("N"), py::arg("M"),
      py::arg("view_bytes"), py::arg("azimuth_shift"), py::arg("elevation_shift"),
      py::arg("inverse"), py::arg("stream"));
  m.def(
      "coverage_matrix_cuda",
      [](uintptr_t recon, uintptr_t grid, uintptr_t out, int64_t B, int64_t N, int64_t M,
         int64_t D, uintptr_t stream) {
        check_sizes("coverage_matrix", {B, N, M, D});
        if (B * N * M == 0) return;
        check_pointer("coverage_matrix", "recon", recon, D);
        check_pointer("coverage_matrix", "grid", grid, D);
        check_pointer("coverage_matrix", "out", out, 1);
        pyskick::coverage_matrix_cuda(ptr<const float>(recon), ptr<const float>(grid),
                                      ptr<float>(out), B, N, M, D, stream);
      },
      py::arg("recon"), py::arg("grid"), py::arg("out"), py::arg("B"), py::arg("N"), py::arg("M"),
      py::arg("D"), py::arg("stream"));
  m.def(
      "greedy_coverage_cuda",
      [](uintptr_t coverage, uintptr_t starts, uintptr_t actions, uintptr_t views, int64_t B,
         int64_t S, int64_t steps, int64_t N, int64_t M, int64_t dN, int64_t dM,
         bool wrap_azimuth, bool wrap_elevation, uintptr_t stream) {
        check_sizes("greedy_coverage", {B, S, steps, N, M, dN, dM});
        if (B * S == 0) return;
        PYSKICK_CHECK(N * M > 0, "greedy_coverage: empty grid");
        PYSKICK_CHECK(dN % 2 == 1 && dM % 2 == 1, "greedy_coverage: action grid must be odd");
        check_pointer("greedy_coverage", "coverage", coverage, 1);
        check_pointer("greedy_coverage", "starts", starts, 1);
        check_pointer("greedy_coverage", "views", views, 1);
        check_pointer("greedy_coverage", "actions", actions, steps);
        pyskick::greedy_coverage_cuda(ptr<const float>(coverage), ptr<const int64_t>(starts),
                                      ptr<int64_t>(actions), ptr<int64_t>(views), B, S, steps, N,
                                      M, dN, dM, wrap_azimuth, wrap_elevation, stream);
      },
      py::arg("coverage"), py::arg("starts"), py::arg("actions"), py::arg("views"), py::arg("B"),
      py::arg("S"), py::arg("steps"), py::arg("N"), py::arg("M"), py::arg("dN"), py::arg("dM"),
      py::arg("wrap_azimuth"), py::arg("wrap_elevation"), py::arg("stream"));
  m.def(
      "nms_rewards_cuda",
      [](uintptr_t scores, uintptr_t out, int64_t B, int64_t N, int64_t M, int64_t k,
         int64_t radius, uintptr_t stream) {
        check_sizes("nms_rewards", {B, N, M, k, radius});
        if (B * N * M == 0) return;
        check_pointer("nms_rewards", "scores", scores, 1);
        check_pointer("nms_rewards", "out", out, 1);
        pyskick::nms_rewards_cuda(ptr<const float>(scores), ptr<float>(out), B, N, M, k, radius,
                                  stream);
      },
      py::arg("scores"), py::arg("out"), py::arg("B"), py::arg("N"), py::arg("M"), py::arg("k"),
      py::arg("radius"), py::arg("stream"));
#endif
}
