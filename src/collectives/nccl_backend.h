#pragma once
// The seam of the NCCL backend (GPU memory). Compiled when CHORUS_WITH_NCCL is on; the
// backend itself (communicators per process set, streams, async error polling) arrives
// with the GPU path. Until then device tensors are refused at enqueue with a clear error.

#include <string>

namespace chorus {

/// "NCCL 2.x.y" as linked, for the debug log at init.
std::string nccl_version_string();

}  // namespace chorus
