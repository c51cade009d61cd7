#include "core/ops/broadcast.h"

#include "core/ops/checks.h"

namespace chorus {
namespace {

bool agree(Agreement& a, Response&) { return a.same_shape() && a.same_root(); }

Batching batching(const Response&) { return Batching::kAlone; }

void run(OpRun& x) {
  const Response& r = x.r;
  x.s = x.backend.broadcast(x.entry->output.data,
                            num_elements(r.shape) * static_cast<int64_t>(dtype_size(r.dtype)),
                            r.root);
}

}  // namespace

const OpDescriptor& broadcast_op() {
  static const OpDescriptor d{.op = OpType::kBroadcast,
                              .collective = Collective::kBroadcast,
                              .cached = true,
                              .agree = agree,
                              .batching = batching,
                              .run = run};
  return d;
}

Status fill_broadcast(Entry& e, const TensorRef& tensor, int root) {
  if (Status s = check_tensor(OpType::kBroadcast, e.request.name, "tensor", tensor); !s.ok()) {
    return s;
  }
  // The root is checked by the coordinator (same_root), so a bad root fails on every rank.
  describe_tensor(e.request, tensor);
  e.request.root = root;
  e.input = TensorPlace::of(tensor);
  e.output = TensorPlace::of(tensor);
  return {};
}

}  // namespace chorus
