#pragma once
// Where one batch's tensors live, for each op's execution (core/ops/) and the executor's
// fused allreduce (core/executor.cc): the few steps that differ between host memory and a
// CUDA device. The host's steps run on the calling thread and are done when they return; a
// device's are enqueued on the set's stream (collectives/gpu_context.h) and done when
// DeferredBatches says so.
//
// Failures: a step's Status is this rank's own failure (the executor still makes the
// backend call, so the other members never wait for this rank); a pointer that cannot be
// had (device memory) is returned as a failure of the collective.

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "chorus/status.h"
#include "collectives/adasum.h"
#include "collectives/backend.h"
#include "core/entry.h"
#include "kernels/cuda_fusion.h"
#include "kernels/reduce_kernels.h"
#include "protocol/message.h"

namespace chorus {

/// How a batch is named in its failures: "allreduce 'grad.w'", followed by "and N more fused
/// tensors" when `tensors` > 1.
std::string describe_batch(const Response& first, std::size_t tensors);

/// The batches of a memory whose steps are only enqueued (a device's): each completes once
/// its work is done, in launch order, while later batches are launched.
class DeferredBatches {
 public:
  using Done = std::function<Status(const Status&)>;
  virtual ~DeferredBatches() = default;

  /// Called when a batch's steps have all been made, with `s`, the backend's result (or
  /// memory that could not be had). With `s` ok the batch is left in flight; `done` is
  /// called with its final Status once its work is done, and what `done` returns is the
  /// batch's Status for the runtime (non-ok stops it). After a failure (`s`, or a failed
  /// wait), every batch still in flight, this one included, gets the failure only after the
  /// device work on its buffers has ended (the stream drained after the communicators were
  /// aborted): a caller may free or reuse its tensors as soon as its handle completes.
  /// `first` and `tensors` name the batch in messages. Returns the first failure met, else
  /// OK.
  virtual Status complete(const Response& first, std::size_t tensors, Status s, Done done) = 0;
  /// Completes every batch in flight, in order; returns the first failure.
  virtual Status settle() = 0;
  /// After a failure elsewhere (`why`) that stops the runtime, nothing in flight: ends what
  /// the backend may still wait for (communicators aborted, stream drained).
  virtual void abandon(const Status& why) = 0;
};

class TensorMemory {
 public:
  virtual ~TensorMemory() = default;

  /// The set's backend that runs `c` on `dtype` in this memory (BackendChoice).
  virtual Backend& backend(Collective c, DataType dtype) = 0;
  /// Orders what follows after the producer's last write of `e`'s input (CUDA: the
  /// stream waits on the entry's ready event; host: nothing to wait for).
  virtual Status wait_ready(const Entry& e) = 0;
  /// Orders what follows after the allocation of `out`, an output the caller's allocator
  /// just made (CUDA: after out.ready_event, else after the work queued so far on
  /// out.ready_stream, the stream the allocator handed the block out for; host: nothing).
  virtual Status wait_allocated(const TensorRef& out) = 0;
  /// dst = scale(src) for every item (one batched kernel on a device).
  virtual Status copy(const std::vector<gpu::CopyItem>& items, DataType dtype,
                      kernels::Scale scale) = 0;
  /// Zeros `bytes` bytes at `dst`.
  virtual Status zero(void* dst, std::size_t bytes) = 0;
  /// recv = scale(Adasum of `send` over the set), tensor by tensor (collectives/adasum.h),
  /// on the set's host backends: a device's buffers are staged through host memory.
  virtual Status adasum(const void* send, void* recv, const std::vector<AdasumTensor>& tensors,
                        DataType dtype, kernels::Scale scale) = 0;
  /// `bytes` zeros (a joined rank's contribution), until the next call.
  virtual StatusOr<char*> zeros(std::size_t bytes) = 0;
  /// Scratch of `bytes` bytes, until the next call.
  virtual StatusOr<char*> scratch(std::size_t bytes) = 0;
  /// The fusion buffer, of fusion_capacity() bytes.
  virtual char* fusion_buffer() = 0;
  virtual std::size_t fusion_capacity() const = 0;
  /// Where a fused batch's tensors start: multiples of this (`element`: the dtype's size).
  virtual std::size_t fusion_alignment(std::size_t element) const = 0;
  /// True if the fused allreduce's average and postscale go into the unpack (a device's
  /// batched copy), false if the backend's reduction applies them (the host's kernels).
  virtual bool scales_on_unpack() const = 0;
  /// True if a step's time is known on the host when it returns; false where the work is
  /// only enqueued, and the timeline then records the batch's whole span as one phase.
  virtual bool timed_on_host() const = 0;
  /// Where this memory's batches complete later (a device's: its steps are only enqueued);
  /// null where a batch is done when its steps return (the host's): it completes at once.
  virtual DeferredBatches* deferred() = 0;
};

}  // namespace chorus
