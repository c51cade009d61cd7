#include "collectives/nccl_backend.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <functional>
#include <numeric>

#include "collectives/gpu_agree.h"
#include "collectives/nccl_status.h"
#include "kernels/cuda_check.h"

namespace chorus {

// nccl_status.h spells NCCL's codes without nccl.h; they must stay NCCL's.
static_assert(static_cast<int>(NcclCode::kInvalidArgument) == ncclInvalidArgument);
static_assert(static_cast<int>(NcclCode::kRemoteError) == ncclRemoteError);
static_assert(static_cast<int>(NcclCode::kInProgress) == ncclInProgress);

#define CHORUS_NCCL_CHECK(call)                                                                 \
  do {                                                                                          \
    ncclResult_t chorus_nccl_rc_ = (call);                                                      \
    if (chorus_nccl_rc_ != ncclSuccess) {                                                       \
      return ::chorus::nccl_status(chorus_nccl_rc_, #call, ncclGetLastError(nullptr), __FILE__, \
                                   __LINE__);                                                   \
    }                                                                                           \
  } while (0)

namespace {

ncclDataType_t nccl_type(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8: return ncclUint8;
    case DataType::kInt8: return ncclInt8;
    case DataType::kInt16: return ncclInt32;  // reductions widen int16 first (allreduce)
    case DataType::kInt32: return ncclInt32;
    case DataType::kInt64: return ncclInt64;
    case DataType::kFloat16: return ncclFloat16;
    case DataType::kBFloat16: return ncclBfloat16;
    case DataType::kFloat32: return ncclFloat32;
    case DataType::kFloat64: return ncclFloat64;
  }
  return ncclUint8;
}

// kAverage arrives as kSum plus a Scale (the executor's convention), applied afterwards by
// the same kernel as every other scale, so integer averages truncate as on the CPU.
ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kProduct: return ncclProd;
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return ncclSum;
  }
  return ncclSum;
}

bool all_equal(const std::vector<int64_t>& v) {
  return std::adjacent_find(v.begin(), v.end(), std::not_equal_to<>()) == v.end();
}

}  // namespace

int nccl_compiled_version_code() { return NCCL_VERSION_CODE; }

std::string nccl_version_string() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "NCCL (version unknown)";
  // NCCL encodes major*10000 + minor*100 + patch since 2.9.
  return "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

StatusOr<std::unique_ptr<NcclBackend>> NcclBackend::create(Backend& host, int device, void* stream,
                                                           gpu::BatchedCopy* copy,
                                                           const std::string& label) {
  std::unique_ptr<NcclBackend> b(new NcclBackend(host, stream, copy, label));
  b->rank_ = host.rank();
  b->size_ = host.size();
  // The id travels over MPI in host memory, inside the set, with a flag saying whether rank
  // 0 could make it: every member calls this at the same point of the negotiated order.
  struct {
    ncclUniqueId id;
    char ok;
  } msg{};
  Status made;
  if (b->rank_ == 0) {
    const ncclResult_t rc = ncclGetUniqueId(&msg.id);
    made = nccl_status(rc, "ncclGetUniqueId", ncclGetLastError(nullptr), __FILE__, __LINE__);
    msg.ok = made.ok() ? 1 : 0;
  }
  if (Status s = host.broadcast(&msg, sizeof msg, 0); !s.ok()) return s;
  if (!made.ok()) return made;
  if (msg.ok != 1) return internal_error(label + ": rank 0 could not create the NCCL id");
  // Every rank enters ncclCommInitRank only when all can, and keeps the communicator only
  // when all got one.
  Status ready;
  if (cudaError_t rc = cudaSetDevice(device); rc != cudaSuccess) {
    ready = cuda_detail::cuda_status(rc, "cudaSetDevice", __FILE__, __LINE__);
  }
  if (Status s = agree_on_success(host, ready, label + ": selecting the GPU"); !s.ok()) return s;
  ncclComm_t comm = nullptr;
  const ncclResult_t rc = ncclCommInitRank(&comm, b->size_, msg.id, b->rank_);
  const Status joined =
      nccl_status(rc, "ncclCommInitRank", ncclGetLastError(nullptr), __FILE__, __LINE__);
  b->comm_ = joined.ok() ? comm : nullptr;
  if (Status s = agree_on_success(host, joined, label + ": ncclCommInitRank"); !s.ok()) {
    b->abort(s.message());
    return s;
  }
  return b;
}

NcclBackend::~NcclBackend() {
  if (comm_) ncclCommDestroy(static_cast<ncclComm_t>(comm_));
  if (wide_) cudaFree(wide_);
}

StatusOr<int32_t*> NcclBackend::wide(int64_t elements) {
  if (elements > wide_elements_) {
    // cudaFree waits for the device, so work still queued on the old buffer finishes first.
    if (wide_) CHORUS_CUDA_CHECK(cudaFree(wide_));
    wide_ = nullptr;
    wide_elements_ = 0;
    CHORUS_CUDA_CHECK(cudaMalloc(&wide_, static_cast<std::size_t>(elements) * sizeof(int32_t)));
    wide_elements_ = elements;
  }
  return static_cast<int32_t*>(wide_);
}

void NcclBackend::abort(const std::string& why) {
  if (comm_) ncclCommAbort(static_cast<ncclComm_t>(comm_));
  comm_ = nullptr;
  if (failed_.ok()) failed_ = Status(StatusCode::kAborted, label_ + ": " + why);
}

Status NcclBackend::poll_async(const std::string& during) {
  if (!failed_.ok()) return failed_;
  ncclResult_t async = ncclSuccess;
  ncclResult_t rc = ncclCommGetAsyncError(static_cast<ncclComm_t>(comm_), &async);
  if (rc != ncclSuccess) async = rc;
  if (async == ncclSuccess || async == ncclInProgress) return {};
  const std::string detail = ncclGetLastError(static_cast<ncclComm_t>(comm_));
  ncclCommAbort(static_cast<ncclComm_t>(comm_));
  comm_ = nullptr;
  failed_ = nccl_async_status(async, label_, during, detail);
  return failed_;
}

Status NcclBackend::scale_result(void* data, int64_t count, DataType dtype, kernels::Scale scale) {
  if (scale.is_identity() || count == 0) return {};
  return copy_->launch({gpu::CopyItem{data, data, count}}, dtype, scale, stream_);
}

Status NcclBackend::allreduce(const void* send, void* recv, int64_t count, DataType dtype,
                              ReduceOp op, kernels::Scale scale) {
  if (!failed_.ok()) return failed_;
  if (dtype == DataType::kInt16) {
    StatusOr<int32_t*> w = wide(count);
    if (!w.ok()) return w.status();
    if (Status s = gpu::widen_int16(send, *w, count, stream_); !s.ok()) return s;
    if (Status s = allreduce(*w, *w, count, DataType::kInt32, op, {}); !s.ok()) return s;
    if (Status s = gpu::narrow_to_int16(*w, recv, count, stream_); !s.ok()) return s;
    return scale_result(recv, count, dtype, scale);
  }
  auto comm = static_cast<ncclComm_t>(comm_);
  auto stream = static_cast<cudaStream_t>(stream_);
  CHORUS_NCCL_CHECK(ncclAllReduce(send, recv, static_cast<size_t>(count), nccl_type(dtype),
                                  nccl_op(op), comm, stream));
  return scale_result(recv, count, dtype, scale);
}

Status NcclBackend::reducescatter(const void* send, void* recv, const std::vector<int64_t>& counts,
                                  DataType dtype, ReduceOp op, kernels::Scale scale) {
  if (!failed_.ok()) return failed_;
  if (dtype == DataType::kInt16) {
    // The whole input widened, then this rank's block reduced after it in the same buffer.
    const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
    const int64_t mine = counts[rank_];
    StatusOr<int32_t*> w = wide(total + mine);
    if (!w.ok()) return w.status();
    int32_t* block = *w + total;
    if (Status s = gpu::widen_int16(send, *w, total, stream_); !s.ok()) return s;
    if (Status s = reducescatter(*w, block, counts, DataType::kInt32, op, {}); !s.ok()) return s;
    if (Status s = gpu::narrow_to_int16(block, recv, mine, stream_); !s.ok()) return s;
    return scale_result(recv, mine, dtype, scale);
  }
  auto comm = static_cast<ncclComm_t>(comm_);
  auto stream = static_cast<cudaStream_t>(stream_);
  const ncclDataType_t type = nccl_type(dtype);
  if (all_equal(counts)) {
    CHORUS_NCCL_CHECK(ncclReduceScatter(send, recv, static_cast<size_t>(counts[0]), type,
                                        nccl_op(op), comm, stream));
  } else {
    const std::size_t esz = dtype_size(dtype);
    int64_t offset = 0;
    CHORUS_NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < size_; ++r) {
      const char* block = static_cast<const char*>(send) + offset * esz;
      if (counts[r] > 0) {
        ncclResult_t rc =
            ncclReduce(block, r == rank_ ? recv : nullptr, static_cast<size_t>(counts[r]), type,
                       nccl_op(op), r, comm, stream);
        if (rc != ncclSuccess) {
          ncclGroupEnd();
          return nccl_status(rc, "ncclReduce", ncclGetLastError(comm), __FILE__, __LINE__);
        }
      }
      offset += counts[r];
    }
    CHORUS_NCCL_CHECK(ncclGroupEnd());
  }
  return scale_result(recv, counts[rank_], dtype, scale);
}

Status NcclBackend::allgatherv(const void* send, void* recv, const std::vector<int64_t>& bytes) {
  if (!failed_.ok()) return failed_;
  auto comm = static_cast<ncclComm_t>(comm_);
  auto stream = static_cast<cudaStream_t>(stream_);
  if (all_equal(bytes)) {
    CHORUS_NCCL_CHECK(
        ncclAllGather(send, recv, static_cast<size_t>(bytes[0]), ncclUint8, comm, stream));
    return {};
  }
  int64_t offset = 0;
  CHORUS_NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < size_; ++r) {
    char* dst = static_cast<char*>(recv) + offset;
    if (bytes[r] > 0) {
      ncclResult_t rc = ncclBroadcast(r == rank_ ? send : dst, dst, static_cast<size_t>(bytes[r]),
                                      ncclUint8, r, comm, stream);
      if (rc != ncclSuccess) {
        ncclGroupEnd();
        return nccl_status(rc, "ncclBroadcast", ncclGetLastError(comm), __FILE__, __LINE__);
      }
    }
    offset += bytes[r];
  }
  CHORUS_NCCL_CHECK(ncclGroupEnd());
  return {};
}

Status NcclBackend::broadcast(void* data, int64_t bytes, int root) {
  if (!failed_.ok()) return failed_;
  CHORUS_NCCL_CHECK(ncclBroadcast(data, data, static_cast<size_t>(bytes), ncclUint8, root,
                                  static_cast<ncclComm_t>(comm_),
                                  static_cast<cudaStream_t>(stream_)));
  return {};
}

Status NcclBackend::alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                              const std::vector<int64_t>& recv_bytes) {
  if (!failed_.ok()) return failed_;
  auto comm = static_cast<ncclComm_t>(comm_);
  auto stream = static_cast<cudaStream_t>(stream_);
  int64_t soff = 0, roff = 0;
  CHORUS_NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < size_; ++r) {
    ncclResult_t rc = ncclSuccess;
    if (send_bytes[r] > 0) {
      rc = ncclSend(static_cast<const char*>(send) + soff, static_cast<size_t>(send_bytes[r]),
                    ncclUint8, r, comm, stream);
    }
    if (rc == ncclSuccess && recv_bytes[r] > 0) {
      rc = ncclRecv(static_cast<char*>(recv) + roff, static_cast<size_t>(recv_bytes[r]), ncclUint8,
                    r, comm, stream);
    }
    if (rc != ncclSuccess) {
      ncclGroupEnd();
      return nccl_status(rc, "ncclSend/ncclRecv", ncclGetLastError(comm), __FILE__, __LINE__);
    }
    soff += send_bytes[r];
    roff += recv_bytes[r];
  }
  CHORUS_NCCL_CHECK(ncclGroupEnd());
  return {};
}

}  // namespace chorus
