#include "in_memory_world.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "in_memory_transport.h"

namespace chorus::testing {

namespace {

class InMemoryGroup final : public Group {
 public:
  InMemoryGroup(InMemoryJob* job, InMemoryJob::Shared& shared, int rank)
      : control_(shared.hub.get(), rank),
        backend_(shared.meeting.get(), rank, {}, nullptr,
                 [job](const Status& s) { job->abort(s.message()); }) {}
  int rank() const override { return control_.rank(); }
  int size() const override { return control_.size(); }
  ControlTransport& control() override { return control_; }
  Backend& backend() override { return backend_; }
  StatusOr<std::unique_ptr<Backend>> shared_memory(std::string* why) override {
    *why = "an in-memory group reads its members' buffers in place";
    return std::unique_ptr<Backend>();
  }

 private:
  InMemoryTransport control_;
  MeetingBackend backend_;
};

class InMemoryWorld final : public World {
 public:
  InMemoryWorld(InMemoryJob* job, int rank) : job_(job), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return job_->size(); }

  StatusOr<std::vector<std::string>> host_names() override { return allgather(job_->host(rank_)); }
  // One process, one clock: every rank's offset is 0.
  StatusOr<ClockOffset> clock_offset() override {
    const auto now = std::chrono::steady_clock::now().time_since_epoch();
    const int64_t mine = std::chrono::duration_cast<std::chrono::nanoseconds>(now).count();
    StatusOr<std::vector<std::string>> all = allgather(std::to_string(mine));
    if (!all.ok()) return all.status();
    ClockOffset offset;
    offset.origin_ns = std::stoll(all->front());
    return offset;
  }
  StatusOr<std::vector<std::string>> allgather(const std::string& mine) override {
    std::vector<std::string> all;
    Status s = meet(&mine, "allgather", [&](const std::vector<const void*>& posted) {
      for (const void* p : posted) all.push_back(*static_cast<const std::string*>(p));
    });
    if (!s.ok()) return s;
    return all;
  }
  StatusOr<std::unique_ptr<Group>> create_group(const std::vector<int>& ranks) override {
    const uint64_t call = calls_;
    if (Status s = meet(nullptr, "create_group", [](const std::vector<const void*>&) {}); !s.ok()) {
      return s;
    }
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
    Status s = meet(&mine, "split", [&](const std::vector<const void*>& posted) {
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
  Status meet(const void* mine, const std::string& signature,
              const std::function<void(const std::vector<const void*>&)>& use) {
    Status s = job_->world_meeting().meet(rank_, calls_++, mine, signature, use);
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

std::function<StatusOr<std::unique_ptr<World>>(const WorldOptions&)> InMemoryJob::world(int rank) {
  return [this, rank](const WorldOptions&) -> StatusOr<std::unique_ptr<World>> {
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
