// Pack/unpack of many tensors into a GPU fusion buffer with Chorus's batched kernel, against
// cudaMemcpyAsync device-to-device of the same bytes (one call per tensor, and one call for
// the whole span). Prints GB/s and the ratios; the target is >= 0.8x of the bandwidth of one
// copy of the whole span. Usage: gpu_pack_bench [tensors=160] [floats_per_tensor=100000] [reps=50]

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "fusion/cuda_fusion.h"

using chorus::DataType;
using chorus::gpu::CopyItem;

namespace {

// A failed CUDA call ends the run: figures measured after one would mean nothing.
#define BENCH_CUDA(call)                                                                     \
  do {                                                                                       \
    cudaError_t bench_rc_ = (call);                                                          \
    if (bench_rc_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s failed: %s at %s:%d\n", #call, cudaGetErrorString(bench_rc_), \
                   __FILE__, __LINE__);                                                      \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

void check(const chorus::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.to_string().c_str());
    std::exit(1);
  }
}

float time_ms(cudaStream_t s, int reps, const std::function<void()>& body) {
  cudaEvent_t a, b;
  BENCH_CUDA(cudaEventCreate(&a));
  BENCH_CUDA(cudaEventCreate(&b));
  body();  // warm-up
  BENCH_CUDA(cudaEventRecord(a, s));
  for (int i = 0; i < reps; ++i) body();
  BENCH_CUDA(cudaEventRecord(b, s));
  BENCH_CUDA(cudaEventSynchronize(b));
  float ms = 0;
  BENCH_CUDA(cudaEventElapsedTime(&ms, a, b));
  BENCH_CUDA(cudaEventDestroy(a));
  BENCH_CUDA(cudaEventDestroy(b));
  return ms / reps;
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  const int tensors = argc > 1 ? std::atoi(argv[1]) : 160;
  const int64_t count = argc > 2 ? std::atoll(argv[2]) : 100000;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 50;
  const std::size_t bytes = static_cast<std::size_t>(count) * 4;
  std::vector<void*> srcs(tensors);
  for (void*& p : srcs) BENCH_CUDA(cudaMalloc(&p, bytes));
  void* fusion = nullptr;
  BENCH_CUDA(cudaMalloc(&fusion, bytes * tensors));
  // The span copy's source: as many bytes as the fusion buffer (a tensor holds only `bytes`).
  void* span = nullptr;
  BENCH_CUDA(cudaMalloc(&span, bytes * tensors));
  cudaStream_t s;
  BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  auto copy = chorus::gpu::BatchedCopy::create(0);
  if (!copy.ok()) {
    std::printf("%s\n", copy.status().to_string().c_str());
    return 1;
  }
  std::vector<CopyItem> pack, unpack;
  for (int i = 0; i < tensors; ++i) {
    char* slot = static_cast<char*>(fusion) + bytes * i;
    pack.push_back({srcs[i], slot, count});
    unpack.push_back({slot, srcs[i], count});
  }
  const double gb = 2.0 * bytes * tensors / 1e9;  // pack + unpack
  const float chorus_ms = time_ms(s, reps, [&] {
    check((*copy)->launch(pack, DataType::kFloat32, {}, s));
    check((*copy)->launch(unpack, DataType::kFloat32, {}, s));
  });
  const float scaled_ms = time_ms(s, reps, [&] {
    check((*copy)->launch(pack, DataType::kFloat32, {1, 0.5}, s));
    check((*copy)->launch(unpack, DataType::kFloat32, {4, 1.0}, s));
  });
  const float memcpy_ms = time_ms(s, reps, [&] {
    for (int i = 0; i < tensors; ++i) {
      BENCH_CUDA(cudaMemcpyAsync(pack[i].dst, pack[i].src, bytes, cudaMemcpyDeviceToDevice, s));
    }
    for (int i = 0; i < tensors; ++i) {
      BENCH_CUDA(cudaMemcpyAsync(unpack[i].dst, unpack[i].src, bytes, cudaMemcpyDeviceToDevice, s));
    }
  });
  const float span_ms = time_ms(s, reps, [&] {
    // Pack and unpack as one copy each: the whole span in, the whole span back.
    BENCH_CUDA(cudaMemcpyAsync(fusion, span, bytes * tensors, cudaMemcpyDeviceToDevice, s));
    BENCH_CUDA(cudaMemcpyAsync(span, fusion, bytes * tensors, cudaMemcpyDeviceToDevice, s));
  });
  std::printf("%d tensors x %lld floats, pack+unpack %.1f MB\n", tensors,
              static_cast<long long>(count), gb * 1e3);
  std::printf("chorus batched copy     %8.3f ms  %7.1f GB/s\n", chorus_ms, gb / chorus_ms * 1e3);
  std::printf("chorus batched + scale  %8.3f ms  %7.1f GB/s\n", scaled_ms, gb / scaled_ms * 1e3);
  std::printf("cudaMemcpyAsync x %-5d %8.3f ms  %7.1f GB/s\n", 2 * tensors, memcpy_ms,
              gb / memcpy_ms * 1e3);
  std::printf("cudaMemcpyAsync span    %8.3f ms  %7.1f GB/s\n", span_ms, gb / span_ms * 1e3);
  std::printf("ratio chorus / per-tensor memcpy bandwidth: %.2f\n", memcpy_ms / chorus_ms);
  std::printf("ratio chorus / span memcpy bandwidth:       %.2f (target >= 0.8)\n",
              span_ms / chorus_ms);
  // One line for scripts (scripts/gpu-check.sh): bandwidths in GB/s, ratios of bandwidth.
  std::printf(
      "RESULT tensors=%d floats=%lld chorus_gbs=%.1f memcpy_gbs=%.1f span_gbs=%.1f "
      "ratio_memcpy=%.3f ratio_span=%.3f\n",
      tensors, static_cast<long long>(count), gb / chorus_ms * 1e3, gb / memcpy_ms * 1e3,
      gb / span_ms * 1e3, memcpy_ms / chorus_ms, span_ms / chorus_ms);
  for (void* p : srcs) BENCH_CUDA(cudaFree(p));
  BENCH_CUDA(cudaFree(fusion));
  BENCH_CUDA(cudaFree(span));
  BENCH_CUDA(cudaStreamDestroy(s));
  return 0;
}
