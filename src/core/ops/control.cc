#include "core/ops/control.h"

namespace chorus {
namespace {

bool nothing_to_agree(Agreement&, Response&) { return true; }

Batching alone(const Response&) { return Batching::kAlone; }

bool agree_add_set(Agreement& a, Response& resp) {
  if (!a.same("the ranks of the new process set", [](const Request& q) {
        return ranks_string(std::vector<int>(q.ranks.begin(), q.ranks.end()));
      })) {
    return false;
  }
  resp.ranks = a.first().ranks;
  return true;
}

bool agree_remove_set(Agreement& a, Response& resp) {
  if (!a.same("the process set to remove",
              [](const Request& q) { return std::to_string(q.target_set); })) {
    return false;
  }
  resp.target_set = a.first().target_set;
  return true;
}

}  // namespace

const OpDescriptor& barrier_op() {
  static const OpDescriptor d{.op = OpType::kBarrier,
                              .carries_data = false,
                              .agree = nothing_to_agree,
                              .batching = alone,
                              .run = [](OpRun& x) { x.s = x.backend.barrier(); }};
  return d;
}

const OpDescriptor& join_op() {
  static const OpDescriptor d{.op = OpType::kJoin,
                              .carries_data = false,
                              .agree = nothing_to_agree,
                              .batching = alone,
                              .run = [](OpRun& x) {
                                if (x.entry) x.entry->handle->value = x.r.last_joined_rank;
                              }};
  return d;
}

const OpDescriptor& add_process_set_op() {
  static const OpDescriptor d{.op = OpType::kAddProcessSet,
                              .carries_data = false,
                              .agree = agree_add_set,
                              .batching = alone};
  return d;
}

const OpDescriptor& add_process_set_of_members_op() {
  static const OpDescriptor d{.op = OpType::kAddProcessSetOfMembers,
                              .carries_data = false,
                              .submitted_by_listed_ranks = true,
                              .agree = agree_add_set,
                              .batching = alone};
  return d;
}

const OpDescriptor& remove_process_set_op() {
  static const OpDescriptor d{.op = OpType::kRemoveProcessSet,
                              .carries_data = false,
                              .agree = agree_remove_set,
                              .batching = alone};
  return d;
}

}  // namespace chorus
