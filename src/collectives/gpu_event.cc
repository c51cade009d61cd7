#include "collectives/gpu_event.h"

#include <cuda_runtime_api.h>

#include "kernels/cuda_check.h"

namespace chorus::gpu {
namespace {

// Restores the trainer thread's current device however capture_ready_event returns.
class DeviceGuard {
 public:
  DeviceGuard() { ok_ = cudaGetDevice(&saved_) == cudaSuccess; }
  ~DeviceGuard() {
    if (ok_) cudaSetDevice(saved_);
  }

 private:
  int saved_ = 0;
  bool ok_ = false;
};

Status record(int device, cudaStream_t stream, cudaEvent_t* out) {
  DeviceGuard guard;
  CHORUS_CUDA_CHECK(cudaSetDevice(device));
  CHORUS_CUDA_CHECK(cudaEventCreateWithFlags(out, cudaEventDisableTiming));
  cudaError_t rc = cudaEventRecord(*out, stream);
  if (rc != cudaSuccess) {
    cudaEventDestroy(*out);
    return cuda_detail::cuda_status(rc, "cudaEventRecord(ready, ready_stream)", __FILE__, __LINE__);
  }
  return {};
}

}  // namespace

StatusOr<std::shared_ptr<void>> capture_ready_event(int device, void* ready_event,
                                                    void* ready_stream) {
  if (ready_event) return std::shared_ptr<void>(ready_event, [](void*) {});
  cudaEvent_t ev = nullptr;
  if (Status s = record(device, static_cast<cudaStream_t>(ready_stream), &ev); !s.ok()) {
    return s;
  }
  return std::shared_ptr<void>(ev, [](void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); });
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

}  // namespace chorus::gpu
