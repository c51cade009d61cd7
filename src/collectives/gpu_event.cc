#include "collectives/gpu_event.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "kernels/cuda_check.h"

namespace chorus::gpu {
namespace {

// Whether `device`'s primary context is active in this process (cuDevicePrimaryCtxGetState,
// reached through the runtime, so that Chorus links no driver library). True where it
// cannot tell, so that the caller restores as it always did.
bool primary_context_active(int device) {
  using GetDevice = CUresult(CUDAAPI*)(CUdevice*, int);
  using GetState = CUresult(CUDAAPI*)(CUdevice, unsigned int*, int*);
  struct Driver {
    GetDevice get_device = nullptr;
    GetState get_state = nullptr;
  };
  // Looked up once, never changed: the driver's entry points live as long as the process.
  static const Driver driver = [] {
    auto find = [](const char* symbol) -> void* {
      void* fn = nullptr;
      cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
      const cudaError_t rc =
          cudaGetDriverEntryPointByVersion(symbol, &fn, 12000, cudaEnableDefault, &found);
#else
      const cudaError_t rc = cudaGetDriverEntryPoint(symbol, &fn, cudaEnableDefault, &found);
#endif
      return rc == cudaSuccess && found == cudaDriverEntryPointSuccess ? fn : nullptr;
    };
    return Driver{reinterpret_cast<GetDevice>(find("cuDeviceGet")),
                  reinterpret_cast<GetState>(find("cuDevicePrimaryCtxGetState"))};
  }();
  CUdevice dev{};
  unsigned int flags = 0;
  int active = 0;
  if (!driver.get_device || !driver.get_state || driver.get_device(&dev, device) != CUDA_SUCCESS ||
      driver.get_state(dev, &flags, &active) != CUDA_SUCCESS) {
    return true;
  }
  return active != 0;
}

// Makes `device` current on the calling thread (a trainer's, or whichever drops the last
// copy of an event) for the guard's life, then gives the thread back the device it had,
// only where that device's primary context was active already. Making a device current
// creates its context (CUDA 12 and later), and a thread that never chose a device reads as
// device 0: a plain restore would put a context, hundreds of MB, on GPU 0 for every rank of
// a node. Such a thread keeps `device` current afterwards: a trainer thread that never chose a
// device works on the one its tensors live on.
class DeviceGuard {
 public:
  DeviceGuard() = default;
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ~DeviceGuard() {
    if (restore_) cudaSetDevice(saved_);
  }

  Status enter(int device) {
    int saved = -1;
    if (cudaGetDevice(&saved) == cudaSuccess && saved == device) return {};  // nothing to undo
    if (saved >= 0 && primary_context_active(saved)) {
      saved_ = saved;
      restore_ = true;
    }
    CHORUS_CUDA_CHECK(cudaSetDevice(device));
    return {};
  }

 private:
  int saved_ = 0;
  bool restore_ = false;
};

Status record(int device, cudaStream_t stream, cudaEvent_t* out) {
  DeviceGuard guard;
  if (Status s = guard.enter(device); !s.ok()) return s;
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
  // Destroyed on its own device, by whichever thread drops the last copy: a thread without
  // a context would otherwise be given device 0's.
  return std::shared_ptr<void>(ev, [device](void* e) {
    DeviceGuard guard;
    static_cast<void>(guard.enter(device));
    cudaEventDestroy(static_cast<cudaEvent_t>(e));
  });
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

}  // namespace chorus::gpu
