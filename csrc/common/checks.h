// Argument checks shared by the kernels. Failed checks throw std::invalid_argument, which pybind11
// turns into a Python ValueError: bad input never aborts the process.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

namespace pyskick {

template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
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
