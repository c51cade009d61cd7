#include "core/ops/checks.h"

#include <cmath>

#include "collectives/gpu_build.h"
#include "collectives/gpu_event.h"

namespace chorus {

std::string what(OpType op, const std::string& name) {
  return std::string(op_type_name(op)) + " '" + name + "': ";
}

Status check_tensor(OpType op, const std::string& name, const char* role, const TensorRef& t) {
  if (static_cast<int>(t.dtype) >= kNumDataTypes) {
    return invalid_argument(what(op, name) + role + " has an unknown dtype " +
                            std::to_string(static_cast<int>(t.dtype)));
  }
  for (int64_t d : t.shape) {
    if (d < 0) {
      return invalid_argument(what(op, name) + role + " has a negative dimension in shape " +
                              shape_string(t.shape));
    }
  }
  if (t.data == nullptr && t.num_elements() > 0) {
    return invalid_argument(what(op, name) + role + " " + describe(t) + " has no data pointer");
  }
  if (!t.device.is_cpu()) {
    if (!built_with_cuda()) {
      return invalid_argument(what(op, name) + role + " is on " + device_name(t.device) +
                              ": this build of Chorus runs collectives on host memory only");
    }
    if (t.device.kind != Device::Kind::kCUDA) {
      return invalid_argument(what(op, name) + role + " is on " + device_name(t.device) +
                              ": Chorus runs collectives on host memory and CUDA devices only");
    }
    const int devices = gpu::device_count();
    if (t.device.index < 0 || t.device.index >= devices) {
      return invalid_argument(what(op, name) + role + " is on " + device_name(t.device) +
                              ", but this process sees " + std::to_string(devices) +
                              " CUDA device(s)");
    }
  }
  return {};
}

Status check_rows(OpType op, const std::string& name, const TensorRef& input) {
  if (Status s = check_tensor(op, name, "input", input); !s.ok()) return s;
  if (input.shape.empty()) {
    return invalid_argument(what(op, name) + "input must have at least one dimension");
  }
  return {};
}

Status check_scale(OpType op, const std::string& name, const char* which, double v) {
  if (!std::isfinite(v)) {
    return invalid_argument(what(op, name) + which + " factor must be finite, got " +
                            std::to_string(v));
  }
  return {};
}

Status check_reduce_op(OpType op, const std::string& name, ReduceOp reduce, DataType dtype) {
  if (reduce != ReduceOp::kAdasum) return {};
  if (op != OpType::kAllreduce) {
    return invalid_argument(what(op, name) + "op Adasum is an allreduce; " + op_type_name(op) +
                            " takes sum, average, min, max or product");
  }
  const bool floating = dtype == DataType::kFloat16 || dtype == DataType::kBFloat16 ||
                        dtype == DataType::kFloat32 || dtype == DataType::kFloat64;
  if (!floating) {
    return invalid_argument(what(op, name) + "op Adasum combines floating-point tensors, got " +
                            dtype_name(dtype));
  }
  return {};
}

void describe_tensor(Request& q, const TensorRef& t) {
  q.dtype = t.dtype;
  q.shape = t.shape;
  q.device = t.device;
}

}  // namespace chorus
