// Pack/unpack of many tensors into a GPU fusion buffer with Chorus's batched kernel, against
// cudaMemcpyAsync device-to-device of the same bytes (one call per tensor, and one call for
// the whole span). Prints GB/s, the host's enqueue time and the ratios; the target is >= 0.8x
// of the device bandwidth of one copy of the whole span. Back-to-back figures (the stream
// not held while the host enqueues) are printed beside it: for small batches they measure
// the host. Usage: gpu_pack_bench [tensors=160] [floats_per_tensor=100000] [reps=50]

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

#include "kernels/cuda_fusion.h"

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

// What one repetition of a body costs: on the device (between two events), and on the
// host (the time to enqueue it).
struct Cost {
  float device_ms = 0;
  double host_us = 0;
  bool gated = false;  // the device time excludes the host's enqueueing
};

// Holds the stream until the host has enqueued every repetition, so that the events time
// the device's work alone: small batches are otherwise timed at the speed the host
// enqueues them. The hold ends by itself after 100 ms (a body that waits for the device,
// as a large batch's descriptor ring may, would otherwise never finish enqueueing).
struct Gate {
  std::atomic<bool> open{false};
  std::atomic<bool> expired{false};
};

void CUDART_CB hold(void* p) {
  auto* g = static_cast<Gate*>(p);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  while (!g->open.load()) {
    if (std::chrono::steady_clock::now() > until) {
      g->expired = true;
      return;
    }
    std::this_thread::yield();
  }
}

Cost time_body(cudaStream_t s, int reps, bool gate, const std::function<void()>& body) {
  cudaEvent_t a, b;
  BENCH_CUDA(cudaEventCreate(&a));
  BENCH_CUDA(cudaEventCreate(&b));
  body();  // warm-up
  BENCH_CUDA(cudaStreamSynchronize(s));
  Gate g;
  if (gate) BENCH_CUDA(cudaLaunchHostFunc(s, hold, &g));
  BENCH_CUDA(cudaEventRecord(a, s));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) body();
  const auto t1 = std::chrono::steady_clock::now();
  BENCH_CUDA(cudaEventRecord(b, s));
  g.open = true;
  BENCH_CUDA(cudaEventSynchronize(b));
  Cost c;
  BENCH_CUDA(cudaEventElapsedTime(&c.device_ms, a, b));
  c.device_ms /= static_cast<float>(reps);
  c.host_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / reps;
  c.gated = gate && !g.expired.load();
  BENCH_CUDA(cudaEventDestroy(a));
  BENCH_CUDA(cudaEventDestroy(b));
  return c;
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
  auto chorus_body = [&] {
    check((*copy)->launch(pack, DataType::kFloat32, {}, s));
    check((*copy)->launch(unpack, DataType::kFloat32, {}, s));
  };
  auto scaled_body = [&] {
    check((*copy)->launch(pack, DataType::kFloat32, {1, 0.5}, s));
    check((*copy)->launch(unpack, DataType::kFloat32, {4, 1.0}, s));
  };
  auto memcpy_body = [&] {
    for (int i = 0; i < tensors; ++i) {
      BENCH_CUDA(cudaMemcpyAsync(pack[i].dst, pack[i].src, bytes, cudaMemcpyDeviceToDevice, s));
    }
    for (int i = 0; i < tensors; ++i) {
      BENCH_CUDA(cudaMemcpyAsync(unpack[i].dst, unpack[i].src, bytes, cudaMemcpyDeviceToDevice, s));
    }
  };
  auto span_body = [&] {
    // Pack and unpack as one copy each: the whole span in, the whole span back.
    BENCH_CUDA(cudaMemcpyAsync(fusion, span, bytes * tensors, cudaMemcpyDeviceToDevice, s));
    BENCH_CUDA(cudaMemcpyAsync(span, fusion, bytes * tensors, cudaMemcpyDeviceToDevice, s));
  };
  // Device time with the stream held (the bandwidth), and back to back as a trainer's
  // batches come (device time bounded by how fast the host enqueues).
  const Cost chorus = time_body(s, reps, true, chorus_body);
  const Cost chorus_free = time_body(s, reps, false, chorus_body);
  const Cost scaled = time_body(s, reps, true, scaled_body);
  const Cost per_tensor = time_body(s, reps, true, memcpy_body);
  const Cost span_copy = time_body(s, reps, true, span_body);
  const Cost span_free = time_body(s, reps, false, span_body);
  auto gbs = [&](const Cost& c) { return gb / c.device_ms * 1e3; };
  auto line = [&](const char* what, const Cost& c) {
    std::printf("%-26s %8.3f ms  %7.1f GB/s  host %7.1f us%s\n", what, c.device_ms, gbs(c),
                c.host_us, c.gated ? "" : "  (device time includes enqueueing)");
  };
  std::printf("%d tensors x %lld floats, pack+unpack %.1f MB, %d reps\n", tensors,
              static_cast<long long>(count), gb * 1e3, reps);
  line("chorus batched copy", chorus);
  line("chorus batched + scale", scaled);
  line("cudaMemcpyAsync per tensor", per_tensor);
  line("cudaMemcpyAsync span", span_copy);
  line("chorus, back to back", chorus_free);
  line("span copy, back to back", span_free);
  const double ratio_span = span_copy.device_ms / chorus.device_ms;
  std::printf("ratio chorus / per-tensor memcpy bandwidth: %.2f\n",
              per_tensor.device_ms / chorus.device_ms);
  std::printf("ratio chorus / span memcpy bandwidth:       %.2f (target >= 0.8)\n", ratio_span);
  std::printf("ratio back to back:                         %.2f\n",
              span_free.device_ms / chorus_free.device_ms);
  // One line for scripts (scripts/gpu-check.sh): bandwidths in GB/s, ratios of bandwidth,
  // host enqueue time per pack+unpack in microseconds; gated=0 if the device times include
  // the host's enqueueing.
  std::printf(
      "RESULT tensors=%d floats=%lld chorus_gbs=%.1f memcpy_gbs=%.1f span_gbs=%.1f "
      "ratio_memcpy=%.3f ratio_span=%.3f ratio_back_to_back=%.3f chorus_host_us=%.1f "
      "span_host_us=%.1f gated=%d\n",
      tensors, static_cast<long long>(count), gbs(chorus), gbs(per_tensor), gbs(span_copy),
      per_tensor.device_ms / chorus.device_ms, ratio_span,
      span_free.device_ms / chorus_free.device_ms, chorus.host_us, span_copy.host_us,
      chorus.gated && span_copy.gated ? 1 : 0);
  for (void* p : srcs) BENCH_CUDA(cudaFree(p));
  BENCH_CUDA(cudaFree(fusion));
  BENCH_CUDA(cudaFree(span));
  BENCH_CUDA(cudaStreamDestroy(s));
  return 0;
}
