#pragma once
// Waiting on MPI requests from the background thread, for the host backend's algorithms.

#include <mpi.h>

#include <cstdint>

#include "chorus/status.h"

namespace chorus {

/// Waits for `n` requests that move about `bytes` into and out of this rank, testing them
/// (which drives MPI's progress). Between peers that are both here a transfer moves only
/// while MPI is polled: the receiver makes a single-copy transfer inside a test, and the
/// sender's request completes once the receiver says so. So the wait polls without pause
/// until poll_deadline(bytes) (collectives/backoff.h), then sleeps between tests.
Status wait_all(int n, MPI_Request* requests, int64_t bytes);

}  // namespace chorus
