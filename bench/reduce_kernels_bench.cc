// Throughput of the CPU reduction kernels on the allreduce hot path: dst = srcs[0] op ... op
// srcs[n-1], in place into srcs[0] as the ring's reduce step does it.
//
// bytes_per_second counts memory traffic: every source read once plus dst written once,
// (nsrcs + 1) * buffer bytes per call. The argument is the size of one buffer in bytes.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "chorus/types.h"
#include "kernels/reduce_kernels.h"
#include "kernels/reduce_kernels_internal.h"

namespace chorus::kernels {
namespace {

using ReduceFn = void (*)(void*, const void* const*, int, int64_t, DataType, ReduceOp, Scale);

// Small positive values: in-place summation over many iterations only grows them, so no
// subnormal (slow-path) arithmetic ever happens.
std::vector<uint8_t> filled_buffer(DataType dtype, int64_t count) {
  std::vector<uint8_t> buf(static_cast<size_t>(count) * dtype_size(dtype));
  for (int64_t i = 0; i < count; ++i) {
    const float value = 0.001f * static_cast<float>(1 + i % 7);
    switch (dtype) {
      case DataType::kFloat16:
        reinterpret_cast<uint16_t*>(buf.data())[i] = float_to_half(value);
        break;
      case DataType::kBFloat16:
        reinterpret_cast<uint16_t*>(buf.data())[i] = float_to_bfloat16(value);
        break;
      case DataType::kFloat32: reinterpret_cast<float*>(buf.data())[i] = value; break;
      default: break;  // only the floating types are benchmarked
    }
  }
  return buf;
}

void run_reduce(benchmark::State& state, ReduceFn fn, DataType dtype, int nsrcs) {
  const int64_t bytes = state.range(0);
  const int64_t count = bytes / static_cast<int64_t>(dtype_size(dtype));
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<const void*> srcs;
  for (int k = 0; k < nsrcs; ++k) {
    bufs.push_back(filled_buffer(dtype, count));
    srcs.push_back(bufs.back().data());
  }
  void* dst = bufs[0].data();
  for (auto _ : state) {
    fn(dst, srcs.data(), nsrcs, count, dtype, ReduceOp::kSum, Scale{});
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * (nsrcs + 1) * bytes);
}

// What the library runs: the dispatcher (AVX2 + F16C where the CPU has them).
void BM_ReduceOrdered(benchmark::State& state, DataType dtype, int nsrcs) {
  run_reduce(state, &reduce_ordered, dtype, nsrcs);
}

// The baseline-ISA build (SSE2 on x86-64, software float16), for comparison.
void BM_ReduceOrderedPortable(benchmark::State& state, DataType dtype, int nsrcs) {
  run_reduce(state, &internal::reduce_ordered_portable, dtype, nsrcs);
}

constexpr int64_t kMiB = int64_t{1} << 20;

#define CHORUS_REDUCE_BENCH(fn, name, dtype, nsrcs) \
  BENCHMARK_CAPTURE(fn, name, dtype, nsrcs)->Arg(1 * kMiB)->Arg(16 * kMiB)

CHORUS_REDUCE_BENCH(BM_ReduceOrdered, float32_2src, DataType::kFloat32, 2);
CHORUS_REDUCE_BENCH(BM_ReduceOrdered, float32_4src, DataType::kFloat32, 4);
CHORUS_REDUCE_BENCH(BM_ReduceOrdered, bfloat16_2src, DataType::kBFloat16, 2);
CHORUS_REDUCE_BENCH(BM_ReduceOrdered, bfloat16_4src, DataType::kBFloat16, 4);
CHORUS_REDUCE_BENCH(BM_ReduceOrdered, float16_2src, DataType::kFloat16, 2);
CHORUS_REDUCE_BENCH(BM_ReduceOrdered, float16_4src, DataType::kFloat16, 4);

CHORUS_REDUCE_BENCH(BM_ReduceOrderedPortable, float32_2src, DataType::kFloat32, 2);
CHORUS_REDUCE_BENCH(BM_ReduceOrderedPortable, bfloat16_2src, DataType::kBFloat16, 2);
CHORUS_REDUCE_BENCH(BM_ReduceOrderedPortable, float16_2src, DataType::kFloat16, 2);

}  // namespace
}  // namespace chorus::kernels
