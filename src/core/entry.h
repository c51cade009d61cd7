#pragma once
// One tensor of one collective, as this rank's runtime holds it from enqueue to completion.
// Owned by the runtime's tables; touched only by the thread that runs the cycle (the
// background thread, or a waiting trainer thread: core/runtime.h) after the submitting
// thread handed it over.

#include <chrono>
#include <memory>

#include "chorus/options.h"
#include "core/handle_state.h"
#include "core/message.h"

namespace chorus {

struct Entry {
  Request request;
  int32_t set_id = 0;
  /// The caller's tensors without their shape (the request holds it): data, dtype, device
  /// and readiness.
  TensorRef input;
  TensorRef output;          ///< allreduce and broadcast: the caller's; else set at execution
  OutputAllocator allocate;  ///< optional (allgather, alltoall, reducescatter)
  std::shared_ptr<detail::HandleState> handle;
  std::chrono::steady_clock::time_point enqueued;
  /// CUDA tensors: the cudaEvent_t (held as the pointer) after which the input may be read
  /// (gpu_event.h); null for host tensors.
  std::shared_ptr<void> ready_event;
};

}  // namespace chorus
