// The batched copy-and-scale kernel behind BatchedCopy (cuda_fusion.h). One launch covers
// every tensor of a fusion batch: each item gets a run of blocks, and a block finds its
// item by binary search over the items' first block numbers.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "collectives/cuda_check.h"
#include "fusion/cuda_fusion.h"

namespace chorus::gpu {
namespace {

constexpr int kThreads = 256;
// Bytes per block of a plain copy, and elements per block of a scaled copy: enough work
// per block to hide the search, small enough that a batch of small tensors spreads.
constexpr int64_t kCopyChunk = 16 * kThreads * 4;
constexpr int64_t kScaleChunk = kThreads * 8;

struct Descriptor {
  const void* src;
  void* dst;
  int64_t count;        // bytes (plain copy) or elements (scaled)
  int64_t first_block;  // the item's first block in the grid
};

__device__ int find_item(const Descriptor* d, int n, int64_t block) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (d[mid].first_block <= block) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

template <class W>
__device__ void copy_words(const char* src, char* dst, int64_t begin, int64_t end) {
  const W* s = reinterpret_cast<const W*>(src + begin);
  W* d = reinterpret_cast<W*>(dst + begin);
  const int64_t words = (end - begin) / static_cast<int64_t>(sizeof(W));
  for (int64_t i = threadIdx.x; i < words; i += blockDim.x) d[i] = s[i];
  for (int64_t i = begin + words * static_cast<int64_t>(sizeof(W)) + threadIdx.x; i < end;
       i += blockDim.x) {
    dst[i] = src[i];
  }
}

__global__ void batched_copy_kernel(const Descriptor* items, int n) {
  const int64_t block = blockIdx.x;
  const Descriptor d = items[find_item(items, n, block)];
  const int64_t begin = (block - d.first_block) * kCopyChunk;
  const int64_t end = begin + kCopyChunk < d.count ? begin + kCopyChunk : d.count;
  const char* src = static_cast<const char*>(d.src);
  char* dst = static_cast<char*>(d.dst);
  const auto bits = reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst);
  // Chunks start at multiples of 16 from the item's start, so the item's alignment is
  // every chunk's alignment.
  if (bits % 16 == 0) {
    copy_words<uint4>(src, dst, begin, end);
  } else if (bits % 4 == 0) {
    copy_words<uint32_t>(src, dst, begin, end);
  } else {
    copy_words<char>(src, dst, begin, end);
  }
}

// Element conversions to and from the accumulation type, as the CPU kernels do.
template <class T>
struct Codec {
  using Acc = T;
  __device__ static Acc load(T x) { return x; }
  __device__ static T store(Acc a) { return a; }
};
template <>
struct Codec<__half> {
  using Acc = float;
  __device__ static float load(__half x) { return __half2float(x); }
  __device__ static __half store(float a) { return __float2half_rn(a); }
};
template <>
struct Codec<__nv_bfloat16> {
  using Acc = float;
  __device__ static float load(__nv_bfloat16 x) { return __bfloat162float(x); }
  __device__ static __nv_bfloat16 store(float a) { return __float2bfloat16_rn(a); }
};

template <class T, bool kFloating>
struct Scaler;
template <class T>
struct Scaler<T, true> {
  using Acc = typename Codec<T>::Acc;
  Acc multiplier;
  __device__ T operator()(T x) const { return Codec<T>::store(Codec<T>::load(x) * multiplier); }
};
template <class T>
struct Scaler<T, false> {
  int64_t divisor;
  double factor;
  __device__ T operator()(T x) const {
    if (divisor > 1) x = static_cast<T>(static_cast<int64_t>(x) / divisor);
    if (factor != 1.0) x = static_cast<T>(llround(static_cast<double>(x) * factor));
    return x;
  }
};

template <class T, class S>
__global__ void batched_scale_kernel(const Descriptor* items, int n, S scale) {
  const int64_t block = blockIdx.x;
  const Descriptor d = items[find_item(items, n, block)];
  const int64_t begin = (block - d.first_block) * kScaleChunk;
  const int64_t end = begin + kScaleChunk < d.count ? begin + kScaleChunk : d.count;
  const T* src = static_cast<const T*>(d.src);
  T* dst = static_cast<T*>(d.dst);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) dst[i] = scale(src[i]);
}

template <class T>
Status launch_scaled(const Descriptor* items, int n, int64_t blocks, kernels::Scale scale,
                     cudaStream_t stream) {
  constexpr bool kFloating = !std::is_integral_v<T>;
  Scaler<T, kFloating> s;
  if constexpr (kFloating) {
    s.multiplier =
        static_cast<typename Codec<T>::Acc>(scale.factor / static_cast<double>(scale.divisor));
  } else {
    s.divisor = scale.divisor;
    s.factor = scale.factor;
  }
  batched_scale_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(items, n, s);
  CHORUS_CUDA_CHECK(cudaGetLastError());
  return {};
}

}  // namespace

StatusOr<std::unique_ptr<BatchedCopy>> BatchedCopy::create(int device) {
  std::unique_ptr<BatchedCopy> c(new BatchedCopy());
  c->device_ = device;
  CHORUS_CUDA_CHECK(cudaSetDevice(device));
  cudaEvent_t ev = nullptr;
  CHORUS_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  c->uploaded_ = ev;
  if (Status s = c->reserve(256); !s.ok()) return s;
  return std::move(c);
}

BatchedCopy::~BatchedCopy() {
  if (uploaded_) {
    cudaEventSynchronize(static_cast<cudaEvent_t>(uploaded_));
    cudaEventDestroy(static_cast<cudaEvent_t>(uploaded_));
  }
  if (host_) cudaFreeHost(host_);
  if (device_descriptors_) cudaFree(device_descriptors_);
}

Status BatchedCopy::reserve(std::size_t items) {
  if (items <= capacity_) return {};
  std::size_t want = capacity_ == 0 ? items : capacity_;
  while (want < items) want *= 2;
  // The previous upload may still read the old staging.
  CHORUS_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(uploaded_)));
  if (host_) CHORUS_CUDA_CHECK(cudaFreeHost(host_));
  if (device_descriptors_) CHORUS_CUDA_CHECK(cudaFree(device_descriptors_));
  host_ = nullptr;
  device_descriptors_ = nullptr;
  capacity_ = 0;
  CHORUS_CUDA_CHECK(cudaMallocHost(&host_, want * sizeof(Descriptor)));
  CHORUS_CUDA_CHECK(cudaMalloc(&device_descriptors_, want * sizeof(Descriptor)));
  capacity_ = want;
  return {};
}

Status BatchedCopy::launch(const std::vector<CopyItem>& items, DataType dtype, kernels::Scale scale,
                           void* stream_ptr) {
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  if (items.empty()) return {};
  if (Status s = reserve(items.size()); !s.ok()) return s;
  // The pinned descriptors are rewritten below: the last upload must have read them.
  CHORUS_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(uploaded_)));
  const bool plain = scale.is_identity();
  const int64_t esz = static_cast<int64_t>(dtype_size(dtype));
  auto* d = static_cast<Descriptor*>(host_);
  int n = 0;
  int64_t blocks = 0;
  for (const CopyItem& it : items) {
    if (it.count <= 0 || (plain && it.src == it.dst)) continue;
    const int64_t count = plain ? it.count * esz : it.count;
    const int64_t chunk = plain ? kCopyChunk : kScaleChunk;
    d[n++] = Descriptor{it.src, it.dst, count, blocks};
    blocks += (count + chunk - 1) / chunk;
  }
  if (n == 0) return {};
  CHORUS_CUDA_CHECK(cudaMemcpyAsync(device_descriptors_, host_,
                                    static_cast<std::size_t>(n) * sizeof(Descriptor),
                                    cudaMemcpyHostToDevice, stream));
  CHORUS_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(uploaded_), stream));
  auto* dev = static_cast<const Descriptor*>(device_descriptors_);
  if (plain) {
    batched_copy_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(dev, n);
    CHORUS_CUDA_CHECK(cudaGetLastError());
    return {};
  }
  switch (dtype) {
    case DataType::kUInt8: return launch_scaled<uint8_t>(dev, n, blocks, scale, stream);
    case DataType::kInt8: return launch_scaled<int8_t>(dev, n, blocks, scale, stream);
    case DataType::kInt32: return launch_scaled<int32_t>(dev, n, blocks, scale, stream);
    case DataType::kInt64: return launch_scaled<int64_t>(dev, n, blocks, scale, stream);
    case DataType::kFloat16: return launch_scaled<__half>(dev, n, blocks, scale, stream);
    case DataType::kBFloat16: return launch_scaled<__nv_bfloat16>(dev, n, blocks, scale, stream);
    case DataType::kFloat32: return launch_scaled<float>(dev, n, blocks, scale, stream);
    case DataType::kFloat64: return launch_scaled<double>(dev, n, blocks, scale, stream);
  }
  return invalid_argument("batched copy: unknown dtype");
}

Status zero_fill(void* dst, std::size_t bytes, void* stream) {
  if (bytes == 0) return {};
  CHORUS_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, static_cast<cudaStream_t>(stream)));
  return {};
}

}  // namespace chorus::gpu
