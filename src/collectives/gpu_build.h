#pragma once
// What this build's GPU path holds, for the layers above to ask without preprocessor tests:
// the collectives layer alone is compiled knowing (CHORUS_WITH_CUDA, CHORUS_WITH_NCCL).

#include <string>

namespace chorus {

/// True when the CUDA path is built in.
bool built_with_cuda();
/// NCCL_VERSION_CODE of the nccl.h this build compiled against; 0 without NCCL.
int nccl_compiled_version_code();
/// "NCCL 2.x.y" as linked, for the debug log at init; empty without NCCL.
std::string nccl_version_string();

}  // namespace chorus
