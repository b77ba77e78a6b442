// Python bindings of pyskick._C: bindings only, no kernel logic.
//
// Kernels are torch-free: tensors arrive as raw addresses (Tensor.data_ptr()) with their sizes,
// and CUDA kernels also get the caller's stream (torch.cuda.current_stream().cuda_stream). The
// Python wrappers in pyskick/ops validate dtype, device, shape, contiguity and index ranges
// first; the checks here are a last guard (sizes, null pointers) behind them. Checks of the values
// only a kernel reads (NaN scores, out-of-range coverage) raise pyskick._C.InputError instead
// (common/checks.h), which pyskick.ops reports as the caller's error.
//
// One section per op: check_<op>(), the last-guard checks that both of its entry points run,
// then one def_op() call that binds `<op>_cpu(args...)` and, in a CUDA build,
// `<op>_cuda(args..., stream)` with one argument list for both. pyskick/_C.pyi declares the
// same functions and arguments (tests/ops/test_native_stub.py compares them); docs/kernels.md
// walks through adding an op.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

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

// The CUDA entry point of an op that has none (a CPU-only op, or any op in a build without
// CUDA): def_op then binds `<op>_cpu` alone.
struct NoCuda {};

// PYSKICK_IF_CUDA(lambda) is the lambda in a CUDA build and NoCuda{} otherwise, where the
// `<op>_cuda` kernels it calls are not declared.
#ifdef PYSKICK_WITH_CUDA
#define PYSKICK_IF_CUDA(...) __VA_ARGS__
#else
#define PYSKICK_IF_CUDA(...) NoCuda{}
#endif

// Binds `<op>_cpu` to `cpu` and, unless `cuda` is NoCuda, `<op>_cuda` to `cuda`, which takes the
// same arguments plus the stream. `args` are the py::arg names of the CPU entry point.
template <typename Cpu, typename Cuda, typename... Args>
void def_op(py::module_& m, const std::string& op, Cpu cpu, [[maybe_unused]] Cuda cuda,
            const Args&... args) {
  m.def((op + "_cpu").c_str(), cpu, args...);
  if constexpr (!std::is_same_v<Cuda, NoCuda>) {
    m.def((op + "_cuda").c_str(), cuda, args..., py::arg("stream"));
  }
}

// ------------------------------------------------------------------------ rotate_viewgrid
// Each check_<op> returns false when there is nothing to compute (an empty input).
bool check_rotate_viewgrid(uintptr_t grid, uintptr_t out, int64_t B, int64_t N, int64_t M,
                           int64_t view_bytes, uintptr_t azimuth_shift) {
  check_sizes("rotate_viewgrid", {B, N, M, view_bytes});
  const int64_t numel = B * N * M * view_bytes;
  if (numel == 0) return false;
  check_pointer("rotate_viewgrid", "grid", grid, numel);
  check_pointer("rotate_viewgrid", "out", out, numel);
  check_pointer("rotate_viewgrid", "azimuth_shift", azimuth_shift, B);
  return true;
}

void bind_rotate_viewgrid(py::module_& m) {
  def_op(
      m, "rotate_viewgrid",
      [](uintptr_t grid, uintptr_t out, int64_t B, int64_t N, int64_t M, int64_t view_bytes,
         uintptr_t azimuth_shift, uintptr_t elevation_shift, bool inverse) {
        if (!check_rotate_viewgrid(grid, out, B, N, M, view_bytes, azimuth_shift)) return;
        py::gil_scoped_release release;
        pyskick::rotate_viewgrid_cpu(ptr<const std::uint8_t>(grid), ptr<std::uint8_t>(out), B, N,
                                     M, view_bytes, ptr<const int64_t>(azimuth_shift),
                                     ptr<const int64_t>(elevation_shift), inverse);
      },
      PYSKICK_IF_CUDA([](uintptr_t grid, uintptr_t out, int64_t B, int64_t N, int64_t M,
                         int64_t view_bytes, uintptr_t azimuth_shift, uintptr_t elevation_shift,
                         bool inverse, uintptr_t stream) {
        if (!check_rotate_viewgrid(grid, out, B, N, M, view_bytes, azimuth_shift)) return;
        pyskick::rotate_viewgrid_cuda(ptr<const std::uint8_t>(grid), ptr<std::uint8_t>(out), B, N,
                                      M, view_bytes, ptr<const int64_t>(azimuth_shift),
                                      ptr<const int64_t>(elevation_shift), inverse, stream);
      }),
      py::arg("grid"), py::arg("out"), py::arg("B"), py::arg("N"), py::arg("M"),
      py::arg("view_bytes"), py::arg("azimuth_shift"), py::arg("elevation_shift"),
      py::arg("inverse"));
}

// ------------------------------------------------------------------------ coverage_matrix
bool check_coverage_matrix(uintptr_t recon, uintptr_t grid, uintptr_t out, int64_t B, int64_t N,
                           int64_t M, int64_t D) {
  check_sizes("coverage_matrix", {B, N, M, D});
  if (B * N * M == 0) return false;
  check_pointer("coverage_matrix", "recon", recon, D);
  check_pointer("coverage_matrix", "grid", grid, D);
  check_pointer("coverage_matrix", "out", out, 1);
  return true;
}

void bind_coverage_matrix(py::module_& m) {
  def_op(
      m, "coverage_matrix",
      [](uintptr_t recon, uintptr_t grid, uintptr_t out, int64_t B, int64_t N, int64_t M,
         int64_t D, uintptr_t nonfinite) {
        check_pointer("coverage_matrix", "nonfinite", nonfinite, 1);
        if (!check_coverage_matrix(recon, grid, out, B, N, M, D)) return;
        bool valid;
        {
          py::gil_scoped_release release;
          valid = pyskick::coverage_matrix_cpu(ptr<const float>(recon), ptr<const float>(grid),
                                               ptr<float>(out), B, N, M, D);
        }
        // 1: a squared error was not finite; the wrapper names the non-finite input.
        if (!valid) *ptr<std::int32_t>(nonfinite) = 1;
      },
      PYSKICK_IF_CUDA([](uintptr_t recon, uintptr_t grid, uintptr_t out, int64_t B, int64_t N,
                         int64_t M, int64_t D, uintptr_t nonfinite, uintptr_t stream) {
        check_pointer("coverage_matrix", "nonfinite", nonfinite, 1);
        if (!check_coverage_matrix(recon, grid, out, B, N, M, D)) return;
        pyskick::coverage_matrix_cuda(ptr<const float>(recon), ptr<const float>(grid),
                                      ptr<float>(out), ptr<std::int32_t>(nonfinite), B, N, M, D,
                                      stream);
      }),
      py::arg("recon"), py::arg("grid"), py::arg("out"), py::arg("B"), py::arg("N"), py::arg("M"),
      py::arg("D"), py::arg("nonfinite"));
}

// ------------------------------------------------------------------------ greedy_coverage
bool check_greedy_coverage(uintptr_t coverage, uintptr_t starts, uintptr_t actions,
                           uintptr_t views, int64_t B, int64_t S, int64_t steps, int64_t N,
                           int64_t M, int64_t dN, int64_t dM) {
  check_sizes("greedy_coverage", {B, S, steps, N, M, dN, dM});
  if (B * S == 0) return false;
  PYSKICK_CHECK(N * M > 0, "greedy_coverage: empty grid");
  PYSKICK_CHECK(dN % 2 == 1 && dM % 2 == 1, "greedy_coverage: action grid must be odd");
  check_pointer("greedy_coverage", "coverage", coverage, 1);
  check_pointer("greedy_coverage", "starts", starts, 1);
  check_pointer("greedy_coverage", "views", views, 1);
  check_pointer("greedy_coverage", "actions", actions, steps);
  return true;
}

void bind_greedy_coverage(py::module_& m) {
  def_op(
      m, "greedy_coverage",
      [](uintptr_t coverage, uintptr_t starts, uintptr_t actions, uintptr_t views, int64_t B,
         int64_t S, int64_t steps, int64_t N, int64_t M, int64_t dN, int64_t dM,
         bool wrap_azimuth, bool wrap_elevation) {
        if (!check_greedy_coverage(coverage, starts, actions, views, B, S, steps, N, M, dN, dM))
          return;
        pyskick::GreedyStatus status;
        {
          py::gil_scoped_release release;
          status = pyskick::greedy_coverage_cpu(ptr<const float>(coverage),
                                                ptr<const int64_t>(starts), ptr<int64_t>(actions),
                                                ptr<int64_t>(views), B, S, steps, N, M, dN, dM,
                                                wrap_azimuth, wrap_elevation);
        }
        PYSKICK_CHECK_INPUT(status != pyskick::GreedyStatus::kStartOutOfRange,
                            "greedy_coverage: starts must lie in [0, ", N * M, ")");
        PYSKICK_CHECK_INPUT(status != pyskick::GreedyStatus::kCoverageOutOfRange,
                            "greedy_coverage: coverage must lie in [0, 1] (as coverage_matrix ",
                            "returns), got values outside it or NaN");
      },
      PYSKICK_IF_CUDA([](uintptr_t coverage, uintptr_t starts, uintptr_t actions,
                         uintptr_t views, int64_t B, int64_t S, int64_t steps, int64_t N,
                         int64_t M, int64_t dN, int64_t dM, bool wrap_azimuth,
                         bool wrap_elevation, uintptr_t stream) {
        if (!check_greedy_coverage(coverage, starts, actions, views, B, S, steps, N, M, dN, dM))
          return;
        pyskick::greedy_coverage_cuda(ptr<const float>(coverage), ptr<const int64_t>(starts),
                                      ptr<int64_t>(actions), ptr<int64_t>(views), B, S, steps, N,
                                      M, dN, dM, wrap_azimuth, wrap_elevation, stream);
      }),
      py::arg("coverage"), py::arg("starts"), py::arg("actions"), py::arg("views"), py::arg("B"),
      py::arg("S"), py::arg("steps"), py::arg("N"), py::arg("M"), py::arg("dN"), py::arg("dM"),
      py::arg("wrap_azimuth"), py::arg("wrap_elevation"));
}

// ------------------------------------------------------------------------ nms_rewards
bool check_nms_rewards(uintptr_t scores, uintptr_t out, int64_t B, int64_t N, int64_t M,
                       int64_t k, int64_t radius) {
  check_sizes("nms_rewards", {B, N, M, k, radius});
  if (B * N * M == 0) return false;
  check_pointer("nms_rewards", "scores", scores, 1);
  check_pointer("nms_rewards", "out", out, 1);
  return true;
}

void bind_nms_rewards(py::module_& m) {
  def_op(
      m, "nms_rewards",
      [](uintptr_t scores, uintptr_t out, int64_t B, int64_t N, int64_t M, int64_t k,
         int64_t radius) {
        if (!check_nms_rewards(scores, out, B, N, M, k, radius)) return;
        bool finite;
        {
          py::gil_scoped_release release;
          finite = pyskick::nms_rewards_cpu(ptr<const float>(scores), ptr<float>(out), B, N, M, k,
                                            radius);
        }
        PYSKICK_CHECK_INPUT(finite, "nms_rewards: scores contains NaN or infinite values");
      },
      PYSKICK_IF_CUDA([](uintptr_t scores, uintptr_t out, int64_t B, int64_t N, int64_t M,
                         int64_t k, int64_t radius, uintptr_t stream) {
        if (!check_nms_rewards(scores, out, B, N, M, k, radius)) return;
        pyskick::nms_rewards_cuda(ptr<const float>(scores), ptr<float>(out), B, N, M, k, radius,
                                  stream);
      }),
      py::arg("scores"), py::arg("out"), py::arg("B"), py::arg("N"), py::arg("M"), py::arg("k"),
      py::arg("radius"));
}

// ------------------------------------------------------------------------ render_mesh_views
bool check_render_mesh_views(uintptr_t vertices, uintptr_t faces, uintptr_t elevations_deg,
                             uintptr_t azimuths_deg, uintptr_t lights, uintptr_t out, int64_t P,
                             int64_t F, int64_t N, int64_t M, int64_t L, int64_t image_size,
                             int64_t supersample, double fov_deg, double distance) {
  check_sizes("render_mesh_views", {P, F, N, M, L});
  PYSKICK_CHECK(image_size >= 1 && supersample >= 1 && image_size * supersample <= 4096,
                "render_mesh_views: bad image_size ", image_size, " or supersample ", supersample);
  PYSKICK_CHECK(P <= (int64_t{1} << 31) && F <= (int64_t{1} << 40),
                "render_mesh_views: mesh too large");
  PYSKICK_CHECK(fov_deg > 0.0 && fov_deg < 180.0 && distance > 0.0,
                "render_mesh_views: bad fov_deg ", fov_deg, " or distance ", distance);
  if (N * M == 0) return false;
  check_pointer("render_mesh_views", "vertices", vertices, P);
  check_pointer("render_mesh_views", "faces", faces, F);
  check_pointer("render_mesh_views", "elevations_deg", elevations_deg, N);
  check_pointer("render_mesh_views", "azimuths_deg", azimuths_deg, M);
  check_pointer("render_mesh_views", "lights", lights, L);
  check_pointer("render_mesh_views", "out", out, 1);
  return true;
}

void bind_render_mesh_views(py::module_& m) {
  def_op(
      m, "render_mesh_views",
      [](uintptr_t vertices, uintptr_t faces, uintptr_t elevations_deg, uintptr_t azimuths_deg,
         uintptr_t lights, uintptr_t out, int64_t P, int64_t F, int64_t N, int64_t M, int64_t L,
         int64_t image_size, int64_t supersample, double ambient, double diffuse,
         double specular, double shininess, double albedo, double fov_deg, double distance,
         double background) {
        if (!check_render_mesh_views(vertices, faces, elevations_deg, azimuths_deg, lights, out,
                                     P, F, N, M, L, image_size, supersample, fov_deg, distance))
          return;
        py::gil_scoped_release release;
        pyskick::render_mesh_views_cpu(
            ptr<const float>(vertices), ptr<const std::int32_t>(faces),
            ptr<const float>(elevations_deg), ptr<const float>(azimuths_deg),
            ptr<const float>(lights), ptr<float>(out), P, F, N, M, L, image_size, supersample,
            ambient, diffuse, specular, shininess, albedo, fov_deg, distance, background);
      },
      NoCuda{},  // rendering is CPU work (the wrapper copies CUDA tensors to the CPU)
      py::arg("vertices"), py::arg("faces"), py::arg("elevations_deg"), py::arg("azimuths_deg"),
      py::arg("lights"), py::arg("out"), py::arg("P"), py::arg("F"), py::arg("N"), py::arg("M"),
      py::arg("L"), py::arg("image_size"), py::arg("supersample"), py::arg("ambient"),
      py::arg("diffuse"), py::arg("specular"), py::arg("shininess"), py::arg("albedo"),
      py::arg("fov_deg"), py::arg("distance"), py::arg("background"));
}

// ------------------------------------------------------------------------ the module
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
  // A failed check of the caller's values (PYSKICK_CHECK_INPUT); the last guard's stay ValueError.
  py::register_exception<pyskick::InputError>(m, "InputError", PyExc_ValueError);

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
  m.def(
      "set_num_threads",
      [](int n) {
        PYSKICK_CHECK(n >= 1, "set_num_threads: n must be >= 1, got ", n);
#ifdef PYSKICK_WITH_OPENMP
        omp_set_num_threads(n);
#endif
      },
      py::arg("n"));

  bind_rotate_viewgrid(m);
  bind_coverage_matrix(m);
  bind_greedy_coverage(m);
  bind_nms_rewards(m);
  bind_render_mesh_views(m);
}
