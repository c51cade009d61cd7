// The descriptor of each op, indexed by its wire number.
#include <array>

#include "core/ops/allgather.h"
#include "core/ops/allreduce.h"
#include "core/ops/alltoall.h"
#include "core/ops/broadcast.h"
#include "core/ops/control.h"
#include "core/ops/op.h"
#include "core/ops/reduce.h"
#include "core/ops/reducescatter.h"

namespace chorus {
namespace {

// A number this build does not know (from a rank built otherwise): the coordinator fails
// it on every rank (check_request), and asks only whether it runs with joined ranks (no).
const OpDescriptor& unknown_op() {
  static const OpDescriptor d{.op = OpType::kAllreduce,
                              .carries_data = false,
                              .agree =
                                  [](Agreement& a, Response&) {
                                    a.fail("an op this build does not know");
                                    return false;
                                  },
                              .batching = [](const Response&) { return Batching::kAlone; }};
  return d;
}

}  // namespace

const OpDescriptor& op_descriptor(OpType op) {
  static const std::array<const OpDescriptor*, kNumOpTypes> table = [] {
    std::array<const OpDescriptor*, kNumOpTypes> t{};
    for (const OpDescriptor* d :
         {&allreduce_op(), &allgather_op(), &broadcast_op(), &alltoall_op(), &reducescatter_op(),
          &barrier_op(), &join_op(), &add_process_set_op(), &remove_process_set_op(), &reduce_op(),
          &add_process_set_of_members_op()}) {
      t[static_cast<std::size_t>(d->op)] = d;
    }
    return t;
  }();
  const auto i = static_cast<std::size_t>(op);
  return i < table.size() ? *table[i] : unknown_op();
}

}  // namespace chorus
