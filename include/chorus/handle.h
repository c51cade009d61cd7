#pragma once
/// \file
/// Handle: the trainer's view of one asynchronous collective.

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "chorus/status.h"
#include "chorus/types.h"

namespace chorus {

namespace detail {
struct HandleState;
}

/// Returned by every collective at once; the work runs on Chorus's background thread. In a
/// job on one host with no process set but the global one, a wait() without a timeout may
/// run an allreduce on the calling thread instead, which saves handing it to the background
/// thread and back; it never makes an MPI call there.
///
/// Contract: poll() and wait() may be called from any thread, any number of times.
/// wait() returns the final Status, or kTimedOut if the work is still running when the
/// timeout expires (the work goes on; wait again). Outputs that Chorus allocates
/// (allgather, alltoall, reducescatter without an allocator) are owned by the handle and
/// stay valid while any copy of it lives.
class CHORUS_API Handle {
 public:
  static constexpr std::chrono::milliseconds kForever = std::chrono::milliseconds::max();

  Handle() = default;
  explicit Handle(std::shared_ptr<detail::HandleState> state) : state_(std::move(state)) {}

  /// True once the collective finished, successfully or not.
  bool poll() const;
  /// Blocks until done (or the timeout passes) and returns the final Status.
  Status wait(std::chrono::milliseconds timeout = kForever) const;
  /// The final Status; kFailedPrecondition while the work is still in flight.
  Status status() const;
  /// True when the call itself was refused on this rank (bad arguments, a name already in
  /// flight, Chorus not running): the handle is done with that failure at once, nothing
  /// reached the other ranks, and their collectives and this rank's others go on.
  bool refused() const;

  /// Output i of a collective whose output Chorus allocated (allgather, alltoall,
  /// reducescatter). Valid after a successful wait().
  const TensorRef& output(std::size_t i = 0) const;
  /// alltoall: how many first-dimension rows arrived from each rank.
  const std::vector<int64_t>& received_splits() const;
  /// join: the last rank that joined (in the process set's numbering).
  int last_joined_rank() const;
  /// add_process_set_of_members_async: the set made. Valid after a successful wait().
  ProcessSet process_set() const;

 private:
  std::shared_ptr<detail::HandleState> state_;
};

}  // namespace chorus
