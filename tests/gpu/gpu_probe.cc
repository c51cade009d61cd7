// Exits 0 when a CUDA device is visible, 77 (CTest's skip code here) when not, so the
// GPU tests report "skipped: no CUDA device" on machines without one. The line it prints
// says why (CUDA's own error), so that a driver or runtime problem on a machine that has a
// GPU is not mistaken for the absence of one.
#include <cuda_runtime_api.h>

#include <cstdio>

int main() {
  int n = 0;
  const cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) {
    std::printf("SKIPPED: no CUDA device (%s: %s)\n", cudaGetErrorName(rc), cudaGetErrorString(rc));
    return 77;
  }
  if (n == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  std::printf("%d CUDA device(s)\n", n);
  return 0;
}
