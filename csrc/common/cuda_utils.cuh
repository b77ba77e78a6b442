// CUDA helpers: every runtime call and every launch is checked; errors become RuntimeError.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>

#include "common/checks.h"

#define PYSKICK_CUDA_CHECK(expr)                                                          \
  do {                                                                                    \
    const cudaError_t pyskick_err_ = (expr);                                              \
    if (pyskick_err_ != cudaSuccess)                                                      \
      throw std::runtime_error(::pyskick::concat("CUDA error at ", __FILE__, ":", __LINE__, \
                                                 ": ", cudaGetErrorString(pyskick_err_)));  \
  } while (0)

// Call right after every kernel launch.
#define PYSKICK_CUDA_LAUNCH_CHECK() PYSKICK_CUDA_CHECK(cudaGetLastError())

namespace pyskick {

inline cudaStream_t as_stream(std::uintptr_t stream) {
  return reinterpret_cast<cudaStream_t>(stream);
}

inline unsigned int ceil_div(std::int64_t a, std::int64_t b) {
  return static_cast<unsigned int>((a + b - 1) / b);
}

}  // namespace pyskick
