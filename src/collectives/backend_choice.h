#pragma once
// One process set's backends for one memory (host, or its GPU), in the order the settings
// prefer them, and the one choice of which runs each batch: the first that serves the
// batch's collective and dtype (Backend::serves). The last one offered, the set's own
// backend, serves everything, so every batch has one. Every member offers the same backends
// in the same order (they follow from settings and the rank map, which every member shares),
// so every member picks the same for each batch and the calls line up.
//
// The log says, at debug level, which backend each collective first runs on and why it was
// offered, and again whenever another dtype of it runs elsewhere.
//
// A BackendChoice is itself a Backend that sends each call to its pick, for what is built
// over the set's host backend: the staged GPU path reduces through it, so that a GPU
// allreduce combines in the host's order (the hierarchical one where it is preferred).
//
// Like every Backend, used only by the thread that runs the cycles, one at a time: the
// picks it remembers are not locked.

#include <array>
#include <string>
#include <vector>

#include "collectives/backend.h"

namespace chorus {

class BackendChoice final : public Backend {
 public:
  /// `label` names the set in the log; `own` serves everything and is picked last; `why`
  /// says what it is ("the set's MPI communicator").
  BackendChoice(std::string label, Backend* own, std::string why);

  /// Offers `b` before the backends offered so far, so the latest preferred is tried first,
  /// with `why` it is offered (logged at its first pick).
  void prefer(Backend* b, std::string why);
  /// The backend that runs `c` on `dtype`.
  Backend& pick(Collective c, DataType dtype) const;
  /// The set's own backend, which serves everything.
  Backend& own() const { return *offers_.back().backend; }

  // Backend: each call goes to pick(); byte moves as uint8.
  const char* name() const override { return "the set's choice"; }
  int rank() const override { return own().rank(); }
  int size() const override { return own().size(); }
  bool allreduce_without_mpi() const override { return false; }
  Status allreduce(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op,
                   kernels::Scale scale) override {
    return pick(Collective::kAllreduce, dtype).allreduce(send, recv, count, dtype, op, scale);
  }
  Status reducescatter(const void* send, void* recv, const std::vector<int64_t>& counts,
                       DataType dtype, ReduceOp op, kernels::Scale scale) override {
    return pick(Collective::kReducescatter, dtype)
        .reducescatter(send, recv, counts, dtype, op, scale);
  }
  Status allgatherv(const void* send, void* recv, const std::vector<int64_t>& bytes) override {
    return pick(Collective::kAllgather, DataType::kUInt8).allgatherv(send, recv, bytes);
  }
  Status broadcast(void* data, int64_t bytes, int root) override {
    return pick(Collective::kBroadcast, DataType::kUInt8).broadcast(data, bytes, root);
  }
  Status alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                   const std::vector<int64_t>& recv_bytes) override {
    return pick(Collective::kAlltoall, DataType::kUInt8)
        .alltoallv(send, send_bytes, recv, recv_bytes);
  }
  Status barrier() override { return pick(Collective::kBarrier, DataType::kUInt8).barrier(); }

 private:
  struct Offer {
    Backend* backend;
    std::string why;
  };

  std::string label_;
  std::vector<Offer> offers_;  // in the order they are tried
  // The pick per collective and dtype, made once; and per collective the backend last
  // logged, so that the log says only what changes.
  mutable std::array<std::array<Backend*, kNumDataTypes>, kNumCollectives> picked_{};
  mutable std::array<Backend*, kNumCollectives> logged_{};
};

}  // namespace chorus
