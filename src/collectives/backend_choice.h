#pragma once
// One process set's backends for one memory (host, or its GPU), in the order the provider
// registry prefers them (collectives/providers.h, which assembles every choice), and the one
// choice of which runs each batch: the first that serves the batch's collective and dtype
// (Backend::serves). The last one offered, the set's own backend, serves everything, so
// every batch has one. Every member offers the same backends in the same order (they follow
// from settings and the rank map, which every member shares), so every member picks the
// same for each batch and the calls line up. The choice owns the backends its providers made.
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
#include <memory>
#include <string>
#include <vector>

#include "collectives/backend.h"

namespace chorus {

class BackendChoice final : public Backend {
 public:
  /// A backend offered to the choice, and why (logged at its first pick).
  struct Offer {
    Backend* backend = nullptr;
    std::string why;
    /// What the choice keeps alive for it: the backend itself where its provider made it,
    /// and what it is built on, users before what they use (destroyed in that order).
    std::vector<std::unique_ptr<Backend>> owned;
    /// The provider that made it (collectives/providers.h); empty for a backend offered by
    /// hand.
    std::string provider;
  };

  /// `offers` in the order they are tried; the last serves everything. `label` names the
  /// set in the log.
  BackendChoice(std::string label, std::vector<Offer> offers);
  /// One backend, `own`, which serves everything; `why` says what it is.
  BackendChoice(std::string label, Backend* own, std::string why);
  BackendChoice(BackendChoice&&) = default;
  BackendChoice& operator=(BackendChoice&&) = default;
  ~BackendChoice() override;

  /// The backend that runs `c` on `dtype`.
  Backend& pick(Collective c, DataType dtype) const;
  /// The set's own backend, which serves everything.
  Backend& own() const { return *offers_.back().backend; }
  /// Whether `provider` offered a backend to this choice.
  bool offered_by(const std::string& provider) const;
  /// Leaves what the choice owns undestroyed, for the process's exit: after a GPU failure
  /// the device may never be idle again, and destroying a communicator or freeing device
  /// memory would wait for it.
  void abandon();

  // Backend: each call goes to pick(); byte moves as uint8.
  const char* name() const override { return "the set's choice"; }
  int rank() const override { return own().rank(); }
  int size() const override { return own().size(); }
  bool allreduce_without_mpi() const override { return false; }
  /// Every backend offered takes it.
  void set_host_algorithm(HostAlgorithm algorithm) override {
    for (Offer& o : offers_) o.backend->set_host_algorithm(algorithm);
  }
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
  std::string label_;
  std::vector<Offer> offers_;  // in the order they are tried
  // The pick per collective and dtype, made once; and per collective the backend last
  // logged, so that the log says only what changes.
  mutable std::array<std::array<Backend*, kNumDataTypes>, kNumCollectives> picked_{};
  mutable std::array<Backend*, kNumCollectives> logged_{};
};

}  // namespace chorus
