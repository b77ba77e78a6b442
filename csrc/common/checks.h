// Argument checks shared by the kernels: bad input never aborts the process.
//
// Two kinds, so that Python can tell the caller's mistake from pyskick's:
// - PYSKICK_CHECK_INPUT: the values a caller gave (NaN scores, a start out of range, a grid too
//   large for a CUDA kernel). Throws pyskick::InputError, which pybind11 raises as
//   pyskick._C.InputError (a ValueError) and pyskick.ops' launch re-raises as
//   pyskick.errors.UserError, like the wrappers' own checks.
// - PYSKICK_CHECK: the bindings' last guard behind the wrappers (sizes, null pointers), which only
//   a raw call to pyskick._C or a bug in a wrapper can trip. Throws std::invalid_argument: a plain
//   ValueError.
#pragma once

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace pyskick {

// Message pieces, appended without iostreams: on the H100 image of 2026-11-27 every message built
// with std::ostringstream that held a number crashed the process (a segmentation fault in the
// stream's number formatting; messages of text alone were raised fine). Number formatting goes
// through the locale's facets, which another library in the process can leave unusable (the
// same crash: pytorch/pytorch#109923, pybind/pybind11#3206). std::to_string and snprintf do
// not use them.
inline void append(std::string& out, const char* text) { out += text; }
inline void append(std::string& out, const std::string& text) { out += text; }
inline void append(std::string& out, char c) { out += c; }

template <typename T>
std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, char>> append(std::string& out,
                                                                            T value) {
  if constexpr (std::is_same_v<T, bool>) {
    out += value ? "true" : "false";
  } else if constexpr (std::is_signed_v<T>) {
    out += std::to_string(static_cast<long long>(value));
  } else {
    out += std::to_string(static_cast<unsigned long long>(value));
  }
}

template <typename T>
std::enable_if_t<std::is_floating_point_v<T>> append(std::string& out, T value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", static_cast<double>(value));
  out += buffer;
}

template <typename... Args>
std::string concat(const Args&... args) {
  std::string out;
  (append(out, args), ...);
  return out;
}

// A check of the caller's values failed (PYSKICK_CHECK_INPUT).
class InputError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Non-negative modulo: wrap(-1, 8) == 7.
inline std::int64_t wrap_index(std::int64_t i, std::int64_t n) {
  const std::int64_t r = i % n;
  return r < 0 ? r + n : r;
}

inline std::int64_t clip_index(std::int64_t i, std::int64_t n) {
  return i < 0 ? 0 : (i >= n ? n - 1 : i);
}

}  // namespace pyskick

#define PYSKICK_CHECK(cond, ...)                                                 \
  do {                                                                           \
    if (!(cond)) throw std::invalid_argument(::pyskick::concat(__VA_ARGS__));    \
  } while (0)

#define PYSKICK_CHECK_INPUT(cond, ...)                                           \
  do {                                                                           \
    if (!(cond)) throw ::pyskick::InputError(::pyskick::concat(__VA_ARGS__));    \
  } while (0)
