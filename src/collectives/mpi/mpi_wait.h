#pragma once
// Waiting on MPI requests from the background thread, for the host backend's algorithms,
// and the roll call that names the members a wait ran out on.
//
// Every wait is bounded: MPI cannot cancel a collective's messages, so a member that left
// the call (its own part failed and it stopped, it is stopped by a signal, or it is stuck
// outside Chorus) would hold the others for ever. After the bound the waiting members hold a
// roll call on the communicator of the wait: each tells every other that it is here and
// listens for kRollCallGrace; the members heard neither in the wait nor in the roll call are
// the ones named. A member stuck behind another that waits looks the same to its partner as
// the lost one, which is why the roll call asks everyone. After such a failure the ranks are
// out of step: the runtime stops, and MPI is not used again.

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "chorus/status.h"
#include "collectives/backoff.h"

namespace chorus {

/// How long a wait may last before it fails, and where the roll call is held.
struct WaitBound {
  MPI_Comm comm = MPI_COMM_NULL;  ///< the communicator the requests are on
  double seconds = 0;             ///< CHORUS_LIVENESS_SECONDS; 0: for ever
};

/// Waits for `n` requests that move about `bytes` into and out of this rank, testing them
/// (which drives MPI's progress). Between peers that are both here a transfer moves only
/// while MPI is polled: the receiver makes a single-copy transfer inside a test, and the
/// sender's request completes once the receiver says so. So the wait polls without pause
/// until poll_deadline(bytes) (collectives/backoff.h), then sleeps between tests. Past
/// `bound` it fails with ABORTED naming the members of bound.comm that took no part, as
/// ranks of the job (MPI_COMM_WORLD).
Status wait_all(int n, MPI_Request* requests, int64_t bytes, const WaitBound& bound);

/// `ranks` of `comm` as ranks of the job (MPI_COMM_WORLD), the numbers the launcher and the
/// logs use; a rank that cannot be translated is left as it is.
std::vector<int> ranks_in_job(MPI_Comm comm, const std::vector<int>& ranks);

/// Tells every other member of `comm` that this rank is here (a message on `tag` each,
/// never waited for: a member that is gone never receives it).
void announce_here(MPI_Comm comm, int tag);

/// The members of `comm` that are not in `heard` and do not announce themselves on `tag`
/// within kRollCallGrace (collectives/backoff.h), in the ranks of `comm`.
std::vector<int> listen_for(MPI_Comm comm, int tag, std::vector<bool> heard);

}  // namespace chorus
