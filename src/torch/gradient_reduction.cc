#include "torch/gradient_reduction.h"

#include <string>

#include "chorus/status.h"

namespace chorus::torch {

AllreduceOptions gradient_reduction(ReduceOp op, double predivide, int passes,
                                    ProcessSet process_set) {
  if (op != ReduceOp::kAverage && op != ReduceOp::kSum) {
    throw Error(invalid_argument(std::string("gradients are reduced by average or sum, not ") +
                                 reduce_op_name(op)));
  }
  if (predivide <= 0) {
    throw Error(invalid_argument("gradient_predivide_factor must be positive, got " +
                                 std::to_string(predivide)));
  }
  if (predivide != 1.0 && op != ReduceOp::kAverage) {
    throw Error(invalid_argument("gradient_predivide_factor applies only to op average"));
  }
  if (passes < 1) {
    throw Error(invalid_argument("backward_passes_per_step must be at least 1, got " +
                                 std::to_string(passes)));
  }
  AllreduceOptions a;
  a.op = op;
  a.prescale = 1.0 / predivide;
  a.postscale = predivide;
  a.process_set = process_set;
  return a;
}

::torch::ScalarType wire_type(::torch::ScalarType type, Compression compression) {
  const bool wide = type == ::torch::kFloat32 || type == ::torch::kFloat64;
  if (compression == Compression::kNone || !wide) return type;
  return compression == Compression::kFloat16 ? ::torch::kFloat16 : ::torch::kBFloat16;
}

::torch::Tensor on_the_wire(const ::torch::Tensor& t, Compression compression) {
  const ::torch::ScalarType type = wire_type(t.scalar_type(), compression);
  return type == t.scalar_type() ? t : t.to(type);
}

}  // namespace chorus::torch
