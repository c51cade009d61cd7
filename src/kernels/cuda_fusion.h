#pragma once
// Batched copies between tensors and a fusion buffer in GPU memory: one kernel launch for
// any number of tensors (not one cudaMemcpy per tensor), with the scaling of prescale,
// average and postscale folded in. No CUDA header here: streams travel as void*
// (cudaStream_t), so the executor and the tests include it freely.
//
// Scaling has the CPU kernels' semantics (kernels::Scale, reduce_kernels.h), bit for bit:
// floating types multiply by (factor / divisor) taken in the accumulation type (float32
// for 16-bit floats, rounded once to nearest-even when stored); integers divide truncating
// toward zero when the factor is 1, otherwise take x * (factor / divisor) in float64,
// truncated toward zero and wrapped to the type (kernels::integer_product).
//
// Thread contract: one BatchedCopy per device and executor, used by the background thread.

#include <cstdint>
#include <memory>
#include <vector>

#include "chorus/status.h"
#include "chorus/types.h"
#include "kernels/reduce_kernels.h"

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
  /// Prepares launches on `device`. Small batches pass their descriptors in the kernel's
  /// parameters; larger ones use a ring of pinned descriptor slots, allocated on first use,
  /// grown to the largest batch and reused.
  static StatusOr<std::unique_ptr<BatchedCopy>> create(int device);
  ~BatchedCopy();
  BatchedCopy(const BatchedCopy&) = delete;
  BatchedCopy& operator=(const BatchedCopy&) = delete;

  /// Enqueues one kernel on `stream` (a cudaStream_t) that copies and scales every item.
  /// Returns once enqueued; the copies run in stream order, and `items` may be reused at
  /// once. Never waits for the GPU except, for a large batch, for the upload of the batch
  /// that used the same slot kSlots launches ago (a sleeping wait, not a spin).
  Status launch(const std::vector<CopyItem>& items, DataType dtype, kernels::Scale scale,
                void* stream);

  /// Descriptor slots in the ring. A fused batch takes two launches (pack, unpack), so with
  /// at most kSlots / 2 batches on a stream at once (the executor's batches in flight), the
  /// upload a slot waits for belongs to a batch that has completed: that wait never sits
  /// behind a collective that a dead peer holds up.
  static constexpr std::size_t kSlots = 10;

 private:
  struct Slot;  // pinned and device descriptors with the event of their last upload

  BatchedCopy() = default;
  StatusOr<Slot*> next_slot(std::size_t items);

  int device_ = 0;
  std::vector<Slot> slots_;
  std::size_t next_ = 0;
  // Descriptors of slots that grew, freed with the object: freeing them while batches are in
  // flight would wait for the device.
  std::vector<void*> retired_host_;
  std::vector<void*> retired_device_;
};

/// Fills `bytes` bytes at `dst` (device) with zeros on `stream`.
Status zero_fill(void* dst, std::size_t bytes, void* stream);

/// int16 through a library without 16-bit integers (NCCL): `count` elements widened to
/// int32, or narrowed back keeping the low 16 bits. A sum, product, min or max of the
/// widened values, narrowed, equals the int16 reduction with wrap-around. On `stream`.
Status widen_int16(const void* src, void* dst, int64_t count, void* stream);
Status narrow_to_int16(const void* src, void* dst, int64_t count, void* stream);

}  // namespace chorus::gpu
