#pragma once
// The world the runtime runs in, without naming what carries it: every rank of the job
// (init, host names, finalize) and one Group per process set, which provides the set's
// control transport and its host-memory backend. MPI provides the job's world
// (collectives/mpi/mpi_world.h) under an MPI launcher, Gloo without one (collectives/gloo/
// gloo_world.h; collectives/world_choice.h chooses); the in-process tests provide one whose
// ranks are threads.
//
// Thread contract: every call comes from the runtime's background thread.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "chorus/status.h"
#include "collectives/backend.h"
#include "collectives/cost_model.h"
#include "transport/control_transport.h"

namespace chorus {

/// What a world's groups take from the configuration.
struct WorldOptions {
  HostAlgorithm host_algorithm = HostAlgorithm::kAuto;  ///< CHORUS_HOST_ALGORITHM
  /// CHORUS_LIVENESS_SECONDS: how long a group's data collective waits for a member before it
  /// fails (ABORTED, naming the members that took no part); 0: for ever.
  double liveness_seconds = 60;
};

/// How this rank's steady clock stands against rank 0's (collectives/clock_offset.h).
struct ClockOffset {
  /// This rank's clock minus rank 0's, in nanoseconds (0 on rank 0).
  int64_t offset_ns = 0;
  /// The most the offset can be off by: half the quickest round trip (0 on rank 0).
  int64_t uncertainty_ns = 0;
  /// An instant every rank shares, in this rank's clock: rank 0's reading when the
  /// measurement began, shifted by the offset. Timelines count their time from it.
  int64_t origin_ns = 0;
};

class Group {
 public:
  virtual ~Group() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual ControlTransport& control() = 0;
  virtual Backend& backend() = 0;
  /// A backend that reduces among the members through shared memory
  /// (collectives/shm/shm_backend.h), or nullptr on every member (`why` says why) where some
  /// member cannot map it. Every member must run on this host. Collective over the group.
  virtual StatusOr<std::unique_ptr<Backend>> shared_memory(std::string* why) = 0;
};

class World {
 public:
  virtual ~World() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Every rank's host name, index = global rank. Collective.
  virtual StatusOr<std::vector<std::string>> host_names() = 0;
  /// This rank's steady clock against rank 0's, measured now. Collective.
  virtual StatusOr<ClockOffset> clock_offset() = 0;
  /// Every rank's `mine`, index = global rank. Collective.
  virtual StatusOr<std::vector<std::string>> allgather(const std::string& mine) = 0;
  /// Creates the group of a set of global ranks. Collective over every rank, in the same
  /// order everywhere; returns nullptr on ranks outside the set.
  virtual StatusOr<std::unique_ptr<Group>> create_group(const std::vector<int>& ranks) = 0;
  /// Partitions the world: the ranks that pass the same `color` (>= 0) form one group,
  /// ordered by `key`, and each rank gets its own. Collective over every rank. One call
  /// builds a whole partition (every host's ranks, say), where create_group builds one set
  /// per call.
  virtual StatusOr<std::unique_ptr<Group>> split(int color, int key) = 0;
  /// Releases what the world holds (MPI: finalizes it if Chorus initialized it). Every group
  /// must be destroyed first.
  virtual Status finalize() = 0;
};

}  // namespace chorus
