// The members of a grouped allgather or reducescatter on host memory, fused: one backend
// call for the whole group. Every rank gets the same responses in the same order, so every
// rank builds the same layout.
//
// Allgather: rank r's block of the fused buffer is its contribution to every member, member
// after member; one allgatherv moves every block, and each member's output is copied out
// of the blocks in rank order.
//
// Reducescatter: the fused input is laid out by destination rank, member after member
// inside each rank's block (prescaled while packed), so that one reducescatter leaves this
// rank its block of every member back to back. Each element is still combined in set-rank
// order, so the bits are those of the members reduced alone.
#include <cstring>

#include "core/executor.h"
#include "core/op_plan.h"
#include "kernels/reduce_kernels.h"

namespace chorus {
namespace {

// Offsets of rank-major blocks: block r holds every member's part for rank r, in member
// order. part[k][r] is member k's size for rank r (bytes or elements).
struct RankMajor {
  std::vector<int64_t> block;                // per rank: the sum of its parts
  std::vector<int64_t> block_at;             // per rank: where its block starts
  std::vector<std::vector<int64_t>> inside;  // [k][r]: member k's offset inside block r
  int64_t total = 0;
};

RankMajor rank_major(const std::vector<std::vector<int64_t>>& part, int n) {
  RankMajor m;
  m.block.assign(n, 0);
  m.block_at.assign(n, 0);
  m.inside.assign(part.size(), std::vector<int64_t>(n, 0));
  for (int r = 0; r < n; ++r) {
    for (std::size_t k = 0; k < part.size(); ++k) {
      m.inside[k][r] = m.block[r];
      m.block[r] += part[k][r];
    }
    m.block_at[r] = m.total;
    m.total += m.block[r];
  }
  return m;
}

}  // namespace

Status Executor::run_grouped_allgather(const std::vector<Job>& batch, const Finish& finish) {
  Backend& be = host_.backend();
  const int n = be.size();
  const int me = be.rank();
  std::vector<AllgatherPlan> plans;
  std::vector<std::vector<int64_t>> parts;
  for (const Job& j : batch) {
    plans.push_back(plan_allgather(*j.response, n));
    parts.push_back(plans.back().bytes);
  }
  const RankMajor m = rank_major(parts, n);
  char* buffer = *host_.scratch(static_cast<std::size_t>(m.total));
  for (std::size_t k = 0; k < batch.size(); ++k) {
    if (parts[k][me] == 0) continue;  // an empty tensor may have no data pointer
    std::memcpy(buffer + m.block_at[me] + m.inside[k][me], batch[k].entry->input.data,
                static_cast<std::size_t>(parts[k][me]));
  }
  const Clock::time_point t0 = Clock::now();
  const Status s = be.allgatherv(buffer + m.block_at[me], buffer, m.block);
  const Clock::time_point t1 = Clock::now();
  for (std::size_t k = 0; k < batch.size(); ++k) {
    Entry& e = *batch[k].entry;
    StatusOr<TensorRef> out = output_for(e, plans[k].output_shape);
    if (s.ok() && out.ok()) {
      char* dst = static_cast<char*>(out->data);
      for (int r = 0; r < n; ++r) {
        if (parts[k][r] == 0) continue;
        std::memcpy(dst, buffer + m.block_at[r] + m.inside[k][r],
                    static_cast<std::size_t>(parts[k][r]));
        dst += parts[k][r];
      }
    }
    trace(e.request.name, TimelinePhase::kCollective, t0, t1);
    finish(e, s.ok() ? out.status() : s);
  }
  return s;
}

Status Executor::run_grouped_reducescatter(const std::vector<Job>& batch, const Finish& finish) {
  Backend& be = host_.backend();
  const int n = be.size();
  const int me = be.rank();
  const Response& first = *batch.front().response;
  const std::size_t esz = dtype_size(first.dtype);
  std::vector<ReducescatterPlan> plans;
  std::vector<std::vector<int64_t>> parts;  // elements
  for (const Job& j : batch) {
    plans.push_back(plan_reducescatter(*j.response, me, n));
    parts.push_back(plans.back().counts);
  }
  const RankMajor m = rank_major(parts, n);
  // The packed input, then this rank's reduced block after it.
  char* buffer = *host_.scratch(static_cast<std::size_t>(m.total + m.block[me]) * esz);
  char* result = buffer + m.total * esz;
  for (std::size_t k = 0; k < batch.size(); ++k) {
    const char* in = static_cast<const char*>(batch[k].entry->input.data);
    for (int r = 0; r < n; ++r) {
      kernels::scale_copy(buffer + (m.block_at[r] + m.inside[k][r]) * esz, in, parts[k][r],
                          first.dtype, first.prescale);
      in += parts[k][r] * esz;
    }
  }
  const Clock::time_point t0 = Clock::now();
  const Status s = be.reducescatter(buffer, result, m.block, first.dtype, wire_op(first.reduce_op),
                                    result_scale(first, n));
  const Clock::time_point t1 = Clock::now();
  for (std::size_t k = 0; k < batch.size(); ++k) {
    Entry& e = *batch[k].entry;
    StatusOr<TensorRef> out = output_for(e, plans[k].output_shape);
    if (s.ok() && out.ok() && parts[k][me] > 0) {
      std::memcpy(out->data, result + m.inside[k][me] * esz,
                  static_cast<std::size_t>(parts[k][me]) * esz);
    }
    trace(e.request.name, TimelinePhase::kCollective, t0, t1);
    finish(e, s.ok() ? out.status() : s);
  }
  return s;
}

}  // namespace chorus
