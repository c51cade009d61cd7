#pragma once
// A job whose ranks are threads of one process: the world (collectives/world.h) that the
// in-process runtime tests hand each rank's Runtime, with the in-memory control transport
// (in_memory_transport.h) for the negotiation and a backend that moves real data by
// reading the other members' buffers in place (common/meeting_backend.h).
//
// Every world-wide call (allgather, create_group, split) and every backend call is a
// rendezvous of its members, matched by each member's own count of such calls, as MPI
// matches collectives by order. A rendezvous waits at most the job's timeout, then fails
// and aborts the job, so that a runtime bug fails the test on every rank instead of hanging
// it.
//
// Thread safety: a rank's World, and the groups it creates, are used by that rank's
// background thread only (and, for the backend's allreduce, by a trainer thread running a
// cycle in its stead); the shared state locks internally.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "collectives/world.h"
#include "common/meeting_backend.h"

namespace chorus::testing {

class Hub;

/// The job: `hosts[r]` is rank r's host name (ranks that share one run on one host, with the
/// host's shared board as in a real job).
class InMemoryJob {
 public:
  explicit InMemoryJob(std::vector<std::string> hosts,
                       std::chrono::milliseconds timeout = std::chrono::seconds(20));
  ~InMemoryJob();
  InMemoryJob(const InMemoryJob&) = delete;
  InMemoryJob& operator=(const InMemoryJob&) = delete;

  int size() const { return static_cast<int>(hosts_.size()); }
  const std::string& host(int rank) const { return hosts_[rank]; }
  /// Rank `rank`'s world, made on its runtime's background thread. Its backends combine in
  /// rank order whatever WorldOptions say.
  std::function<StatusOr<std::unique_ptr<World>>(const WorldOptions&)> world(int rank);
  /// Fails every rendezvous in flight and to come.
  void abort(const std::string& why);

  /// The shared parts of the group that the world-wide call number `call` creates for the
  /// members `key` (its colour, for split): made by the first member to ask.
  struct Shared {
    std::unique_ptr<Hub> hub;          // the control transport's
    std::unique_ptr<Meeting> meeting;  // the backend's
  };
  Shared& shared(uint64_t call, int key, int size);
  Meeting& world_meeting() { return world_meeting_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  const std::vector<std::string> hosts_;
  const std::chrono::milliseconds timeout_;
  Meeting world_meeting_;
  std::mutex mu_;
  std::map<std::pair<uint64_t, int>, Shared> groups_;
};

}  // namespace chorus::testing
