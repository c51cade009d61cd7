#pragma once
// MPI for the rest of the library, without exposing mpi.h: the world (init, finalize,
// host names) and one MpiGroup per process set, which provides the set's control transport
// and its MPI backend over two private communicators (control and data), so Chorus's
// traffic never mixes with the application's.
//
// Thread contract: every call comes from the background thread, which is also the thread
// that initialized MPI when Chorus did.

#include <memory>
#include <string>
#include <vector>

#include "chorus/status.h"
#include "collectives/backend.h"
#include "transport/control_transport.h"

namespace chorus {

class MpiGroup {
 public:
  virtual ~MpiGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual ControlTransport& control() = 0;
  virtual Backend& backend() = 0;
  /// Lets the backend reduce through shared memory (collectives/shm_reducer.h) where every
  /// member can map it; `why` says why not otherwise. Every member must run on this host.
  /// Collective over the group.
  virtual Status join_host(std::string* why) = 0;
};

class MpiWorld {
 public:
  /// Initializes MPI (MPI_THREAD_FUNNELED: only the calling thread will use it), or adopts
  /// an MPI the program initialized, which must provide MPI_THREAD_MULTIPLE since the
  /// program's threads and Chorus's thread then both make MPI calls.
  static StatusOr<std::unique_ptr<MpiWorld>> init();
  virtual ~MpiWorld() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Every rank's host name, index = global rank. Collective.
  virtual StatusOr<std::vector<std::string>> host_names() = 0;
  /// Every rank's `mine`, index = global rank. Collective.
  virtual StatusOr<std::vector<std::string>> allgather(const std::string& mine) = 0;
  /// Creates the communicators of a set of global ranks. Collective over every rank, in the
  /// same order everywhere; returns nullptr on ranks outside the set.
  virtual StatusOr<std::unique_ptr<MpiGroup>> create_group(const std::vector<int>& ranks) = 0;
  /// Partitions the world (MPI_Comm_split): the ranks that pass the same `color` (>= 0) form
  /// one group, ordered by `key`, and each rank gets its own. Collective over every rank.
  /// One call builds a whole partition (every host's ranks, say), where create_group
  /// builds one set per call.
  virtual StatusOr<std::unique_ptr<MpiGroup>> split(int color, int key) = 0;
  /// Finalizes MPI if init() initialized it. Every group must be destroyed first.
  virtual Status finalize() = 0;
};

}  // namespace chorus
