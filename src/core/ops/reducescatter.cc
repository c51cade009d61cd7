#include "core/ops/reducescatter.h"

#include <cstring>

#include "core/host_memory.h"
#include "core/op_plan.h"
#include "core/ops/checks.h"

namespace chorus {
namespace {

bool agree(Agreement& a, Response&) {
  return a.same_shape() && a.same_reduction() && a.same_group();
}

Batching batching(const Response& r) {
  return r.group_size > 0 && r.device.is_cpu() ? Batching::kGroupOnHost : Batching::kAlone;
}

void run(OpRun& x) {
  const Response& r = x.r;
  Entry& e = *x.entry;
  const std::size_t esz = dtype_size(r.dtype);
  const ReducescatterPlan plan = plan_reducescatter(r, x.backend.rank(), x.backend.size());
  void* dst = x.output(plan.output_shape, static_cast<std::size_t>(plan.output_elements) * esz);
  const void* in = e.input.data;
  if (r.prescale != 1.0) {
    // After the output's fallback: both may be scratch, which holds one at a time, so the
    // prescaled input goes behind a fallback output.
    const int64_t count = num_elements(r.shape);
    const std::size_t behind =
        dst == e.output.data ? 0 : static_cast<std::size_t>(plan.output_elements) * esz;
    char* staged = x.have(x.memory.scratch(behind + static_cast<std::size_t>(count) * esz));
    if (staged) {
      if (behind > 0) dst = staged;
      x.keep(x.memory.copy({{in, staged + behind, count}}, r.dtype, kernels::Scale{1, r.prescale}));
      in = staged + behind;
    }
  }
  x.began();
  if (x.s.ok()) {
    x.s = x.backend.reducescatter(in, dst, plan.counts, r.dtype, wire_op(r.reduce_op),
                                  result_scale(r, x.backend.size()));
  }
}

// The fused input is laid out by destination rank, member after member inside each rank's
// block (prescaled while packed), so that one reducescatter leaves this rank its block of
// every member back to back. Each element is still combined in set-rank order, so the bits
// are those of the members reduced alone.
Status run_group(GroupRun& g) {
  Backend& be = g.host.backend(Collective::kReducescatter, g.batch.front().response->dtype);
  const int n = be.size();
  const int me = be.rank();
  const Response& first = *g.batch.front().response;
  const std::size_t esz = dtype_size(first.dtype);
  std::vector<ReducescatterPlan> plans;
  std::vector<std::vector<int64_t>> parts;  // elements
  for (const Job& j : g.batch) {
    plans.push_back(plan_reducescatter(*j.response, me, n));
    parts.push_back(plans.back().counts);
  }
  const RankMajor m = rank_major(parts, n);
  // The packed input, then this rank's reduced block after it.
  char* buffer = *g.host.scratch(static_cast<std::size_t>(m.total + m.block[me]) * esz);
  char* result = buffer + m.total * esz;
  for (std::size_t k = 0; k < g.batch.size(); ++k) {
    const char* in = static_cast<const char*>(g.batch[k].entry->input.data);
    for (int r = 0; r < n; ++r) {
      kernels::scale_copy(buffer + (m.block_at[r] + m.inside[k][r]) * esz, in, parts[k][r],
                          first.dtype, first.prescale);
      in += parts[k][r] * esz;
    }
  }
  const GroupRun::Clock::time_point t0 = GroupRun::Clock::now();
  const Status s = be.reducescatter(buffer, result, m.block, first.dtype, wire_op(first.reduce_op),
                                    result_scale(first, n));
  const GroupRun::Clock::time_point t1 = GroupRun::Clock::now();
  for (std::size_t k = 0; k < g.batch.size(); ++k) {
    Entry& e = *g.batch[k].entry;
    StatusOr<TensorRef> out = allocate_output(e, plans[k].output_shape);
    if (s.ok() && out.ok() && parts[k][me] > 0) {
      std::memcpy(out->data, result + m.inside[k][me] * esz,
                  static_cast<std::size_t>(parts[k][me]) * esz);
    }
    g.trace(e.request.name, t0, t1);
    g.finish(e, s.ok() ? out.status() : s);
  }
  return s;
}

}  // namespace

const OpDescriptor& reducescatter_op() {
  static const OpDescriptor d{.op = OpType::kReducescatter,
                              .collective = Collective::kReducescatter,
                              .cached = true,
                              .output_sized_by_agreement = true,
                              .agree = agree,
                              .batching = batching,
                              .run = run,
                              .run_group = run_group};
  return d;
}

Status fill_reducescatter(Entry& e, const TensorRef& input, ReduceOp reduce_op, double prescale,
                          double postscale, OutputAllocator allocate) {
  const OpType op = OpType::kReducescatter;
  const std::string& name = e.request.name;
  for (Status s : {check_rows(op, name, input), check_scale(op, name, "prescale", prescale),
                   check_scale(op, name, "postscale", postscale),
                   check_reduce_op(op, name, reduce_op, input.dtype)}) {
    if (!s.ok()) return s;
  }
  Request& q = e.request;
  describe_tensor(q, input);
  q.reduce_op = reduce_op;
  q.prescale = prescale;
  q.postscale = postscale;
  e.input = TensorPlace::of(input);
  e.allocate = std::move(allocate);
  return {};
}

}  // namespace chorus
