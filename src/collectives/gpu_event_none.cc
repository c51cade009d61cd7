// gpu_event.h in a build without CUDA: no device, and no event to capture (the API refuses
// CUDA tensors there before it would ask).
#include "collectives/gpu_event.h"

namespace chorus::gpu {

StatusOr<std::shared_ptr<void>> capture_ready_event(int, void*, void*) {
  return failed_precondition("this build of Chorus has no CUDA");
}

int device_count() { return 0; }

}  // namespace chorus::gpu
