#pragma once
// The ready event of a CUDA tensor (TensorRef::ready_event / ready_stream, types.h),
// captured on the trainer's thread at enqueue. No CUDA header here.

#include <memory>

#include "chorus/status.h"
#include "chorus/types.h"

namespace chorus::gpu {

/// The cudaEvent_t (as the pointer held) that the background thread orders its reads
/// after: the caller's `ready_event` (borrowed: the deleter does nothing), or an event
/// Chorus records now on `ready_stream` (or stream 0) on `device`, the tensor's (owned:
/// destroyed with the last copy, on `device`). Gives the calling thread back its current
/// device where that device had a context already; a thread that had none (it never chose a
/// device) is left on `device` rather than given a new context on device 0.
StatusOr<std::shared_ptr<void>> capture_ready_event(int device, void* ready_event,
                                                    void* ready_stream);

/// Number of CUDA devices visible to this process (0 when the driver has none).
int device_count();

}  // namespace chorus::gpu
