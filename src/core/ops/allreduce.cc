#include "core/ops/allreduce.h"

#include "core/op_plan.h"
#include "core/ops/checks.h"

namespace chorus {
namespace {

bool agree(Agreement& a, Response&) {
  return a.same_shape() && a.same_reduction() && a.same_group();
}

Batching batching(const Response&) { return Batching::kFused; }

void call(OpRun& x, const void* in, void* out) {
  const Response& r = x.r;
  x.began();
  if (!x.s.ok()) return;
  const int64_t count = num_elements(r.shape);
  const kernels::Scale scale = result_scale(r, x.backend.size());
  x.s = r.reduce_op == ReduceOp::kAdasum
            ? x.memory.adasum(in, out, {{0, count}}, r.dtype, scale)
            : x.backend.allreduce(in, out, count, r.dtype, wire_op(r.reduce_op), scale);
}

// A rank that joined (no entry) contributes zeros, which no prescale changes.
void run(OpRun& x) {
  if (x.entry) {
    allreduce_into(x, x.entry->input.data, x.entry->output.data);
    return;
  }
  const Response& r = x.r;
  char* zeros =
      x.have(x.memory.zeros(static_cast<std::size_t>(num_elements(r.shape)) * dtype_size(r.dtype)));
  call(x, zeros, zeros);
}

}  // namespace

void allreduce_into(OpRun& x, const void* in, void* out) {
  const Response& r = x.r;
  if (r.prescale != 1.0 && out) {
    x.keep(
        x.memory.copy({{in, out, num_elements(r.shape)}}, r.dtype, kernels::Scale{1, r.prescale}));
    in = out;
  }
  call(x, in, out);
}

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
                   check_scale(op, name, "postscale", options.postscale),
                   check_reduce_op(op, name, options.op, input.dtype)}) {
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
