#include "core/ops/alltoall.h"

#include "core/op_plan.h"
#include "core/ops/checks.h"

namespace chorus {
namespace {

// Split errors are checked here rather than on the rank that made them, so that every rank
// fails instead of the others waiting for a request that never comes.
bool agree(Agreement& a, Response& resp) {
  if (!a.same_rows()) return false;
  const int n = a.size();
  std::string why;
  for (int r = 0; r < n && why.empty(); ++r) {
    const Request& q = a.of(r);
    const std::string rank = "rank " + std::to_string(r);
    if (static_cast<int>(q.splits.size()) != n) {
      why = rank + " gave " + std::to_string(q.splits.size()) + " splits for " + std::to_string(n) +
            " ranks" +
            (q.splits.empty()
                 ? " (without splits, the first dimension " + std::to_string(q.shape[0]) +
                       " must divide evenly by the set size)"
                 : "");
      break;
    }
    int64_t sum = 0;
    for (int64_t v : q.splits) {
      if (v < 0) {
        why = rank + " gave a negative split " + std::to_string(v);
        break;
      }
      sum += v;
    }
    if (why.empty() && sum != q.shape[0]) {
      why = rank + "'s splits add up to " + std::to_string(sum) + " but its first dimension is " +
            std::to_string(q.shape[0]);
    }
    resp.splits.insert(resp.splits.end(), q.splits.begin(), q.splits.end());
  }
  if (why.empty()) return true;
  a.fail(why);
  return false;
}

Batching batching(const Response&) { return Batching::kAlone; }

void run(OpRun& x) {
  AlltoallPlan plan = plan_alltoall(x.r, x.backend.rank(), x.backend.size());
  void* dst = x.output(plan.output_shape, static_cast<std::size_t>(plan.output_bytes));
  x.entry->handle->received_splits = std::move(plan.received_splits);
  if (x.s.ok())
    x.s = x.backend.alltoallv(x.entry->input.data, plan.send_bytes, dst, plan.recv_bytes);
}

}  // namespace

const OpDescriptor& alltoall_op() {
  static const OpDescriptor d{.op = OpType::kAlltoall,
                              .collective = Collective::kAlltoall,
                              .output_sized_by_agreement = true,
                              .agree = agree,
                              .batching = batching,
                              .run = run};
  return d;
}

Status fill_alltoall(Entry& e, const TensorRef& input, const std::vector<int64_t>& splits,
                     int set_size, OutputAllocator allocate) {
  if (Status s = check_rows(OpType::kAlltoall, e.request.name, input); !s.ok()) return s;
  // Bad splits are reported by the coordinator, on every rank (agree above).
  std::vector<int64_t> s = splits;
  if (s.empty() && input.shape[0] % set_size == 0) s.assign(set_size, input.shape[0] / set_size);
  describe_tensor(e.request, input);
  e.request.splits = std::move(s);
  e.input = TensorPlace::of(input);
  e.allocate = std::move(allocate);
  return {};
}

}  // namespace chorus
