#pragma once
// Every CUDA runtime call goes through CHORUS_CUDA_CHECK, which turns a failure into a
// Status naming the call, CUDA's error name and text, and the place in the source.
// Private header: only files compiled with CHORUS_WITH_CUDA include it.

#include <cuda_runtime_api.h>

#include <string>

#include "chorus/status.h"

namespace chorus::cuda_detail {

inline Status cuda_status(cudaError_t code, const char* call, const char* file, int line) {
  return internal_error(std::string(call) + " failed: " + cudaGetErrorName(code) + " (" +
                        cudaGetErrorString(code) + ") at " + file + ":" + std::to_string(line));
}

}  // namespace chorus::cuda_detail

#define CHORUS_CUDA_CHECK(call)                                                              \
  do {                                                                                       \
    cudaError_t chorus_cuda_rc_ = (call);                                                    \
    if (chorus_cuda_rc_ != cudaSuccess) {                                                    \
      return ::chorus::cuda_detail::cuda_status(chorus_cuda_rc_, #call, __FILE__, __LINE__); \
    }                                                                                        \
  } while (0)
