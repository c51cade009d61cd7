// The batched copy-and-scale kernel behind BatchedCopy (cuda_fusion.h). One launch covers
// every tensor of a fusion batch: each item gets a run of blocks, and a block finds its
// item by binary search over the items' first block numbers.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/cuda_check.h"
#include "kernels/cuda_fusion.h"

namespace chorus::gpu {
namespace {

constexpr int kThreads = 256;
// A plain copy keeps kUnroll 16-byte loads in flight per thread before it stores: one load
// at a time leaves a third of the bandwidth of a device-to-device copy unused. A block
// copies kCopyChunk bytes: one pass of its threads. A scaled copy takes kScaleChunk
// elements per block: enough work per block to hide the search, small enough that a batch
// of small tensors spreads.
constexpr int kUnroll = 8;
constexpr int64_t kCopyChunk = static_cast<int64_t>(kUnroll) * kThreads * 16;
constexpr int64_t kScaleChunk = kThreads * 8;

struct Descriptor {
  const void* src;
  void* dst;
  int64_t count;        // bytes (plain copy) or elements (scaled)
  int64_t first_block;  // the item's first block in the grid
};

// Where a kernel finds its descriptors. A batch of up to kInlineLarge items travels inside
// the kernel's parameters (CUDA 12.1 and later take up to 32764 bytes of them): nothing to
// upload, no extra operation on the stream. Small batches use the small block, whose launch
// copies less. A larger batch is read from a device slot uploaded just before the launch.
// Both are __grid_constant__ so that indexing them does not copy the parameter block into
// every thread's local memory.
constexpr int kInlineSmall = 64;    // 2 KiB
constexpr int kInlineLarge = 1016;  // 32 KiB, inside the 32764-byte limit
template <int N>
struct InlineItems {
  Descriptor d[N];
  int n;
  __device__ const Descriptor& operator[](int i) const { return d[i]; }
};
static_assert(sizeof(InlineItems<kInlineLarge>) <= 32764, "kernel parameters too large");
struct DeviceItems {
  const Descriptor* d;
  int n;
  __device__ const Descriptor& operator[](int i) const { return d[i]; }
};

// The item that owns `block` of `blocks`. The first guess is right when the items are the
// same size (a model's many equal layers, a benchmark's batch): two loads, both issued at
// once. Otherwise a binary search over the side of the guess the block lies on.
template <class Items>
__device__ int find_item(const Items& d, int n, int64_t block, int64_t blocks) {
  const int guess = static_cast<int>(block * n / blocks);
  const bool after_start = d[guess].first_block <= block;
  const bool before_next = guess + 1 == n || d[guess + 1].first_block > block;
  if (after_start && before_next) return guess;
  int lo = after_start ? guess + 1 : 0;
  int hi = after_start ? n - 1 : guess - 1;
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
__device__ void copy_words(const char* __restrict__ src, char* __restrict__ dst, int64_t begin,
                           int64_t end) {
  const W* s = reinterpret_cast<const W*>(src + begin);
  W* d = reinterpret_cast<W*>(dst + begin);
  const int64_t words = (end - begin) / static_cast<int64_t>(sizeof(W));
  const int64_t stride = blockDim.x;
  for (int64_t base = threadIdx.x; base < words; base += kUnroll * stride) {
    W r[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      if (base + k * stride < words) r[k] = s[base + k * stride];
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      if (base + k * stride < words) d[base + k * stride] = r[k];
    }
  }
  for (int64_t i = begin + words * static_cast<int64_t>(sizeof(W)) + threadIdx.x; i < end;
       i += blockDim.x) {
    dst[i] = src[i];
  }
}

// This block's part of its item: the item, and [begin, end) in the item's units, `Chunk`
// of them per block.
struct Part {
  Descriptor d;
  int64_t begin;
  int64_t end;
};
template <int64_t Chunk, class Items>
__device__ Part this_blocks_part(const Items& items) {
  const int64_t block = blockIdx.x;
  const Descriptor d = items[find_item(items, items.n, block, gridDim.x)];
  const int64_t begin = (block - d.first_block) * Chunk;
  return {d, begin, begin + Chunk < d.count ? begin + Chunk : d.count};
}

template <class Items>
__global__ void batched_copy_kernel(const __grid_constant__ Items items) {
  const auto [d, begin, end] = this_blocks_part<kCopyChunk>(items);
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
    // As the CPU kernels: exact division when the factor is 1, otherwise the float64
    // product truncated toward zero.
    if (factor == 1.0) return divisor > 1 ? static_cast<T>(static_cast<int64_t>(x) / divisor) : x;
    return static_cast<T>(kernels::integer_product(x, factor / static_cast<double>(divisor)));
  }
};

template <class T, class S, class Items>
__global__ void batched_scale_kernel(const __grid_constant__ Items items, S scale) {
  const auto [d, begin, end] = this_blocks_part<kScaleChunk>(items);
  const T* src = static_cast<const T*>(d.src);
  T* dst = static_cast<T*>(d.dst);
  // All loads before the stores, as in copy_words; in place (src == dst) each thread reads
  // only the elements it then writes.
  constexpr int kPerThread = static_cast<int>(kScaleChunk / kThreads);
  T r[kPerThread];
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int64_t i = begin + threadIdx.x + static_cast<int64_t>(k) * kThreads;
    if (i < end) r[k] = src[i];
  }
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int64_t i = begin + threadIdx.x + static_cast<int64_t>(k) * kThreads;
    if (i < end) dst[i] = scale(r[k]);
  }
}

template <class T, class Items>
Status launch_scaled(const Items& items, int64_t blocks, kernels::Scale scale,
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
  batched_scale_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(items, s);
  CHORUS_CUDA_CHECK(cudaGetLastError());
  return {};
}

template <class Items>
Status launch_kernel(const Items& items, int64_t blocks, bool plain, DataType dtype,
                     kernels::Scale scale, cudaStream_t stream) {
  if (plain) {
    batched_copy_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(items);
    CHORUS_CUDA_CHECK(cudaGetLastError());
    return {};
  }
  switch (dtype) {
    case DataType::kUInt8: return launch_scaled<uint8_t>(items, blocks, scale, stream);
    case DataType::kInt8: return launch_scaled<int8_t>(items, blocks, scale, stream);
    case DataType::kInt16: return launch_scaled<int16_t>(items, blocks, scale, stream);
    case DataType::kInt32: return launch_scaled<int32_t>(items, blocks, scale, stream);
    case DataType::kInt64: return launch_scaled<int64_t>(items, blocks, scale, stream);
    case DataType::kFloat16: return launch_scaled<__half>(items, blocks, scale, stream);
    case DataType::kBFloat16: return launch_scaled<__nv_bfloat16>(items, blocks, scale, stream);
    case DataType::kFloat32: return launch_scaled<float>(items, blocks, scale, stream);
    case DataType::kFloat64: return launch_scaled<double>(items, blocks, scale, stream);
  }
  return invalid_argument("batched copy: unknown dtype");
}

}  // namespace

// The slot ring: a batch too large for the parameters writes its descriptors into the next
// slot's pinned memory, uploads them on the stream and records the slot's event. Before a
// slot is rewritten its previous upload must have finished; with kSlots slots that upload
// is kSlots launches old, of a batch that has completed (cuda_fusion.h), so the wait is
// normally already over, and when it is not, the event's blocking sync puts the background
// thread to sleep instead of spinning a core.
struct BatchedCopy::Slot {
  Descriptor* host = nullptr;    // pinned
  Descriptor* device = nullptr;  // device copy the kernel reads
  std::size_t capacity = 0;      // descriptors
  cudaEvent_t uploaded = nullptr;
  bool pending = false;  // an upload was recorded on `uploaded`
};

StatusOr<std::unique_ptr<BatchedCopy>> BatchedCopy::create(int device) {
  std::unique_ptr<BatchedCopy> c(new BatchedCopy());
  c->device_ = device;
  CHORUS_CUDA_CHECK(cudaSetDevice(device));
  c->slots_.resize(kSlots);
  for (Slot& slot : c->slots_) {
    CHORUS_CUDA_CHECK(
        cudaEventCreateWithFlags(&slot.uploaded, cudaEventBlockingSync | cudaEventDisableTiming));
  }
  return std::move(c);
}

BatchedCopy::~BatchedCopy() {
  // Called with the stream idle or abandoned (GpuContext); an upload still queued would
  // read the pinned memory, so the events are waited for only when the device is healthy.
  for (Slot& slot : slots_) {
    if (slot.uploaded) {
      if (slot.pending && cudaEventQuery(slot.uploaded) == cudaErrorNotReady) {
        cudaEventSynchronize(slot.uploaded);
      }
      cudaEventDestroy(slot.uploaded);
    }
    if (slot.host) cudaFreeHost(slot.host);
    if (slot.device) cudaFree(slot.device);
  }
  for (void* p : retired_host_) cudaFreeHost(p);
  for (void* p : retired_device_) cudaFree(p);
}

StatusOr<BatchedCopy::Slot*> BatchedCopy::next_slot(std::size_t items) {
  Slot& slot = slots_[next_];
  next_ = (next_ + 1) % slots_.size();
  if (slot.pending) CHORUS_CUDA_CHECK(cudaEventSynchronize(slot.uploaded));
  slot.pending = false;
  if (items > slot.capacity) {
    std::size_t want = slot.capacity == 0 ? 2 * kInlineLarge : slot.capacity;
    while (want < items) want *= 2;
    if (slot.host) retired_host_.push_back(slot.host);
    if (slot.device) retired_device_.push_back(slot.device);
    slot.host = nullptr;
    slot.device = nullptr;
    slot.capacity = 0;
    CHORUS_CUDA_CHECK(
        cudaMallocHost(reinterpret_cast<void**>(&slot.host), want * sizeof(Descriptor)));
    CHORUS_CUDA_CHECK(
        cudaMalloc(reinterpret_cast<void**>(&slot.device), want * sizeof(Descriptor)));
    slot.capacity = want;
  }
  return &slot;
}

Status BatchedCopy::launch(const std::vector<CopyItem>& items, DataType dtype, kernels::Scale scale,
                           void* stream_ptr) {
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  if (items.empty()) return {};
  const bool plain = scale.is_identity();
  const int64_t esz = static_cast<int64_t>(dtype_size(dtype));
  std::size_t live = 0;
  for (const CopyItem& it : items) live += it.count > 0 && !(plain && it.src == it.dst) ? 1 : 0;
  if (live == 0) return {};
  // The descriptors in item order, and the grid's size.
  auto fill = [&](Descriptor* d) {
    int64_t blocks = 0;
    int n = 0;
    for (const CopyItem& it : items) {
      if (it.count <= 0 || (plain && it.src == it.dst)) continue;
      const int64_t count = plain ? it.count * esz : it.count;
      const int64_t chunk = plain ? kCopyChunk : kScaleChunk;
      d[n++] = Descriptor{it.src, it.dst, count, blocks};
      blocks += (count + chunk - 1) / chunk;
    }
    return blocks;
  };
  const int n = static_cast<int>(live);
  if (live <= static_cast<std::size_t>(kInlineSmall)) {
    InlineItems<kInlineSmall> in;
    in.n = n;
    const int64_t blocks = fill(in.d);
    return launch_kernel(in, blocks, plain, dtype, scale, stream);
  }
  if (live <= static_cast<std::size_t>(kInlineLarge)) {
    InlineItems<kInlineLarge> in;
    in.n = n;
    const int64_t blocks = fill(in.d);
    return launch_kernel(in, blocks, plain, dtype, scale, stream);
  }
  StatusOr<Slot*> got = next_slot(live);
  if (!got.ok()) return got.status();
  Slot* slot = *got;
  const int64_t blocks = fill(slot->host);
  CHORUS_CUDA_CHECK(cudaMemcpyAsync(slot->device, slot->host,
                                    static_cast<std::size_t>(n) * sizeof(Descriptor),
                                    cudaMemcpyHostToDevice, stream));
  CHORUS_CUDA_CHECK(cudaEventRecord(slot->uploaded, stream));
  slot->pending = true;
  return launch_kernel(DeviceItems{slot->device, n}, blocks, plain, dtype, scale, stream);
}

namespace {

template <class From, class To>
__global__ void convert_kernel(const From* src, To* dst, int64_t count) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += stride) {
    dst[i] = static_cast<To>(src[i]);
  }
}

template <class From, class To>
Status convert(const void* src, void* dst, int64_t count, void* stream) {
  if (count <= 0) return {};
  const int64_t blocks = std::min<int64_t>((count + kScaleChunk - 1) / kScaleChunk, 65535);
  convert_kernel<From, To>
      <<<static_cast<unsigned>(blocks), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
          static_cast<const From*>(src), static_cast<To*>(dst), count);
  CHORUS_CUDA_CHECK(cudaGetLastError());
  return {};
}

}  // namespace

Status widen_int16(const void* src, void* dst, int64_t count, void* stream) {
  return convert<int16_t, int32_t>(src, dst, count, stream);
}

Status narrow_to_int16(const void* src, void* dst, int64_t count, void* stream) {
  // int32 to int16 keeps the low 16 bits (modular since C++20, and what the GPU does).
  return convert<int32_t, int16_t>(src, dst, count, stream);
}

Status zero_fill(void* dst, std::size_t bytes, void* stream) {
  if (bytes == 0) return {};
  CHORUS_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, static_cast<cudaStream_t>(stream)));
  return {};
}

}  // namespace chorus::gpu
