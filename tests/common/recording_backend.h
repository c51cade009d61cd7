#pragma once
// A Backend for tests that need no peers: it stands for rank `rank` of a set of `size` ranks,
// records every call with its sizes, and computes what the collective would give where
// every other rank contributes what this one does (reductions), or what the peer hook
// writes (allgather). Header-only; shared by the executor and GPU set-up tests. (A group of
// ranks as threads moving real data: common/meeting_backend.h.)

#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "collectives/backend.h"
#include "kernels/reduce_kernels.h"

namespace chorus::testing {

class RecordingBackend final : public Backend {
 public:
  struct Call {
    std::string op;              ///< "allreduce", "allgatherv", ...
    int64_t count = 0;           ///< elements (reductions) or bytes (data movement)
    std::vector<int64_t> sizes;  ///< per-rank counts or bytes, where the call has them
  };

  RecordingBackend(int rank, int size) : rank_(rank), size_(size) {}
  const char* name() const override { return "recording"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  /// Every call so far, in order.
  const std::vector<Call>& calls() const { return calls_; }
  /// The next call fails with this status (once).
  void fail_next(Status s) { fail_ = std::move(s); }
  /// Writes rank `rank`'s block of an allgather (`bytes` at `block`); without it, the other
  /// ranks' blocks are left as they were.
  using Peer = std::function<void(int rank, void* block, int64_t bytes)>;
  void set_peer(Peer peer) { peer_ = std::move(peer); }

  Status allreduce(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op,
                   kernels::Scale scale) override {
    calls_.push_back({"allreduce", count, {}});
    if (Status s = take_failure(); !s.ok()) return s;
    // Every rank holds what this rank sends: the sum is size copies of it.
    std::vector<const void*> srcs(static_cast<std::size_t>(size_), send);
    std::vector<char> out(static_cast<std::size_t>(count) * dtype_size(dtype));
    if (count > 0) kernels::reduce_ordered(out.data(), srcs.data(), size_, count, dtype, op, scale);
    std::memcpy(recv, out.data(), out.size());
    return {};
  }
  Status reducescatter(const void* send, void* recv, const std::vector<int64_t>& counts,
                       DataType dtype, ReduceOp op, kernels::Scale scale) override {
    const auto [offset, total] = place(counts);
    calls_.push_back({"reducescatter", total, counts});
    if (Status s = take_failure(); !s.ok()) return s;
    const std::size_t esz = dtype_size(dtype);
    const char* mine = static_cast<const char*>(send) + offset * esz;
    std::vector<const void*> srcs(static_cast<std::size_t>(size_), mine);
    std::vector<char> out(static_cast<std::size_t>(counts[rank_]) * esz);
    if (!out.empty()) {
      kernels::reduce_ordered(out.data(), srcs.data(), size_, counts[rank_], dtype, op, scale);
    }
    std::memcpy(recv, out.data(), out.size());
    return {};
  }
  Status allgatherv(const void* send, void* recv, const std::vector<int64_t>& bytes) override {
    const auto [offset, total] = place(bytes);
    calls_.push_back({"allgatherv", total, bytes});
    if (Status s = take_failure(); !s.ok()) return s;
    std::memmove(static_cast<char*>(recv) + offset, send, static_cast<std::size_t>(bytes[rank_]));
    if (peer_) {
      int64_t at = 0;
      for (int r = 0; r < size_; ++r) {
        if (r != rank_) peer_(r, static_cast<char*>(recv) + at, bytes[r]);
        at += bytes[r];
      }
    }
    return {};
  }
  Status broadcast(void* data, int64_t bytes, int root) override {
    calls_.push_back({"broadcast", bytes, {root}});
    return take_failure();
  }
  Status alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                   const std::vector<int64_t>& recv_bytes) override {
    calls_.push_back({"alltoallv", 0, send_bytes});
    return take_failure();
  }
  Status barrier() override {
    calls_.push_back({"barrier", 0, {}});
    return take_failure();
  }

 private:
  // This rank's block in a concatenation of per-rank `sizes`: {its offset, the total}.
  std::pair<int64_t, int64_t> place(const std::vector<int64_t>& sizes) const {
    int64_t offset = 0, total = 0;
    for (std::size_t r = 0; r < sizes.size(); ++r) {
      if (static_cast<int>(r) < rank_) offset += sizes[r];
      total += sizes[r];
    }
    return {offset, total};
  }
  Status take_failure() {
    Status s = std::move(fail_);
    fail_ = Status();
    return s;
  }

  int rank_;
  int size_;
  std::vector<Call> calls_;
  Status fail_;
  Peer peer_;
};

}  // namespace chorus::testing
