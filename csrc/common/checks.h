// Argument checks shared by the kernels. Failed checks throw std::invalid_argument, which pybind11
// turns into a Python ValueError: bad input never aborts the process.
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
