// Unit tests of the op descriptors (src/core/ops/op.h): every op the wire knows has one, and
// what the rest of the runtime asks of them (caching, joined ranks, batching, the output
// sized by agreement) is what each op promises its users.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "core/ops/op.h"

namespace chorus::testing {
namespace {

TEST(OpDescriptorTest, EveryWireOpHasItsOwnDescriptor) {
  for (int i = 0; i < kNumOpTypes; ++i) {
    const auto op = static_cast<OpType>(i);
    const OpDescriptor& d = op_descriptor(op);
    EXPECT_EQ(d.op, op) << op_type_name(op);
    EXPECT_NE(d.agree, nullptr) << op_type_name(op);
    EXPECT_NE(d.batching, nullptr) << op_type_name(op);
  }
}

TEST(OpDescriptorTest, OnlyAllreduceRunsWithJoinedRanks) {
  for (int i = 0; i < kNumOpTypes; ++i) {
    const auto op = static_cast<OpType>(i);
    EXPECT_EQ(op_descriptor(op).runs_with_joined, op == OpType::kAllreduce) << op_type_name(op);
  }
}

TEST(OpDescriptorTest, TheProcessSetChangesAreNotExecuted) {
  EXPECT_EQ(op_descriptor(OpType::kAddProcessSet).run, nullptr);
  EXPECT_EQ(op_descriptor(OpType::kRemoveProcessSet).run, nullptr);
  for (OpType op : {OpType::kAllreduce, OpType::kAllgather, OpType::kBroadcast, OpType::kAlltoall,
                    OpType::kReducescatter, OpType::kBarrier, OpType::kJoin, OpType::kReduce}) {
    EXPECT_NE(op_descriptor(op).run, nullptr) << op_type_name(op);
  }
}

TEST(OpDescriptorTest, GroupedHostMembersFuseOnlyWhereTheOpCanRunThemTogether) {
  Response r;
  r.group = "g/group";
  r.group_size = 2;
  for (OpType op : {OpType::kAllgather, OpType::kReducescatter}) {
    r.op = op;
    r.device = Device::cpu();
    EXPECT_EQ(op_descriptor(op).batching(r), Batching::kGroupOnHost) << op_type_name(op);
    EXPECT_NE(op_descriptor(op).run_group, nullptr) << op_type_name(op);
    r.device = Device::cuda(0);
    EXPECT_EQ(op_descriptor(op).batching(r), Batching::kAlone) << op_type_name(op);
  }
  r.op = OpType::kAllreduce;
  EXPECT_EQ(op_descriptor(OpType::kAllreduce).batching(r), Batching::kFused);
}

TEST(OpDescriptorTest, AnUnknownOpFailsItsAgreement) {
  const OpDescriptor& d = op_descriptor(static_cast<OpType>(kNumOpTypes + 3));
  Request q;
  std::vector<std::optional<Request>> by_rank{q};
  Agreement a(by_rank, q);
  Response resp;
  EXPECT_FALSE(d.agree(a, resp));
  EXPECT_EQ(a.message(), "an op this build does not know");
  EXPECT_EQ(d.run, nullptr);
}

TEST(OpDescriptorTest, RootOutsideTheSetIsNamed) {
  Request q;
  q.op = OpType::kBroadcast;
  q.root = 3;
  std::vector<std::optional<Request>> by_rank{q, q, q};
  Agreement a(by_rank, q);
  Response resp;
  EXPECT_FALSE(op_descriptor(OpType::kBroadcast).agree(a, resp));
  EXPECT_EQ(a.message(), "root rank 3 is outside the set of 3 ranks");
}

}  // namespace
}  // namespace chorus::testing
