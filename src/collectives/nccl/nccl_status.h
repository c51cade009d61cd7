#pragma once
// NCCL results as Chorus Statuses. Pure (no nccl.h: the codes are NCCL's documented
// ncclResult_t values, checked against nccl.h by a static_assert in nccl_backend.cc), so
// the mapping is unit-tested in builds without NCCL.

#include <string>

#include "chorus/status.h"

namespace chorus {

/// ncclResult_t values.
enum class NcclCode : int {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
};

/// "invalid argument", "remote error (a peer failed or disconnected)", ...
const char* nccl_code_name(int code);

/// The Status for a failed NCCL call: kInvalidArgument for invalid argument and invalid
/// usage (this rank passed something NCCL refuses), kInternal for the rest. The message
/// names the call, NCCL's code and its own text (`detail`: ncclGetLastError or
/// ncclGetErrorString, may be empty) and the source place. `code` 0 gives OK.
Status nccl_status(int code, const char* call, const std::string& detail, const char* file,
                   int line);

/// The Status for an asynchronous error found by polling a communicator: which process set
/// and operation it hit. Every rank of the set gets one (the communicator is aborted on
/// each), so every rank's handles fail with it.
Status nccl_async_status(int code, const std::string& set_name, const std::string& during,
                         const std::string& detail);

}  // namespace chorus
