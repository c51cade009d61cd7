#pragma once
// Batched copies between tensors and a fusion buffer in GPU memory: one kernel launch for
// any number of tensors (not one cudaMemcpy per tensor), with the scaling of prescale,
// average and postscale folded in. No CUDA header here: streams travel as void*
// (cudaStream_t), so the executor and the tests include it freely.
//
// Scaling has the CPU kernels' semantics (kernels::Scale, reduce_kernels.h), bit for bit:
// floating types multiply by (factor / divisor) taken in the accumulation type (float32
// for 16-bit floats, rounded once to nearest-even when stored); integers divide truncating
// toward zero, then llround(x * factor), wrapping to the type.
//
// Thread contract: one BatchedCopy per device and executor, used by the background thread.

#include <cstdint>
#include <memory>
#include <vector>

#include "chorus/status.h"
#include "chorus/types.h"
#include "collectives/reduce_kernels.h"

namespace chorus::gpu {

/// dst[i] = scale(src[i]) for i < count (elements). src and dst are device pointers aligned
/// to the element size; any other alignment is fine. src may equal dst; other overlaps are
/// not allowed.
struct CopyItem {
  const void* src = nullptr;
  void* dst = nullptr;
  int64_t count = 0;
};

class BatchedCopy {
 public:
  /// Allocates the descriptor staging (pinned host memory and a device array) on `device`;
  /// they grow with the largest batch and are reused.
  static StatusOr<std::unique_ptr<BatchedCopy>> create(int device);
  ~BatchedCopy();
  BatchedCopy(const BatchedCopy&) = delete;
  BatchedCopy& operator=(const BatchedCopy&) = delete;

  /// Enqueues one kernel on `stream` (a cudaStream_t) that copies and scales every item.
  /// Returns once enqueued; the copies run in stream order. The descriptors are uploaded
  /// from pinned memory on the same stream, so `items` may be reused at once.
  Status launch(const std::vector<CopyItem>& items, DataType dtype, kernels::Scale scale,
                void* stream);

 private:
  BatchedCopy() = default;
  Status reserve(std::size_t items);

  int device_ = 0;
  std::size_t capacity_ = 0;
  void* host_ = nullptr;  // pinned descriptors
  void* device_descriptors_ = nullptr;
  void* uploaded_ = nullptr;  // cudaEvent_t: the last upload finished reading host_
};

/// Fills `bytes` bytes at `dst` (device) with zeros on `stream`.
Status zero_fill(void* dst, std::size_t bytes, void* stream);

}  // namespace chorus::gpu
