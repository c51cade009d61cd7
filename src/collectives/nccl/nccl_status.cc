#include "collectives/nccl/nccl_status.h"

namespace chorus {

const char* nccl_code_name(int code) {
  switch (static_cast<NcclCode>(code)) {
    case NcclCode::kSuccess: return "success";
    case NcclCode::kUnhandledCudaError: return "unhandled CUDA error";
    case NcclCode::kSystemError: return "system error";
    case NcclCode::kInternalError: return "internal error";
    case NcclCode::kInvalidArgument: return "invalid argument";
    case NcclCode::kInvalidUsage: return "invalid usage";
    case NcclCode::kRemoteError: return "remote error (a peer failed or disconnected)";
    case NcclCode::kInProgress: return "operation in progress";
  }
  return "unknown NCCL result";
}

namespace {

StatusCode code_for(int code) {
  switch (static_cast<NcclCode>(code)) {
    case NcclCode::kSuccess: return StatusCode::kOk;
    case NcclCode::kInvalidArgument:
    case NcclCode::kInvalidUsage: return StatusCode::kInvalidArgument;
    default: return StatusCode::kInternal;
  }
}

std::string describe(int code, const std::string& detail) {
  std::string s = std::string(nccl_code_name(code)) + " (NCCL code " + std::to_string(code) + ")";
  if (!detail.empty()) s += ": " + detail;
  return s;
}

}  // namespace

Status nccl_status(int code, const char* call, const std::string& detail, const char* file,
                   int line) {
  if (code == 0) return {};
  return Status(code_for(code), std::string(call) + " failed: " + describe(code, detail) + " at " +
                                    file + ":" + std::to_string(line));
}

Status nccl_async_status(int code, const std::string& set_name, const std::string& during,
                         const std::string& detail) {
  if (code == 0) return {};
  return Status(code_for(code), "NCCL communicator of " + set_name + " failed during " + during +
                                    ": " + describe(code, detail) +
                                    "; the communicator was aborted on this rank");
}

}  // namespace chorus
