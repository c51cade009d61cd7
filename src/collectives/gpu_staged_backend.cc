#include "collectives/gpu_staged_backend.h"

#include <cuda_runtime_api.h>

#include <numeric>

#include "collectives/cuda_check.h"

namespace chorus {

StatusOr<std::unique_ptr<StagedGpuBackend>> StagedGpuBackend::create(Backend& host, void* stream,
                                                                     bool cuda_aware) {
  std::unique_ptr<StagedGpuBackend> b(new StagedGpuBackend(host, stream, cuda_aware));
  cudaEvent_t ev = nullptr;
  CHORUS_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventBlockingSync | cudaEventDisableTiming));
  b->done_ = ev;
  return b;
}

StagedGpuBackend::~StagedGpuBackend() {
  for (char* p : pinned_) {
    if (p) cudaFreeHost(p);
  }
  if (done_) cudaEventDestroy(static_cast<cudaEvent_t>(done_));
}

StatusOr<char*> StagedGpuBackend::pinned(int which, std::size_t bytes) {
  if (bytes > pinned_bytes_[which]) {
    if (pinned_[which]) CHORUS_CUDA_CHECK(cudaFreeHost(pinned_[which]));
    pinned_[which] = nullptr;
    pinned_bytes_[which] = 0;
    void* p = nullptr;
    CHORUS_CUDA_CHECK(cudaMallocHost(&p, bytes));
    pinned_[which] = static_cast<char*>(p);
    pinned_bytes_[which] = bytes;
  }
  return pinned_[which];
}

Status StagedGpuBackend::copy(void* dst, const void* src, std::size_t bytes, bool to_device) {
  if (bytes == 0) return {};
  CHORUS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes,
                                    to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                                    static_cast<cudaStream_t>(stream_)));
  return {};
}

Status StagedGpuBackend::wait() {
  CHORUS_CUDA_CHECK(
      cudaEventRecord(static_cast<cudaEvent_t>(done_), static_cast<cudaStream_t>(stream_)));
  CHORUS_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(done_)));
  return {};
}

Status StagedGpuBackend::allreduce(const void* send, void* recv, int64_t count, DataType dtype,
                                   ReduceOp op, kernels::Scale scale) {
  const std::size_t bytes = static_cast<std::size_t>(count) * dtype_size(dtype);
  StatusOr<char*> buf = pinned(0, bytes);
  if (!buf.ok()) return buf.status();
  for (Status s : {copy(*buf, send, bytes, false), wait()}) {
    if (!s.ok()) return s;
  }
  if (Status s = host_.allreduce(*buf, *buf, count, dtype, op, scale); !s.ok()) return s;
  if (Status s = copy(recv, *buf, bytes, true); !s.ok()) return s;
  return wait();
}

Status StagedGpuBackend::reducescatter(const void* send, void* recv,
                                       const std::vector<int64_t>& counts, DataType dtype,
                                       ReduceOp op, kernels::Scale scale) {
  const std::size_t esz = dtype_size(dtype);
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  const int64_t offset = std::accumulate(counts.begin(), counts.begin() + rank(), int64_t{0});
  StatusOr<char*> buf = pinned(0, static_cast<std::size_t>(total) * esz);
  if (!buf.ok()) return buf.status();
  for (Status s : {copy(*buf, send, static_cast<std::size_t>(total) * esz, false), wait()}) {
    if (!s.ok()) return s;
  }
  char* mine = *buf + offset * esz;
  if (Status s = host_.reducescatter(*buf, mine, counts, dtype, op, scale); !s.ok()) return s;
  if (Status s = copy(recv, mine, static_cast<std::size_t>(counts[rank()]) * esz, true); !s.ok()) {
    return s;
  }
  return wait();
}

Status StagedGpuBackend::allgatherv(const void* send, void* recv,
                                    const std::vector<int64_t>& bytes) {
  if (cuda_aware_) {
    if (Status s = wait(); !s.ok()) return s;  // the inputs are written on the stream
    return host_.allgatherv(send, recv, bytes);
  }
  const int64_t total = std::accumulate(bytes.begin(), bytes.end(), int64_t{0});
  const int64_t offset = std::accumulate(bytes.begin(), bytes.begin() + rank(), int64_t{0});
  StatusOr<char*> buf = pinned(0, static_cast<std::size_t>(total));
  if (!buf.ok()) return buf.status();
  for (Status s :
       {copy(*buf + offset, send, static_cast<std::size_t>(bytes[rank()]), false), wait()}) {
    if (!s.ok()) return s;
  }
  if (Status s = host_.allgatherv(*buf + offset, *buf, bytes); !s.ok()) return s;
  if (Status s = copy(recv, *buf, static_cast<std::size_t>(total), true); !s.ok()) return s;
  return wait();
}

Status StagedGpuBackend::broadcast(void* data, int64_t bytes, int root) {
  if (cuda_aware_) {
    if (Status s = wait(); !s.ok()) return s;
    return host_.broadcast(data, bytes, root);
  }
  StatusOr<char*> buf = pinned(0, static_cast<std::size_t>(bytes));
  if (!buf.ok()) return buf.status();
  if (rank() == root) {
    for (Status s : {copy(*buf, data, static_cast<std::size_t>(bytes), false), wait()}) {
      if (!s.ok()) return s;
    }
  }
  if (Status s = host_.broadcast(*buf, bytes, root); !s.ok()) return s;
  if (rank() == root) return {};
  if (Status s = copy(data, *buf, static_cast<std::size_t>(bytes), true); !s.ok()) return s;
  return wait();
}

Status StagedGpuBackend::alltoallv(const void* send, const std::vector<int64_t>& send_bytes,
                                   void* recv, const std::vector<int64_t>& recv_bytes) {
  if (cuda_aware_) {
    if (Status s = wait(); !s.ok()) return s;
    return host_.alltoallv(send, send_bytes, recv, recv_bytes);
  }
  const auto stotal =
      static_cast<std::size_t>(std::accumulate(send_bytes.begin(), send_bytes.end(), int64_t{0}));
  const auto rtotal =
      static_cast<std::size_t>(std::accumulate(recv_bytes.begin(), recv_bytes.end(), int64_t{0}));
  StatusOr<char*> in = pinned(0, stotal);
  if (!in.ok()) return in.status();
  StatusOr<char*> out = pinned(1, rtotal);
  if (!out.ok()) return out.status();
  for (Status s : {copy(*in, send, stotal, false), wait()}) {
    if (!s.ok()) return s;
  }
  if (Status s = host_.alltoallv(*in, send_bytes, *out, recv_bytes); !s.ok()) return s;
  if (Status s = copy(recv, *out, rtotal, true); !s.ok()) return s;
  return wait();
}

}  // namespace chorus
