#pragma once
// Agreeing on success before and after a step that only some ranks might fail. The GPU
// setup (context, NCCL id, communicator) is collective: a rank that fails a local step and
// returns would leave the others waiting in the next collective call. Instead every rank
// reports its own result through one allgather over the set's host backend, and all of
// them fail together when any did. Pure over Backend, so it is unit-tested without MPI.

#include <string>

#include "collectives/backend.h"

namespace chorus {

/// Collective over `host`: every member calls it at the same point with its own `local`
/// result. Returns `local` where it failed; on the other ranks, a kInternal Status naming
/// `step` and the ranks that failed; OK when every rank succeeded. A failed exchange
/// returns the host backend's Status.
Status agree_on_success(Backend& host, const Status& local, const std::string& step);

}  // namespace chorus
