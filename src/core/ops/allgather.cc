#include "core/ops/allgather.h"

#include <cstring>

#include "core/host_memory.h"
#include "core/op_plan.h"
#include "core/ops/checks.h"

namespace chorus {
namespace {

bool agree(Agreement& a, Response& resp) {
  if (!a.same_rows() || !a.same_group()) return false;
  for (int r = 0; r < a.size(); ++r) resp.first_dims.push_back(a.of(r).shape.at(0));
  return true;
}

Batching batching(const Response& r) {
  return r.group_size > 0 && r.device.is_cpu() ? Batching::kGroupOnHost : Batching::kAlone;
}

void run(OpRun& x) {
  const AllgatherPlan plan = plan_allgather(x.r, x.backend.size());
  void* dst = x.output(plan.output_shape, static_cast<std::size_t>(plan.output_bytes));
  if (x.s.ok()) x.s = x.backend.allgatherv(x.entry->input.data, dst, plan.bytes);
}

// Rank r's block of the fused buffer is its contribution to every member, member after
// member; one allgatherv moves every block, and each member's output is copied out of the
// blocks in rank order.
Status run_group(GroupRun& g) {
  Backend& be = g.host.backend(Collective::kAllgather, g.batch.front().response->dtype);
  const int n = be.size();
  const int me = be.rank();
  std::vector<AllgatherPlan> plans;
  std::vector<std::vector<int64_t>> parts;
  for (const Job& j : g.batch) {
    plans.push_back(plan_allgather(*j.response, n));
    parts.push_back(plans.back().bytes);
  }
  const RankMajor m = rank_major(parts, n);
  char* buffer = *g.host.scratch(static_cast<std::size_t>(m.total));
  for (std::size_t k = 0; k < g.batch.size(); ++k) {
    if (parts[k][me] == 0) continue;  // an empty tensor may have no data pointer
    std::memcpy(buffer + m.block_at[me] + m.inside[k][me], g.batch[k].entry->input.data,
                static_cast<std::size_t>(parts[k][me]));
  }
  const GroupRun::Clock::time_point t0 = GroupRun::Clock::now();
  const Status s = be.allgatherv(buffer + m.block_at[me], buffer, m.block);
  const GroupRun::Clock::time_point t1 = GroupRun::Clock::now();
  for (std::size_t k = 0; k < g.batch.size(); ++k) {
    Entry& e = *g.batch[k].entry;
    StatusOr<TensorRef> out = allocate_output(e, plans[k].output_shape);
    if (s.ok() && out.ok()) {
      char* dst = static_cast<char*>(out->data);
      for (int r = 0; r < n; ++r) {
        if (parts[k][r] == 0) continue;
        std::memcpy(dst, buffer + m.block_at[r] + m.inside[k][r],
                    static_cast<std::size_t>(parts[k][r]));
        dst += parts[k][r];
      }
    }
    g.trace(e.request.name, t0, t1);
    g.finish(e, s.ok() ? out.status() : s);
  }
  return s;
}

}  // namespace

const OpDescriptor& allgather_op() {
  static const OpDescriptor d{.op = OpType::kAllgather,
                              .collective = Collective::kAllgather,
                              .output_sized_by_agreement = true,
                              .agree = agree,
                              .batching = batching,
                              .run = run,
                              .run_group = run_group};
  return d;
}

Status fill_allgather(Entry& e, const TensorRef& input, OutputAllocator allocate) {
  if (Status s = check_rows(OpType::kAllgather, e.request.name, input); !s.ok()) return s;
  describe_tensor(e.request, input);
  e.input = TensorPlace::of(input);
  e.allocate = std::move(allocate);
  return {};
}

}  // namespace chorus
