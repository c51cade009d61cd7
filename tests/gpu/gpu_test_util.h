#pragma once
// Helpers of the GPU tests: device buffers, and a skip when this machine has no GPU.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#define CHORUS_REQUIRE_GPU()                                             \
  do {                                                                   \
    int chorus_n_ = 0;                                                   \
    if (cudaGetDeviceCount(&chorus_n_) != cudaSuccess || chorus_n_ == 0) \
      GTEST_SKIP() << "no CUDA device";                                  \
  } while (0)

#define CHORUS_CUDA_OK(call) ASSERT_EQ(cudaSuccess, (call)) << #call

namespace chorus::testing {

// Device memory of `bytes` bytes, freed with the object.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (cudaMalloc(&p_, bytes == 0 ? 1 : bytes) != cudaSuccess) p_ = nullptr;
  }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  char* data() const { return static_cast<char*>(p_); }
  void upload(const void* src, std::size_t n, std::size_t at = 0) {
    cudaMemcpy(data() + at, src, n, cudaMemcpyHostToDevice);
  }
  std::vector<char> download(std::size_t n, std::size_t at = 0) const {
    std::vector<char> out(n);
    cudaMemcpy(out.data(), data() + at, n, cudaMemcpyDeviceToHost);
    return out;
  }

 private:
  void* p_ = nullptr;
  std::size_t bytes_;
};

}  // namespace chorus::testing
