#pragma once
// One tensor of one collective, as this rank's runtime holds it from enqueue to completion.
// Owned by the runtime's tables; touched only by the thread that runs the cycle (the
// background thread, or a waiting trainer thread: core/cycle.h) after the submitting
// thread handed it over.

#include <chrono>
#include <memory>

#include "chorus/options.h"
#include "core/handle_state.h"
#include "protocol/message.h"

namespace chorus {

/// Where a caller's tensor lives, without its shape (the request holds that): what the
/// executor reads and writes. Apart from TensorRef so that nothing can ask it for a size.
struct TensorPlace {
  void* data = nullptr;
  DataType dtype = DataType::kFloat32;
  Device device;
  void* ready_event = nullptr;   ///< CUDA: as TensorRef::ready_event
  void* ready_stream = nullptr;  ///< CUDA: as TensorRef::ready_stream

  static TensorPlace of(const TensorRef& t) {
    return {t.data, t.dtype, t.device, t.ready_event, t.ready_stream};
  }
};

struct Entry {
  Request request;
  int32_t set_id = 0;
  TensorPlace input;
  TensorPlace output;        ///< allreduce and broadcast: the caller's; else set at execution
  OutputAllocator allocate;  ///< optional (allgather, alltoall, reducescatter)
  std::shared_ptr<detail::HandleState> handle;
  std::chrono::steady_clock::time_point enqueued;
  /// CUDA tensors: the cudaEvent_t (held as the pointer) after which the input may be read
  /// (gpu_event.h); null for host tensors.
  std::shared_ptr<void> ready_event;
};

}  // namespace chorus
