#include "core/ops/allreduce.h"

#include "core/op_plan.h"
#include "core/ops/checks.h"

namespace chorus {
namespace {

bool agree(Agreement& a, Response&) {
  return a.same_shape() && a.same_reduction() && a.same_group();
}

Batching batching(const Response&) { return Batching::kFused; }

void run(OpRun& x) {
  const Response& r = x.r;
  const int64_t count = num_elements(r.shape);
  const void* in = nullptr;
  void* out = nullptr;
  if (x.entry) {
    in = x.entry->input.data;
    out = x.entry->output.data;
    if (r.prescale != 1.0) {
      x.keep(x.memory.copy({{in, out, count}}, r.dtype, kernels::Scale{1, r.prescale}));
      in = out;
    }
  } else {
    out = x.have(x.memory.zeros(static_cast<std::size_t>(count) * dtype_size(r.dtype)));
    in = out;
  }
  x.began();
  if (x.s.ok()) {
    x.s = x.backend.allreduce(in, out, count, r.dtype, wire_op(r.reduce_op),
                              result_scale(r, x.backend.size()));
  }
}

}  // namespace

const OpDescriptor& allreduce_op() {
  static const OpDescriptor d{.op = OpType::kAllreduce,
                              .collective = Collective::kAllreduce,
                              .runs_with_joined = true,
                              .cached = true,
                              .agree = agree,
                              .batching = batching,
                              .run = run};
  return d;
}

Status fill_reduction(Entry& e, const TensorRef& input, const TensorRef& output,
                      const AllreduceOptions& options) {
  const OpType op = e.request.op;
  const std::string& name = e.request.name;
  for (Status s : {check_tensor(op, name, "input", input), check_tensor(op, name, "output", output),
                   check_scale(op, name, "prescale", options.prescale),
                   check_scale(op, name, "postscale", options.postscale)}) {
    if (!s.ok()) return s;
  }
  if (input.dtype != output.dtype || input.shape != output.shape || input.device != output.device) {
    return invalid_argument(what(op, name) + "output " + describe(output) +
                            " does not match input " + describe(input));
  }
  Request& q = e.request;
  describe_tensor(q, input);
  q.reduce_op = options.op;
  q.prescale = options.prescale;
  q.postscale = options.postscale;
  e.input = TensorPlace::of(input);
  e.output = TensorPlace::of(output);
  return {};
}

}  // namespace chorus
