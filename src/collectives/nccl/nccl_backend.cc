#include "collectives/nccl/nccl_backend.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <functional>
#include <future>
#include <memory>
#include <numeric>
#include <optional>
#include <thread>

#include "base/logging.h"
#include "collectives/gpu_agree.h"
#include "collectives/nccl/nccl_status.h"
#include "kernels/cuda_check.h"

namespace chorus {

// nccl_status.h spells NCCL's codes without nccl.h; they must stay NCCL's.
static_assert(static_cast<int>(NcclCode::kInvalidArgument) == ncclInvalidArgument);
static_assert(static_cast<int>(NcclCode::kRemoteError) == ncclRemoteError);
static_assert(static_cast<int>(NcclCode::kInProgress) == ncclInProgress);

// Non-blocking communicators (ncclConfig_t, 2.14) bound every wait; NCCL_CONFIG_INITIALIZER
// names the version that has them.
#if !defined(NCCL_CONFIG_INITIALIZER)
#error "Chorus needs NCCL 2.14 or newer (non-blocking communicators); point NCCL_HOME at one"
#endif

// A call on this backend's communicator, waited out (settle) and checked: returns its failure.
#define CHORUS_NCCL_CHECK(call)                                                      \
  do {                                                                               \
    if (::chorus::Status chorus_nccl_s_ = settle((call), #call, __FILE__, __LINE__); \
        !chorus_nccl_s_.ok()) {                                                      \
      return chorus_nccl_s_;                                                         \
    }                                                                                \
  } while (0)

namespace {

// Polls a non-blocking communicator until NCCL has finished its last call, asleep between
// polls: that call's result, or ncclInProgress when `timeout` passed first.
ncclResult_t wait_for_comm(ncclComm_t comm, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::microseconds(5);
  while (true) {
    ncclResult_t state = ncclSuccess;
    if (ncclResult_t rc = ncclCommGetAsyncError(comm, &state); rc != ncclSuccess) return rc;
    if (state != ncclInProgress) return state;
    if (std::chrono::steady_clock::now() > deadline) return ncclInProgress;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

std::string seconds(std::chrono::milliseconds t) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(t).count());
}

// ncclCommAbort frees the communicator's device memory, which waits for the rank's whole
// device: behind a producer that never finishes it never returns. It runs on a thread of its
// own, and the caller goes on after `timeout`; the thread ends with the abort, or with the
// process. The thread makes the communicator's `device` current first: ncclCommAbort gives
// its caller back the device it found, and a new thread finds device 0, whose context that
// would create (CUDA 12 and later) on a rank bound to another GPU.
void abort_within(ncclComm_t comm, int device, std::chrono::milliseconds timeout,
                  const std::string& label) {
  auto aborted = std::make_shared<std::promise<void>>();
  std::future<void> done = aborted->get_future();
  std::thread([comm, device, aborted] {
    cudaSetDevice(device);  // its context exists: the communicator was made on it
    ncclCommAbort(comm);
    aborted->set_value();
  }).detach();
  if (done.wait_for(timeout) == std::future_status::timeout) {
    log().warn(
        "{}: ncclCommAbort did not return within {} s (it waits for every stream of the "
        "device, the trainer's too); going on without it",
        label, seconds(timeout));
  }
}

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
    case ReduceOp::kAverage:
    case ReduceOp::kAdasum: return ncclSum;  // Adasum never reaches a backend (adasum.h)
  }
  return ncclSum;
}

// The scale of a sum, when it can be folded into NCCL's own pass as a pre-multiplied sum
// (ncclRedOpCreatePreMulSum) with the same bits as the sum scaled afterwards: a floating
// type whose exponent range is float32's or wider, and a power of two (an average over 2, 4,
// 8, ... ranks, any power-of-two postscale). Multiplying by a power of two is exact, so
// every partial sum NCCL forms is the unscaled one times the scale; only results in the
// subnormal range, and sums that would overflow unscaled alone, can differ. Holds the
// scalar as the element type's bits (ncclScalarHostImmediate). Half precision is left out:
// its gradients are often subnormal once scaled.
struct Premul {
  double f64 = 0;
  float f32 = 0;
  uint16_t bf16 = 0;
  const void* scalar(DataType dtype) const {
    if (dtype == DataType::kFloat64) return &f64;
    if (dtype == DataType::kFloat32) return &f32;
    return &bf16;
  }
};
std::optional<Premul> exact_premul(DataType dtype, ReduceOp op, kernels::Scale scale) {
  if (scale.is_identity() || nccl_op(op) != ncclSum) return std::nullopt;
  if (dtype != DataType::kFloat32 && dtype != DataType::kFloat64 && dtype != DataType::kBFloat16)
    return std::nullopt;
  const double s = scale.factor / static_cast<double>(scale.divisor);
  int exponent = 0;
  // Normal in float32 (and so in bfloat16, which shares its exponent): 2^-126 .. 2^127.
  if (!(s > 0) || std::frexp(s, &exponent) != 0.5 || exponent < -125 || exponent > 128)
    return std::nullopt;
  Premul p;
  p.f64 = s;
  p.f32 = static_cast<float>(s);
  // A power of two's bfloat16 is float32's upper half, exactly.
  p.bf16 = static_cast<uint16_t>(std::bit_cast<uint32_t>(p.f32) >> 16);
  return p;
}

bool all_equal(const std::vector<int64_t>& v) {
  return std::adjacent_find(v.begin(), v.end(), std::not_equal_to<>()) == v.end();
}

}  // namespace

StatusOr<std::unique_ptr<NcclBackend>> NcclBackend::create(Backend& host, int device, void* stream,
                                                           gpu::BatchedCopy* copy,
                                                           const std::string& label,
                                                           std::chrono::milliseconds timeout,
                                                           std::function<Status()> before_launch) {
  std::unique_ptr<NcclBackend> b(
      new NcclBackend(host, stream, copy, label, timeout, std::move(before_launch)));
  b->rank_ = host.rank();
  b->size_ = host.size();
  b->device_ = device;
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
  // Non-blocking: a peer that never joins leaves this rank polling, not blocked, and the
  // timeout ends the wait with an abort.
  ncclComm_t comm = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t rc = ncclCommInitRankConfig(&comm, b->size_, msg.id, b->rank_, &config);
  b->comm_ = comm;
  Status joined = b->settle(rc, "ncclCommInitRankConfig", __FILE__, __LINE__);
  if (!joined.ok() && b->failed_.ok()) b->abort(joined.message());
  if (Status s = agree_on_success(host, joined, label + ": ncclCommInitRank"); !s.ok()) {
    b->abort(s.message());
    return s;
  }
  return b;
}

NcclBackend::~NcclBackend() {
  if (auto comm = static_cast<ncclComm_t>(comm_)) {
    // Finalizing flushes what the communicator still has in flight; one that cannot within
    // the timeout is aborted instead of waited for.
    ncclResult_t rc = ncclCommFinalize(comm);
    if (rc == ncclInProgress) rc = wait_for_comm(comm, timeout_);
    if (rc == ncclSuccess) {
      ncclCommDestroy(comm);
    } else {
      abort_within(comm, device_, timeout_, label_);
    }
  }
  // Stream-ordered, as it was allocated: cudaFree would wait for the whole device.
  if (wide_) cudaFreeAsync(wide_, static_cast<cudaStream_t>(stream_));
}

Status NcclBackend::settle(int rc, const char* call, const char* file, int line) {
  auto comm = static_cast<ncclComm_t>(comm_);
  auto result = static_cast<ncclResult_t>(rc);
  if (result == ncclInProgress && comm) result = wait_for_comm(comm, timeout_);
  if (result == ncclInProgress) {
    abort(std::string(call) + " did not finish within " + seconds(timeout_) +
          " s (CHORUS_GPU_TIMEOUT_SECONDS; a rank of the set did not take part); the "
          "communicator was aborted");
    return failed_;
  }
  return nccl_status(result, call, ncclGetLastError(comm), file, line);
}

Status NcclBackend::ready_to_launch() {
  if (!failed_.ok()) return failed_;
  return before_launch_ ? before_launch_() : Status();
}

StatusOr<int32_t*> NcclBackend::wide(int64_t elements) {
  if (elements > wide_elements_) {
    // Stream-ordered: work still queued on the old buffer finishes first, and the host does
    // not wait for the device.
    auto stream = static_cast<cudaStream_t>(stream_);
    if (wide_) CHORUS_CUDA_CHECK(cudaFreeAsync(wide_, stream));
    wide_ = nullptr;
    wide_elements_ = 0;
    CHORUS_CUDA_CHECK(
        cudaMallocAsync(&wide_, static_cast<std::size_t>(elements) * sizeof(int32_t), stream));
    wide_elements_ = elements;
  }
  return static_cast<int32_t*>(wide_);
}

void NcclBackend::abort(const std::string& why) {
  if (comm_) abort_within(static_cast<ncclComm_t>(comm_), device_, timeout_, label_);
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
  abort_within(static_cast<ncclComm_t>(comm_), device_, timeout_, label_);
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
  if (Status s = ready_to_launch(); !s.ok()) return s;
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
  if (std::optional<Premul> premul = exact_premul(dtype, op, scale)) {
    // One pass over the data instead of NCCL's and then the scale kernel's.
    ncclRedOp_t scaled_sum{};
    void* scalar = const_cast<void*>(premul->scalar(dtype));  // NCCL only reads it
    CHORUS_NCCL_CHECK(ncclRedOpCreatePreMulSum(&scaled_sum, scalar, nccl_type(dtype),
                                               ncclScalarHostImmediate, comm));
    const ncclResult_t rc = ncclAllReduce(send, recv, static_cast<size_t>(count), nccl_type(dtype),
                                          scaled_sum, comm, stream);
    // The operator may go once the call that takes it has returned.
    ncclRedOpDestroy(scaled_sum, comm);
    CHORUS_NCCL_CHECK(rc);
    return {};
  }
  CHORUS_NCCL_CHECK(ncclAllReduce(send, recv, static_cast<size_t>(count), nccl_type(dtype),
                                  nccl_op(op), comm, stream));
  return scale_result(recv, count, dtype, scale);
}

Status NcclBackend::reducescatter(const void* send, void* recv, const std::vector<int64_t>& counts,
                                  DataType dtype, ReduceOp op, kernels::Scale scale) {
  if (Status s = ready_to_launch(); !s.ok()) return s;
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
  if (Status s = ready_to_launch(); !s.ok()) return s;
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
  if (Status s = ready_to_launch(); !s.ok()) return s;
  CHORUS_NCCL_CHECK(ncclBroadcast(data, data, static_cast<size_t>(bytes), ncclUint8, root,
                                  static_cast<ncclComm_t>(comm_),
                                  static_cast<cudaStream_t>(stream_)));
  return {};
}

Status NcclBackend::alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                              const std::vector<int64_t>& recv_bytes) {
  if (Status s = ready_to_launch(); !s.ok()) return s;
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
