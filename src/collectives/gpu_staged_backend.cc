#include "collectives/gpu_staged_backend.h"

#include <cuda_runtime_api.h>

#include <numeric>

#include "kernels/cuda_check.h"

namespace chorus {

StagedGpuBackend::~StagedGpuBackend() {
  for (char* p : pinned_) {
    if (p) cudaFreeHost(p);
  }
  for (char* p : retired_) cudaFreeHost(p);
}

char* StagedGpuBackend::pinned(int which, std::size_t bytes) {
  if (bytes <= pinned_bytes_[which]) return pinned_[which];
  if (bytes <= pageable_[which].size()) return pageable_[which].data();
  // cudaFreeHost waits for the whole device, the trainer's kernels too: a buffer outgrown on
  // the path is kept until the backend goes.
  if (pinned_[which]) retired_.push_back(pinned_[which]);
  pinned_[which] = nullptr;
  pinned_bytes_[which] = 0;
  void* p = nullptr;
  if (cudaMallocHost(&p, bytes) == cudaSuccess) {
    pinned_[which] = static_cast<char*>(p);
    pinned_bytes_[which] = bytes;
    return pinned_[which];
  }
  cudaGetLastError();  // not sticky; clear it so that later checks see their own errors
  pageable_[which].resize(bytes);
  return pageable_[which].data();
}

Status StagedGpuBackend::to_host(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0) {
    CHORUS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost,
                                      static_cast<cudaStream_t>(stream_)));
  }
  return drain_();
}

Status StagedGpuBackend::to_device(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0) {
    CHORUS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice,
                                      static_cast<cudaStream_t>(stream_)));
  }
  return drain_();
}

// Each call below: stage in (a failure is kept, not returned), the host collective (whose
// failure is returned at once: the ranks are out of step), then the kept failure, then
// stage out.

Status StagedGpuBackend::allreduce(const void* send, void* recv, int64_t count, DataType dtype,
                                   ReduceOp op, kernels::Scale scale) {
  const std::size_t bytes = static_cast<std::size_t>(count) * dtype_size(dtype);
  char* buf = pinned(0, bytes);
  const Status in = to_host(buf, send, bytes);
  if (Status s = host_.allreduce(buf, buf, count, dtype, op, scale); !s.ok()) return s;
  if (!in.ok()) return in;
  return to_device(recv, buf, bytes);
}

Status StagedGpuBackend::reducescatter(const void* send, void* recv,
                                       const std::vector<int64_t>& counts, DataType dtype,
                                       ReduceOp op, kernels::Scale scale) {
  const std::size_t esz = dtype_size(dtype);
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  const int64_t offset = std::accumulate(counts.begin(), counts.begin() + rank(), int64_t{0});
  char* buf = pinned(0, static_cast<std::size_t>(total) * esz);
  const Status in = to_host(buf, send, static_cast<std::size_t>(total) * esz);
  char* mine = buf + offset * esz;
  if (Status s = host_.reducescatter(buf, mine, counts, dtype, op, scale); !s.ok()) return s;
  if (!in.ok()) return in;
  return to_device(recv, mine, static_cast<std::size_t>(counts[rank()]) * esz);
}

Status StagedGpuBackend::allgatherv(const void* send, void* recv,
                                    const std::vector<int64_t>& bytes) {
  const int64_t total = std::accumulate(bytes.begin(), bytes.end(), int64_t{0});
  const int64_t offset = std::accumulate(bytes.begin(), bytes.begin() + rank(), int64_t{0});
  char* buf = pinned(0, static_cast<std::size_t>(total));
  const Status in = to_host(buf + offset, send, static_cast<std::size_t>(bytes[rank()]));
  if (Status s = host_.allgatherv(buf + offset, buf, bytes); !s.ok()) return s;
  if (!in.ok()) return in;
  return to_device(recv, buf, static_cast<std::size_t>(total));
}

Status StagedGpuBackend::broadcast(void* data, int64_t bytes, int root) {
  char* buf = pinned(0, static_cast<std::size_t>(bytes));
  Status in;
  if (rank() == root) in = to_host(buf, data, static_cast<std::size_t>(bytes));
  if (Status s = host_.broadcast(buf, bytes, root); !s.ok()) return s;
  if (!in.ok() || rank() == root) return in;
  return to_device(data, buf, static_cast<std::size_t>(bytes));
}

Status StagedGpuBackend::alltoallv(const void* send, const std::vector<int64_t>& send_bytes,
                                   void* recv, const std::vector<int64_t>& recv_bytes) {
  const auto stotal =
      static_cast<std::size_t>(std::accumulate(send_bytes.begin(), send_bytes.end(), int64_t{0}));
  const auto rtotal =
      static_cast<std::size_t>(std::accumulate(recv_bytes.begin(), recv_bytes.end(), int64_t{0}));
  char* in_buf = pinned(0, stotal);
  char* out_buf = pinned(1, rtotal);
  const Status in = to_host(in_buf, send, stotal);
  if (Status s = host_.alltoallv(in_buf, send_bytes, out_buf, recv_bytes); !s.ok()) return s;
  if (!in.ok()) return in;
  return to_device(recv, out_buf, rtotal);
}

}  // namespace chorus
