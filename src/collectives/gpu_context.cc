#include "collectives/gpu_context.h"

#include <cuda_runtime_api.h>
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "collectives/cuda_check.h"
#include "collectives/gpu_path.h"
#include "collectives/gpu_staged_backend.h"
#include "collectives/hierarchical_allreduce.h"
#include "core/logging.h"
#ifdef CHORUS_WITH_NCCL
#include "collectives/nccl_backend.h"
#endif

namespace chorus {

bool mpi_is_cuda_aware() {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() == 1;
#else
  return false;
#endif
}

StatusOr<std::unique_ptr<GpuContext>> GpuContext::create(const GpuContextSetup& setup, int device) {
  std::unique_ptr<GpuContext> c(new GpuContext());
  c->device_ = device;
  CHORUS_CUDA_CHECK(cudaSetDevice(device));
  cudaStream_t stream = nullptr;
  CHORUS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  c->stream_ = stream;
  cudaEvent_t done = nullptr;
  CHORUS_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  c->done_ = done;
  StatusOr<std::unique_ptr<gpu::BatchedCopy>> copy = gpu::BatchedCopy::create(device);
  if (!copy.ok()) return copy.status();
  c->copy_ = std::move(copy).value();
  c->fusion_capacity_ = setup.fusion_threshold;
  if (Status s = c->choose_backend(setup); !s.ok()) return s;
  return c;
}

GpuContext::~GpuContext() {
  if (stream_) cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  hierarchical_.reset();
  cross_.reset();
  local_.reset();
  flat_.reset();
  copy_.reset();
  for (void* p : {fusion_, zeros_, staging_}) {
    if (p) cudaFree(p);
  }
  if (done_) cudaEventDestroy(static_cast<cudaEvent_t>(done_));
  if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

// Every member contributes its GPU's UUID and whether its MPI is CUDA-aware; all see the
// same table, so all choose the same path.
Status GpuContext::choose_backend(const GpuContextSetup& setup) {
  Backend& host = *setup.host;
  constexpr int kRecord = 17;
  cudaDeviceProp prop{};
  CHORUS_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  std::vector<char> table(static_cast<std::size_t>(kRecord) * host.size());
  char* mine = table.data() + static_cast<std::size_t>(kRecord) * host.rank();
  std::memcpy(mine, &prop.uuid, 16);
  mine[16] = mpi_is_cuda_aware() ? 1 : 0;
  if (Status s = host.allgatherv(mine, table.data(), std::vector<int64_t>(host.size(), kRecord));
      !s.ok()) {
    return s;
  }
  GpuPathInputs in;
#ifdef CHORUS_WITH_NCCL
  in.nccl_built = true;
#endif
  in.mpi_cuda_aware = true;
  for (int r = 0; r < host.size(); ++r) {
    const char* rec = table.data() + static_cast<std::size_t>(kRecord) * r;
    in.mpi_cuda_aware = in.mpi_cuda_aware && rec[16] == 1;
    for (int q = 0; q < r; ++q) {
      if (std::memcmp(rec, table.data() + static_cast<std::size_t>(kRecord) * q, 16) == 0) {
        in.gpu_shared = true;
      }
    }
  }
  in.requested = setup.requested_path;
  const GpuPathChoice choice = choose_gpu_path(in);
  log().debug("{}: GPU collectives on cuda:{} use {} ({})", setup.label, device_,
              gpu_path_name(choice.path), choice.reason);

  // One factory for the set and, when hierarchical, for the local group.
  auto make = [&](Backend& group_host,
                  const std::string& label) -> StatusOr<std::unique_ptr<Backend>> {
#ifdef CHORUS_WITH_NCCL
    if (choice.path == GpuPath::kNccl) {
      StatusOr<std::unique_ptr<NcclBackend>> b =
          NcclBackend::create(group_host, device_, stream_, copy_.get(), label);
      if (!b.ok()) return b.status();
      nccl_.push_back(b->get());
      return std::unique_ptr<Backend>(std::move(b).value());
    }
#endif
    StatusOr<std::unique_ptr<StagedGpuBackend>> b =
        StagedGpuBackend::create(group_host, stream_, choice.path == GpuPath::kMpiCudaAware);
    if (!b.ok()) return b.status();
    return std::unique_ptr<Backend>(std::move(b).value());
  };
  StatusOr<std::unique_ptr<Backend>> flat = make(host, setup.label);
  if (!flat.ok()) return flat.status();
  flat_ = std::move(flat).value();
  backend_ = flat_.get();
  description_ = gpu_path_name(choice.path);

  std::string why = "no rank map";
  const bool hierarchical =
      setup.map && setup.groups && setup.groups->local && setup.groups->cross &&
      use_hierarchical_allreduce(setup.hierarchical_requested, setup.global_set, *setup.map, &why);
  if (!hierarchical) {
    if (setup.hierarchical_requested) log().debug("{}: flat GPU allreduce: {}", setup.label, why);
    return {};
  }
  StatusOr<std::unique_ptr<Backend>> local =
      make(setup.groups->local->backend(), setup.label + "/local");
  if (!local.ok()) return local.status();
  local_ = std::move(local).value();
  // Across nodes always MPI: each rank moves only its node's shard.
  StatusOr<std::unique_ptr<StagedGpuBackend>> cross =
      StagedGpuBackend::create(setup.groups->cross->backend(), stream_, in.mpi_cuda_aware);
  if (!cross.ok()) return cross.status();
  cross_ = std::move(cross).value();
  StatusOr<std::unique_ptr<HierarchicalBackend>> h =
      HierarchicalBackend::create(flat_.get(), local_.get(), cross_.get());
  if (!h.ok()) return h.status();
  hierarchical_ = std::move(h).value();
  backend_ = hierarchical_.get();
  description_ += " + hierarchical allreduce";
  log().debug("{}: {}", setup.label, why);
  return {};
}

Status GpuContext::wait_ready(void* event) {
  if (!event) return {};
  CHORUS_CUDA_CHECK(
      cudaStreamWaitEvent(static_cast<cudaStream_t>(stream_), static_cast<cudaEvent_t>(event), 0));
  return {};
}

Status GpuContext::copy(const std::vector<gpu::CopyItem>& items, DataType dtype,
                        kernels::Scale scale) {
  return copy_->launch(items, dtype, scale, stream_);
}

StatusOr<char*> GpuContext::grow(void** slot, std::size_t* have, std::size_t bytes) {
  if (bytes > *have || !*slot) {
    if (*slot) CHORUS_CUDA_CHECK(cudaFree(*slot));
    *slot = nullptr;
    *have = 0;
    CHORUS_CUDA_CHECK(cudaMalloc(slot, std::max<std::size_t>(bytes, 256)));
    *have = std::max<std::size_t>(bytes, 256);
  }
  return static_cast<char*>(*slot);
}

StatusOr<char*> GpuContext::fusion_buffer(std::size_t bytes) {
  if (bytes > fusion_capacity_) {
    return internal_error("fusion batch of " + std::to_string(bytes) + " bytes exceeds the " +
                          std::to_string(fusion_capacity_) + "-byte GPU fusion buffer");
  }
  std::size_t have = fusion_ ? fusion_capacity_ : 0;
  return grow(&fusion_, &have, fusion_capacity_);
}

StatusOr<char*> GpuContext::zeros(std::size_t bytes) {
  StatusOr<char*> p = grow(&zeros_, &zeros_bytes_, bytes);
  if (!p.ok()) return p;
  if (Status s = gpu::zero_fill(*p, bytes, stream_); !s.ok()) return s;
  return p;
}

StatusOr<char*> GpuContext::staging(std::size_t bytes) {
  return grow(&staging_, &staging_bytes_, bytes);
}

Status GpuContext::synchronize(const std::string& during) {
  auto event = static_cast<cudaEvent_t>(done_);
  CHORUS_CUDA_CHECK(cudaEventRecord(event, static_cast<cudaStream_t>(stream_)));
  // Short work finishes within a few polls; longer work is polled with a doubling sleep
  // (up to 100 us), so the wait costs the background thread's core almost nothing and
  // never touches the trainer's streams.
  auto pause = std::chrono::microseconds(0);
  for (int polls = 0;; ++polls) {
    const cudaError_t q = cudaEventQuery(event);
    if (q == cudaSuccess) return {};
    if (q != cudaErrorNotReady) CHORUS_CUDA_CHECK(q);
#ifdef CHORUS_WITH_NCCL
    for (NcclBackend* n : nccl_) {
      if (Status s = n->poll_async(during); !s.ok()) return s;
    }
#endif
    if (polls < 32) {
      std::this_thread::yield();
      continue;
    }
    pause =
        std::min(std::max(pause * 2, std::chrono::microseconds(2)), std::chrono::microseconds(100));
    std::this_thread::sleep_for(pause);
  }
}

}  // namespace chorus
