#pragma once
// The shared-memory provider of host-memory reductions: allreduce and reducescatter among
// the ranks of one host, every dtype. The provider registry offers it to a set whose members
// all run on one host, before the set's own group (collectives/providers.h), and to the
// hierarchical allreduce's local group; the group keeps the data movement.
//
// Between ranks of one host an MPI message of any size costs a handshake, and a large one
// a copy made by a system call that pins the sender's pages; the receiver makes progress
// only while it tests. Here each rank instead owns a slot in one shared segment: a counter
// of its arrivals and two buffers used by turns, each with one region per rank. The data
// is cut into the same blocks as on the MPI path (block q is combined by rank q) and moves
// in chunks; chunk g carries piece g of every block and uses buffer g % 2:
//  1. every rank copies piece g of each other rank's block into that rank's region of its
//     own buffer, and arrives;
//  2. once all have arrived, each rank combines piece g of its own block, in rank order,
//     from its own input and its region in every peer's buffer, into its output;
//  3. allreduce only: it also copies that result into its own region, arrives, and once
//     all have, copies the other blocks' pieces from their owners' buffers.
// A rank writes buffer g % 2 again in chunk g + 2 only after every rank arrived in step 1
// of chunk g + 1, and so finished reading it in chunk g. An allreduce whose input fits in
// one region (16 KiB or more) is one chunk of its own with one wait: every rank copies its
// input into its own buffer, arrives, and combines every element from every rank's copy. A rank
// waits for the others by reading their counters: polling while they should be close, then sleeping
// in short naps, and every few milliseconds of naps checking that the process it waits for still
// exists: a rank that died mid-reduction fails the reduction on the others, naming it, where the
// launcher does not end the job. A rank that is alive but does not arrive (stopped, stuck, or
// gone from the call after its own part failed) fails the wait after CHORUS_LIVENESS_SECONDS,
// naming the ranks that have not arrived; the turns are then out of step and the runtime stops.
//
// Every element is ((x0 op x1) op x2) ..., combined by its block's owner in rank order:
// the same bits on every rank, fused or alone, whatever the size. It makes no MPI call, so
// a trainer thread waiting on a handle may run its allreduce (allreduce_without_mpi).
//
// Thread contract: the backend's (collectives/backend.h), one thread at a time; every
// member calls the same methods in the same order.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "chorus/status.h"
#include "chorus/types.h"
#include "collectives/backend.h"
#include "collectives/process_id.h"
#include "collectives/world.h"
#include "kernels/reduce_kernels.h"
#include "transport/shared_segment.h"

namespace chorus {

class ControlTransport;

/// The shared-memory provider of `group`'s reductions (Group::shared_memory), every member
/// on this host; nullptr where `allowed` (CHORUS_SHARED_MEMORY) is false or some member
/// cannot map it, and then the debug log says why, naming `label`. Collective over the
/// group when allowed; `allowed` must be the same on every member.
StatusOr<std::unique_ptr<Backend>> shared_memory_provider(Group& group, bool allowed,
                                                          const std::string& label);

class ShmBackend final : public Backend {
 public:
  /// Maps one segment among the members of `control`, which must all run on this host:
  /// the backend, or nullptr on every member where some member could not map it (`why`
  /// says why; not an error). Collective over `control`. Waits fail after `liveness_seconds`
  /// (0: never). What a Group's shared_memory() returns.
  static StatusOr<std::unique_ptr<Backend>> join(ControlTransport& control, double liveness_seconds,
                                                 std::string* why);

  /// The segment's size for `size` ranks.
  static std::size_t segment_bytes(int size);
  /// Initializes a new segment of segment_bytes(size) (on the rank that created it).
  static void init_segment(void* base, int size);

  /// Uses `segment` (mapped by every member, initialized by init_segment), as `rank` of
  /// `size`; a wait for the others fails after `liveness_seconds` (0: never). Its messages
  /// name member q as job_ranks[q] (empty: as q).
  ShmBackend(SharedSegment segment, int rank, int size, double liveness_seconds,
             std::vector<int> job_ranks = {});

  const char* name() const override { return "shared memory"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool serves(Collective c, DataType) const override {
    return c == Collective::kAllreduce || c == Collective::kReducescatter;
  }
  bool allreduce_without_mpi() const override { return true; }

  /// In the MPI path's blocks (even_blocks), block q combined by rank q.
  Status allreduce(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op,
                   kernels::Scale scale) override;
  Status reducescatter(const void* send, void* recv, const std::vector<int64_t>& counts,
                       DataType dtype, ReduceOp op, kernels::Scale scale) override;

 private:
  struct alignas(64) Counter {
    std::atomic<uint64_t> arrivals{0};
    SharedProcessId process;  // the owner, for the liveness check
  };

  Status reduce(const void* send, void* recv, const std::vector<int64_t>& counts, DataType dtype,
                ReduceOp op, kernels::Scale scale, bool share);
  // An allreduce small enough for one region per rank (cc).
  Status allreduce_whole(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op,
                         kernels::Scale scale);
  char* region(int owner, uint64_t chunk, int block) const;
  // Counts this rank's arrival, then waits until every rank has arrived as often; `bytes`:
  // about what the others move in the meantime. Fails if a rank waited for has exited, or
  // past the liveness bound (ran_out).
  Status arrive_and_wait(int64_t bytes);
  Status ran_out() const;
  int job_rank(int member) const { return job_ranks_[static_cast<std::size_t>(member)]; }

  static std::size_t region_bytes(int size);

  SharedSegment segment_;
  int rank_;
  int size_;
  double liveness_seconds_;
  std::vector<int> job_ranks_;  // member -> rank of the job, for the messages
  std::size_t region_;
  Counter* counters_;
  char* buffers_;
  uint64_t chunks_ = 0;    // chunks so far: the next uses buffer chunks_ % 2
  uint64_t arrivals_ = 0;  // this rank's, as in its counter
  std::vector<const void*> sources_;
  std::vector<int64_t> offsets_;
  std::vector<int64_t> blocks_;
};

}  // namespace chorus
