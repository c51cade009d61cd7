#pragma once
// The NCCL backend: collectives on GPU memory over one NCCL communicator per process set,
// enqueued on the set's communication stream (owned by GpuContext). Compiled when
// CHORUS_WITH_NCCL is on. Only nccl_backend.cc includes nccl.h.
//
// Contract: background thread only, every member in the same order (Backend). Calls only
// enqueue work: the caller (GpuContext::synchronize) waits for the stream and, while it
// waits, polls poll_async() so that a NCCL error becomes a Status instead of a hang, and
// aborts the communicator when the wait passes its deadline (NCCL does not report a peer
// that never joined a collective). After an error or an abort every later call fails at
// once with the same Status.
//
// No call blocks without a bound: the communicator is non-blocking (ncclConfig_t.blocking
// = 0), so its creation and any call NCCL has not finished return ncclInProgress at once;
// this backend then polls the communicator's state, asleep between polls, for at most
// `timeout`, and aborts the communicator past it.

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "collectives/backend.h"
#include "kernels/cuda_fusion.h"

namespace chorus {

class NcclBackend final : public Backend {
 public:
  /// Collective over the members of `host` (the same ranks over MPI): rank 0 creates the
  /// unique id, `host.broadcast` sends it, and every rank joins the communicator on
  /// `device`. Fails on every member when any member fails a step (agree_on_success). `stream`
  /// (cudaStream_t) and `copy` (for result scaling) belong to the caller and outlive this backend.
  /// `label` names the set in messages ("global", "set 3", "global/local"). `timeout` bounds
  /// the communicator's creation on each rank and every later wait for a NCCL call.
  /// `before_launch` runs before each operation enqueues a NCCL kernel, and its failure is the
  /// operation's (GpuContext::await_producers: a kernel queued behind an input that is never
  /// produced would make the communicator impossible to abort within a bound).
  static StatusOr<std::unique_ptr<NcclBackend>> create(Backend& host, int device, void* stream,
                                                       gpu::BatchedCopy* copy,
                                                       const std::string& label,
                                                       std::chrono::milliseconds timeout,
                                                       std::function<Status()> before_launch);
  /// Finalizes and destroys a healthy communicator (aborting it if that passes the
  /// timeout); one that failed was aborted already.
  ~NcclBackend() override;

  const char* name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  /// int16 (which NCCL lacks) reduces as int32 through a scratch buffer and is narrowed
  /// back: the same wrap-around result, twice the traffic. Likewise for reducescatter. A
  /// power-of-two scale of a float32, float64 or bfloat16 sum is folded into NCCL's pass
  /// (exact_premul in the .cc says when the bits are the same); any other scale is a second
  /// pass over the result.
  Status allreduce(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op,
                   kernels::Scale scale) override;
  /// Equal counts: ncclReduceScatter. Uneven: one ncclReduce per block in a group.
  Status reducescatter(const void* send, void* recv, const std::vector<int64_t>& counts,
                       DataType dtype, ReduceOp op, kernels::Scale scale) override;
  /// Equal blocks: ncclAllGather. Uneven: one ncclBroadcast per block in a group.
  Status allgatherv(const void* send, void* recv, const std::vector<int64_t>& bytes) override;
  Status broadcast(void* data, int64_t bytes, int root) override;
  /// ncclSend/ncclRecv pairs to every peer in one group.
  Status alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                   const std::vector<int64_t>& recv_bytes) override;
  /// Over the host backend: NCCL has no barrier, and the work before it is already
  /// synchronized by the caller.
  Status barrier() override { return host_.barrier(); }

  /// NCCL's asynchronous error state. On an error: aborts the communicator, latches and
  /// returns the Status (naming `during`). OK while healthy.
  Status poll_async(const std::string& during);
  /// Aborts the communicator (its kernels end, the stream drains) and latches `why` as the
  /// failure of every later call. Idempotent.
  void abort(const std::string& why);

 private:
  NcclBackend(Backend& host, void* stream, gpu::BatchedCopy* copy, std::string label,
              std::chrono::milliseconds timeout, std::function<Status()> before_launch)
      : host_(host),
        stream_(stream),
        copy_(copy),
        label_(std::move(label)),
        timeout_(timeout),
        before_launch_(std::move(before_launch)) {}
  /// The latched failure, else before_launch's.
  Status ready_to_launch();
  /// The end of NCCL call `call` that returned `rc`: ncclInProgress is waited out (bounded by
  /// the timeout, then the communicator is aborted); a failure becomes a Status naming the call.
  Status settle(int rc, const char* call, const char* file, int line);
  Status scale_result(void* data, int64_t count, DataType dtype, kernels::Scale scale);
  /// Device memory for the int32 copies of int16 reductions, grown to the largest need.
  StatusOr<int32_t*> wide(int64_t elements);

  Backend& host_;
  void* comm_ = nullptr;  // ncclComm_t
  void* stream_;          // cudaStream_t
  gpu::BatchedCopy* copy_;
  std::string label_;
  std::chrono::milliseconds timeout_;
  std::function<Status()> before_launch_;
  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;  // the communicator's GPU
  Status failed_;   // latched: the communicator was aborted
  void* wide_ = nullptr;
  int64_t wide_elements_ = 0;
};

}  // namespace chorus
