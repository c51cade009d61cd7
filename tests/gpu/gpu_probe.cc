// Exits 0 when a CUDA device is visible, 77 (CTest's skip code here) when not, so the
// GPU tests report "skipped: no CUDA device" on machines without one.
#include <cuda_runtime_api.h>

#include <cstdio>

int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  std::printf("%d CUDA device(s)\n", n);
  return 0;
}
