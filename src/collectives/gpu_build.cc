#include "collectives/gpu_build.h"

#ifdef CHORUS_WITH_NCCL
#include <nccl.h>
#endif

namespace chorus {

bool built_with_cuda() {
#ifdef CHORUS_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int nccl_compiled_version_code() {
#ifdef CHORUS_WITH_NCCL
  return NCCL_VERSION_CODE;
#else
  return 0;
#endif
}

std::string nccl_version_string() {
#ifdef CHORUS_WITH_NCCL
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "NCCL (version unknown)";
  // NCCL encodes major*10000 + minor*100 + patch since 2.9.
  return "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
#else
  return {};
#endif
}

}  // namespace chorus
