#include "core/ops/reduce.h"

#include "core/ops/allreduce.h"

namespace chorus {
namespace {

bool agree(Agreement& a, Response&) {
  return a.same_shape() && a.same_reduction() && a.same_root();
}

Batching batching(const Response&) { return Batching::kAlone; }

// The ranks other than the root reduce into scratch, so that their output (which may be
// their input) is left as it was.
void run(OpRun& x) {
  const Response& r = x.r;
  void* out = x.backend.rank() == r.root
                  ? x.entry->output.data
                  : x.have(x.memory.scratch(static_cast<std::size_t>(num_elements(r.shape)) *
                                            dtype_size(r.dtype)));
  allreduce_into(x, x.entry->input.data, out);
}

}  // namespace

const OpDescriptor& reduce_op() {
  static const OpDescriptor d{.op = OpType::kReduce,
                              .collective = Collective::kAllreduce,
                              .cached = true,
                              .agree = agree,
                              .batching = batching,
                              .run = run};
  return d;
}

Status fill_reduce(Entry& e, const TensorRef& input, const TensorRef& output, int root,
                   const ReduceOptions& options) {
  if (Status s = fill_reduction(e, input, output, options); !s.ok()) return s;
  e.request.root = root;
  return {};
}

}  // namespace chorus
