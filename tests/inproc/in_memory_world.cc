#include "in_memory_world.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>

#include "in_memory_transport.h"
#include "kernels/reduce_kernels.h"

namespace chorus::testing {

Status Meeting::meet(int index, uint64_t call, const void* mine,
                     const std::function<void(const std::vector<const void*>&)>& use) {
  std::unique_lock<std::mutex> lock(mu_);
  auto wait = [&](auto ready) {
    const bool ok = cv_.wait_for(lock, timeout_, [&] { return ready() || !aborted_.empty(); });
    return ok && aborted_.empty();
  };
  auto failure = [&](const char* stage) {
    if (!aborted_.empty()) return Status(StatusCode::kAborted, "in-memory job: " + aborted_);
    aborted_ = "member " + std::to_string(index) + " waited " + std::to_string(timeout_.count()) +
               " ms for the others in call " + std::to_string(call) + " (" + stage + ")";
    cv_.notify_all();
    return Status(StatusCode::kAborted, "in-memory job: " + aborted_);
  };
  if (!aborted_.empty()) return failure("start");
  Round& round = rounds_[call];
  if (round.posted.empty()) round.posted.assign(static_cast<std::size_t>(size_), nullptr);
  round.posted[index] = mine;
  if (++round.arrived == size_) cv_.notify_all();
  if (!wait([&] { return round.arrived == size_; })) return failure("arrival");
  const std::vector<const void*> all = round.posted;
  lock.unlock();
  use(all);
  lock.lock();
  if (++round.used == size_) cv_.notify_all();
  if (!wait([&] { return round.used == size_; })) return failure("reading");
  if (++round.left == size_) rounds_.erase(call);
  return {};
}

void Meeting::abort(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_.empty()) aborted_ = why;
  }
  cv_.notify_all();
}

namespace {

// The offset of block `index` among `sizes`, and their total.
std::pair<int64_t, int64_t> place(const std::vector<int64_t>& sizes, int index) {
  const int64_t before = std::accumulate(sizes.begin(), sizes.begin() + index, int64_t{0});
  return {before, std::accumulate(sizes.begin(), sizes.end(), int64_t{0})};
}

// Moves data by reading the other members' buffers during a meeting. Results go to a
// buffer of its own first and reach `recv` after the meeting, when no member reads this
// member's buffers any more (recv may be, or overlap, send).
class InMemoryBackend final : public Backend {
 public:
  InMemoryBackend(InMemoryJob* job, Meeting* meeting, int rank)
      : job_(job), meeting_(meeting), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return meeting_->size(); }
  bool allreduce_without_mpi() const override { return true; }

  Status allreduce(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op,
                   kernels::Scale scale) override {
    std::vector<char> out(static_cast<std::size_t>(count) * dtype_size(dtype));
    return meet(send, recv, out, [&](const std::vector<const void*>& all) {
      if (count > 0)
        kernels::reduce_ordered(out.data(), all.data(), size(), count, dtype, op, scale);
    });
  }
  Status reducescatter(const void* send, void* recv, const std::vector<int64_t>& counts,
                       DataType dtype, ReduceOp op, kernels::Scale scale) override {
    const std::size_t esz = dtype_size(dtype);
    const int64_t offset = place(counts, rank_).first;
    std::vector<char> out(static_cast<std::size_t>(counts[rank_]) * esz);
    return meet(send, recv, out, [&](const std::vector<const void*>& all) {
      std::vector<const void*> blocks;
      for (const void* p : all) blocks.push_back(static_cast<const char*>(p) + offset * esz);
      if (!out.empty()) {
        kernels::reduce_ordered(out.data(), blocks.data(), size(), counts[rank_], dtype, op, scale);
      }
    });
  }
  Status allgatherv(const void* send, void* recv, const std::vector<int64_t>& bytes) override {
    std::vector<char> out(static_cast<std::size_t>(place(bytes, size()).second));
    return meet(send, recv, out, [&](const std::vector<const void*>& all) {
      for (int r = 0; r < size(); ++r) {
        std::memcpy(out.data() + place(bytes, r).first, all[r], static_cast<std::size_t>(bytes[r]));
      }
    });
  }
  Status broadcast(void* data, int64_t bytes, int root) override {
    std::vector<char> out(static_cast<std::size_t>(bytes));
    return meet(data, data, out, [&](const std::vector<const void*>& all) {
      std::memcpy(out.data(), all[root], out.size());
    });
  }
  Status alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                   const std::vector<int64_t>& recv_bytes) override {
    struct Posted {
      const void* send;
      const std::vector<int64_t>* send_bytes;
    } mine{send, &send_bytes};
    std::vector<char> out(static_cast<std::size_t>(place(recv_bytes, size()).second));
    return meet(&mine, recv, out, [&](const std::vector<const void*>& all) {
      for (int r = 0; r < size(); ++r) {
        const auto* peer = static_cast<const Posted*>(all[r]);
        const int64_t from = place(*peer->send_bytes, rank_).first;
        std::memcpy(out.data() + place(recv_bytes, r).first,
                    static_cast<const char*>(peer->send) + from,
                    static_cast<std::size_t>(recv_bytes[r]));
      }
    });
  }
  Status barrier() override {
    std::vector<char> none;
    return meet(nullptr, nullptr, none, [](const std::vector<const void*>&) {});
  }

 private:
  Status meet(const void* mine, void* recv, const std::vector<char>& out,
              const std::function<void(const std::vector<const void*>&)>& use) {
    Status s = meeting_->meet(rank_, calls_++, mine, use);
    if (!s.ok()) {
      job_->abort(s.message());
      return s;
    }
    if (!out.empty()) std::memcpy(recv, out.data(), out.size());
    return {};
  }

  InMemoryJob* job_;
  Meeting* meeting_;
  const int rank_;
  uint64_t calls_ = 0;
};

class InMemoryGroup final : public Group {
 public:
  InMemoryGroup(InMemoryJob* job, InMemoryJob::Shared& shared, int rank)
      : control_(shared.hub.get(), rank), backend_(job, shared.meeting.get(), rank) {}
  int rank() const override { return control_.rank(); }
  int size() const override { return control_.size(); }
  ControlTransport& control() override { return control_; }
  Backend& backend() override { return backend_; }
  Status join_host(std::string* why) override {
    *why = "an in-memory group reads its members' buffers in place";
    return {};
  }

 private:
  InMemoryTransport control_;
  InMemoryBackend backend_;
};

class InMemoryWorld final : public World {
 public:
  InMemoryWorld(InMemoryJob* job, int rank) : job_(job), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return job_->size(); }

  StatusOr<std::vector<std::string>> host_names() override { return allgather(job_->host(rank_)); }
  StatusOr<std::vector<std::string>> allgather(const std::string& mine) override {
    std::vector<std::string> all;
    Status s = meet(&mine, [&](const std::vector<const void*>& posted) {
      for (const void* p : posted) all.push_back(*static_cast<const std::string*>(p));
    });
    if (!s.ok()) return s;
    return all;
  }
  StatusOr<std::unique_ptr<Group>> create_group(const std::vector<int>& ranks) override {
    const uint64_t call = calls_;
    if (Status s = meet(nullptr, [](const std::vector<const void*>&) {}); !s.ok()) return s;
    auto it = std::find(ranks.begin(), ranks.end(), rank_);
    if (it == ranks.end()) return std::unique_ptr<Group>();
    InMemoryJob::Shared& shared = job_->shared(call, 0, static_cast<int>(ranks.size()));
    return std::unique_ptr<Group>(
        new InMemoryGroup(job_, shared, static_cast<int>(it - ranks.begin())));
  }
  StatusOr<std::unique_ptr<Group>> split(int color, int key) override {
    if (color < 0) return invalid_argument("split: negative color");
    const uint64_t call = calls_;
    const std::pair<int, int> mine{color, key};
    std::vector<std::pair<int, int>> all;  // every rank's (color, key)
    Status s = meet(&mine, [&](const std::vector<const void*>& posted) {
      for (const void* p : posted) all.push_back(*static_cast<const std::pair<int, int>*>(p));
    });
    if (!s.ok()) return s;
    std::vector<std::pair<int, int>> members;  // (key, rank) of this colour
    for (int r = 0; r < size(); ++r) {
      if (all[r].first == color) members.emplace_back(all[r].second, r);
    }
    std::sort(members.begin(), members.end());
    const int index = static_cast<int>(
        std::find(members.begin(), members.end(), std::make_pair(key, rank_)) - members.begin());
    InMemoryJob::Shared& shared = job_->shared(call, color, static_cast<int>(members.size()));
    return std::unique_ptr<Group>(new InMemoryGroup(job_, shared, index));
  }
  Status finalize() override { return {}; }

 private:
  Status meet(const void* mine, const std::function<void(const std::vector<const void*>&)>& use) {
    Status s = job_->world_meeting().meet(rank_, calls_++, mine, use);
    if (!s.ok()) job_->abort(s.message());
    return s;
  }

  InMemoryJob* job_;
  const int rank_;
  uint64_t calls_ = 0;
};

}  // namespace

InMemoryJob::InMemoryJob(std::vector<std::string> hosts, std::chrono::milliseconds timeout)
    : hosts_(std::move(hosts)),
      timeout_(timeout),
      world_meeting_(static_cast<int>(hosts_.size()), timeout) {}

InMemoryJob::~InMemoryJob() = default;

std::function<StatusOr<std::unique_ptr<World>>()> InMemoryJob::world(int rank) {
  return [this, rank]() -> StatusOr<std::unique_ptr<World>> {
    return std::unique_ptr<World>(new InMemoryWorld(this, rank));
  };
}

InMemoryJob::Shared& InMemoryJob::shared(uint64_t call, int key, int size) {
  std::lock_guard<std::mutex> lock(mu_);
  Shared& s = groups_[{call, key}];
  if (!s.hub) {
    s.hub = std::make_unique<Hub>(size, timeout_);
    s.meeting = std::make_unique<Meeting>(size, timeout_);
  }
  return s;
}

void InMemoryJob::abort(const std::string& why) {
  world_meeting_.abort(why);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, s] : groups_) {
    s.hub->abort(why);
    s.meeting->abort(why);
  }
}

}  // namespace chorus::testing
