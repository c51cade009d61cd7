// The executor's device memory in a build without CUDA (executor_gpu.cc otherwise): the API
// refuses CUDA tensors there, so no CUDA response reaches it.
#include "core/executor.h"

namespace chorus {

StatusOr<TensorMemory*> Executor::device_memory(const std::vector<Job>&) {
  return internal_error("a CUDA tensor reached the executor of a build without CUDA");
}

}  // namespace chorus
