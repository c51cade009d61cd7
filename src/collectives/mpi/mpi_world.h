#pragma once
// The job's world over MPI (collectives/world.h), without exposing mpi.h: each group runs
// over two private communicators (control and data), so Chorus's traffic never mixes with
// the application's.

#include <memory>

#include "chorus/status.h"
#include "collectives/world.h"

namespace chorus {

/// Initializes MPI (MPI_THREAD_FUNNELED: only the calling thread will use it), or adopts an
/// MPI the program initialized, which must provide MPI_THREAD_MULTIPLE since the program's
/// threads and Chorus's thread then both make MPI calls.
StatusOr<std::unique_ptr<World>> init_mpi_world(const WorldOptions& options = {});

}  // namespace chorus
