#pragma once
// A Backend for tests whose ranks are threads of one process: the members of a group share
// a Meeting, and each call is a meeting in which every member posts its buffer and reads
// the others' in place. Real data moves, so results can be checked bit for bit. Header-only;
// used by the in-process runtime's world (tests/inproc/in_memory_world.h) and the
// hierarchical allreduce's test. (RecordingBackend, beside it, stands for one rank alone.)
//
// - Members match calls by their own count of calls, as MPI matches collectives by order,
//   and each call carries a signature ("allreduce(7)"): members that call different
//   collectives fail, naming both, instead of reading each other's buffers wrongly.
// - A member waits at most the meeting's timeout for the others, then fails and aborts the
//   meeting, so that a bug fails the test on every member instead of hanging it.
// - Results go to a buffer of the member's own first and reach `recv` after the meeting,
//   when no member reads this member's buffers any more (recv may be, or overlap, send).
// - With a log, every call is appended to it as "<label>.<signature>".
//
// Thread safety: one MeetingBackend per member, called by one thread at a time; the
// Meeting is shared and locks internally.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "collectives/backend.h"
#include "kernels/reduce_kernels.h"

namespace chorus::testing {

class Meeting {
 public:
  explicit Meeting(int size, std::chrono::milliseconds timeout = std::chrono::seconds(20))
      : size_(size), timeout_(timeout) {}
  int size() const { return size_; }

  /// Member `index`'s call number `call`: posts `mine`, waits for every member's, runs
  /// `use` on all of them (index = member), then waits until every member ran its own.
  Status meet(int index, uint64_t call, const void* mine, const std::string& signature,
              const std::function<void(const std::vector<const void*>&)>& use) {
    std::unique_lock<std::mutex> lock(mu_);
    auto wait = [&](auto ready) {
      const bool ok = cv_.wait_for(lock, timeout_, [&] { return ready() || !aborted_.empty(); });
      return ok && aborted_.empty();
    };
    auto fail = [&](const std::string& why) {
      if (aborted_.empty()) aborted_ = why;
      cv_.notify_all();
      return Status(StatusCode::kAborted, "meeting: " + aborted_);
    };
    if (!aborted_.empty()) return fail(aborted_);
    Round& round = rounds_[call];
    if (round.posted.empty()) {
      round.posted.assign(static_cast<std::size_t>(size_), nullptr);
      round.signatures.assign(static_cast<std::size_t>(size_), std::string());
    }
    round.posted[index] = mine;
    round.signatures[index] = signature;
    if (++round.arrived == size_) cv_.notify_all();
    if (!wait([&] { return round.arrived == size_; })) {
      return fail("member " + std::to_string(index) + " waited " +
                  std::to_string(timeout_.count()) + " ms for the others in call " +
                  std::to_string(call) + ", " + signature);
    }
    for (int i = 0; i < size_; ++i) {
      if (round.signatures[i] != round.signatures[0]) {
        return fail("call " + std::to_string(call) + ": member 0 called " + round.signatures[0] +
                    ", member " + std::to_string(i) + " " + round.signatures[i]);
      }
    }
    const std::vector<const void*> all = round.posted;
    lock.unlock();
    use(all);
    lock.lock();
    if (++round.used == size_) cv_.notify_all();
    if (!wait([&] { return round.used == size_; })) {
      return fail("member " + std::to_string(index) + " waited for the others to read, call " +
                  std::to_string(call));
    }
    if (++round.left == size_) rounds_.erase(call);
    return {};
  }

  /// Fails every meeting in flight and to come with `why`.
  void abort(const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (aborted_.empty()) aborted_ = why;
    }
    cv_.notify_all();
  }

 private:
  struct Round {
    std::vector<const void*> posted;
    std::vector<std::string> signatures;
    int arrived = 0;
    int used = 0;
    int left = 0;
  };

  const int size_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Round> rounds_;
  std::string aborted_;
};

class MeetingBackend final : public Backend {
 public:
  /// `on_failure`: told of a failed meeting (an in-memory job aborts its other meetings).
  MeetingBackend(Meeting* meeting, int rank, std::string label = {},
                 std::vector<std::string>* log = nullptr,
                 std::function<void(const Status&)> on_failure = {})
      : meeting_(meeting),
        rank_(rank),
        label_(std::move(label)),
        log_(log),
        on_failure_(std::move(on_failure)) {}

  const char* name() const override { return "meeting"; }
  int rank() const override { return rank_; }
  int size() const override { return meeting_->size(); }
  bool allreduce_without_mpi() const override { return true; }

  Status allreduce(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op,
                   kernels::Scale scale) override {
    std::vector<char> out(static_cast<std::size_t>(count) * dtype_size(dtype));
    return meet(send, "allreduce(" + std::to_string(count) + ")", recv, out,
                [&](const std::vector<const void*>& all) {
                  if (count > 0) {
                    kernels::reduce_ordered(out.data(), all.data(), size(), count, dtype, op,
                                            scale);
                  }
                });
  }
  Status reducescatter(const void* send, void* recv, const std::vector<int64_t>& counts,
                       DataType dtype, ReduceOp op, kernels::Scale scale) override {
    const std::size_t esz = dtype_size(dtype);
    const int64_t offset = before(counts, rank_);
    std::vector<char> out(static_cast<std::size_t>(counts[rank_]) * esz);
    return meet(send, "reducescatter(" + list(counts) + ")", recv, out,
                [&](const std::vector<const void*>& all) {
                  std::vector<const void*> blocks;
                  for (const void* p : all)
                    blocks.push_back(static_cast<const char*>(p) + offset * esz);
                  if (!out.empty()) {
                    kernels::reduce_ordered(out.data(), blocks.data(), size(), counts[rank_], dtype,
                                            op, scale);
                  }
                });
  }
  Status allgatherv(const void* send, void* recv, const std::vector<int64_t>& bytes) override {
    std::vector<char> out(static_cast<std::size_t>(before(bytes, size())));
    return meet(send, "allgatherv(" + list(bytes) + ")", recv, out,
                [&](const std::vector<const void*>& all) {
                  for (int r = 0; r < size(); ++r) {
                    if (bytes[r] > 0) std::memcpy(out.data() + before(bytes, r), all[r], bytes[r]);
                  }
                });
  }
  Status broadcast(void* data, int64_t bytes, int root) override {
    std::vector<char> out(static_cast<std::size_t>(bytes));
    return meet(data, "broadcast", data, out, [&](const std::vector<const void*>& all) {
      if (!out.empty()) std::memcpy(out.data(), all[root], out.size());
    });
  }
  Status alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                   const std::vector<int64_t>& recv_bytes) override {
    struct Posted {
      const void* send;
      const std::vector<int64_t>* send_bytes;
    } mine{send, &send_bytes};
    std::vector<char> out(static_cast<std::size_t>(before(recv_bytes, size())));
    return meet(&mine, "alltoallv", recv, out, [&](const std::vector<const void*>& all) {
      for (int r = 0; r < size(); ++r) {
        const auto* peer = static_cast<const Posted*>(all[r]);
        if (recv_bytes[r] == 0) continue;
        std::memcpy(out.data() + before(recv_bytes, r),
                    static_cast<const char*>(peer->send) + before(*peer->send_bytes, rank_),
                    static_cast<std::size_t>(recv_bytes[r]));
      }
    });
  }
  Status barrier() override {
    std::vector<char> none;
    return meet(nullptr, "barrier", nullptr, none, [](const std::vector<const void*>&) {});
  }

 private:
  // The sum of the first `n` sizes: where block n starts (n = size: the total).
  static int64_t before(const std::vector<int64_t>& sizes, int n) {
    return std::accumulate(sizes.begin(), sizes.begin() + n, int64_t{0});
  }
  static std::string list(const std::vector<int64_t>& v) {
    std::string s;
    for (int64_t x : v) s += std::to_string(x) + ",";
    return s;
  }
  Status meet(const void* mine, const std::string& signature, void* recv,
              const std::vector<char>& out,
              const std::function<void(const std::vector<const void*>&)>& use) {
    if (log_) log_->push_back(label_ + "." + signature);
    Status s = meeting_->meet(rank_, calls_++, mine, signature, use);
    if (!s.ok()) {
      if (on_failure_) on_failure_(s);
      return s;
    }
    if (!out.empty()) std::memcpy(recv, out.data(), out.size());
    return {};
  }

  Meeting* meeting_;
  const int rank_;
  const std::string label_;
  std::vector<std::string>* log_;
  std::function<void(const Status&)> on_failure_;
  uint64_t calls_ = 0;
};

}  // namespace chorus::testing
