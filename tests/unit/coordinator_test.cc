// Unit tests of the Coordinator state machine (src/core/coordinator.h): readiness, order,
// groups, join, process sets, stall inspection. decide_response's per-op agreement rules are
// in decide_response_test.cc. Time is a fake clock: plain time points passed in.
#include "core/coordinator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "common/assertions.h"
#include "common/requests.h"
#include "protocol/message.h"

namespace chorus::testing {
namespace {

using Clock = Coordinator::Clock;

// A fixed origin for fake time; offsets are in seconds.
const Clock::time_point kT0 = Clock::time_point{} + std::chrono::hours(1);
Clock::time_point at(double seconds) {
  return kT0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

RequestList list_of(std::vector<Request> qs) { return RequestList{std::move(qs), {}}; }

std::vector<std::string> names_of(const std::vector<Response>& rs) {
  std::vector<std::string> out;
  for (const Response& r : rs) out.push_back(r.name);
  return out;
}

// --- Coordinator: readiness and order ---------------------------------------------------

TEST(CoordinatorTest, ReadyOnlyWhenEveryRankAdded) {
  for (int n : {1, 2, 3, 5}) {
    Coordinator c(n);
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(c.take_ready().empty()) << "n=" << n << " after " << r << " ranks";
      c.add(r, list_of({allreduce("w")}), kT0);
    }
    std::vector<Response> ready = c.take_ready();
    ASSERT_EQ(ready.size(), 1u) << "n=" << n;
    EXPECT_EQ(ready[0].name, "w");
    EXPECT_TRUE(ready[0].status.ok()) << ready[0].status.to_string();
    EXPECT_TRUE(c.take_ready().empty()) << "emitted twice";
    EXPECT_TRUE(c.pending_names().empty());
  }
}

TEST(CoordinatorTest, RanksArriveAcrossRounds) {
  Coordinator c(3);
  c.add(0, list_of({allreduce("a"), allreduce("b")}), at(0));
  c.add(1, list_of({}), at(0));
  c.add(2, list_of({allreduce("b")}), at(0));
  EXPECT_TRUE(c.take_ready().empty());
  EXPECT_EQ(c.pending_names(), (std::vector<std::string>{"a", "b"}));

  c.add(0, list_of({}), at(1));
  c.add(1, list_of({allreduce("b")}), at(1));
  c.add(2, list_of({}), at(1));
  EXPECT_EQ(names_of(c.take_ready()), (std::vector<std::string>{"b"}));
  EXPECT_EQ(c.pending_names(), (std::vector<std::string>{"a"}));

  c.add(1, list_of({allreduce("a")}), at(2));
  c.add(2, list_of({allreduce("a")}), at(2));
  EXPECT_EQ(names_of(c.take_ready()), (std::vector<std::string>{"a"}));
}

TEST(CoordinatorTest, OrderIsCompletionScanningFirstArrival) {
  Coordinator c(2);
  // First arrival: x, y, z (rank 0's order). Rank 1 sends z before y and no x.
  c.add(0, list_of({allreduce("x"), allreduce("y"), allreduce("z")}), kT0);
  c.add(1, list_of({allreduce("z"), allreduce("y")}), kT0);
  EXPECT_EQ(names_of(c.take_ready()), (std::vector<std::string>{"y", "z"}));
  c.add(1, list_of({allreduce("x")}), kT0);
  EXPECT_EQ(names_of(c.take_ready()), (std::vector<std::string>{"x"}));
}

TEST(CoordinatorTest, FirstArrivalMayComeFromAHigherRank) {
  Coordinator c(3);
  c.add(0, list_of({}), kT0);
  c.add(1, list_of({allreduce("q")}), kT0);
  c.add(2, list_of({allreduce("p"), allreduce("q")}), kT0);
  c.take_ready();
  c.add(0, list_of({allreduce("p"), allreduce("q")}), kT0);
  c.add(1, list_of({allreduce("p")}), kT0);
  // q arrived (on rank 1) before p (on rank 2).
  EXPECT_EQ(names_of(c.take_ready()), (std::vector<std::string>{"q", "p"}));
}

// Feeds `c` a pseudo-random schedule and returns every response name in emission order.
std::vector<std::string> run_schedule(Coordinator& c, int n, unsigned seed) {
  std::mt19937 rng(seed);
  const int tensors = 30;
  std::vector<std::vector<int>> todo(n);
  for (int r = 0; r < n; ++r) {
    for (int t = 0; t < tensors; ++t) todo[r].push_back(t);
    std::shuffle(todo[r].begin(), todo[r].end(), rng);
  }
  std::vector<std::string> out;
  for (int round = 0; round < 200; ++round) {
    for (int r = 0; r < n; ++r) {
      std::vector<Request> qs;
      int k = static_cast<int>(rng() % 4);
      while (k-- > 0 && !todo[r].empty()) {
        qs.push_back(allreduce("t" + std::to_string(todo[r].back())));
        todo[r].pop_back();
      }
      c.add(r, list_of(qs), at(round));
    }
    for (const Response& resp : c.take_ready()) out.push_back(resp.name);
  }
  return out;
}

TEST(CoordinatorTest, DeterministicForTheSameInputs) {
  for (unsigned seed : {1u, 2u, 3u}) {
    Coordinator a(4), b(4);
    std::vector<std::string> x = run_schedule(a, 4, seed);
    std::vector<std::string> y = run_schedule(b, 4, seed);
    EXPECT_EQ(x, y) << "seed " << seed;
    ASSERT_EQ(x.size(), 30u) << "seed " << seed;
    std::vector<std::string> sorted = x;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end()) << "a name came twice";
  }
}

TEST(CoordinatorTest, ErrorResponseIsEmittedOnceAndForgotten) {
  Coordinator c(2);
  c.add(0, list_of({allreduce("w", {2})}), kT0);
  c.add(1, list_of({allreduce("w", {3})}), kT0);
  std::vector<Response> ready = c.take_ready();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].status.code(), StatusCode::kMismatch);
  expect_message_has(ready[0], {"[2] on ranks [0]", "[3] on ranks [1]"});
  EXPECT_TRUE(c.pending_names().empty());
  // The name is free again.
  c.add(0, list_of({allreduce("w", {3})}), kT0);
  EXPECT_TRUE(c.take_ready().empty());
  c.add(1, list_of({allreduce("w", {3})}), kT0);
  ready = c.take_ready();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_TRUE(ready[0].status.ok()) << ready[0].status.to_string();
}

// --- grouped allreduce ------------------------------------------------------------------

TEST(CoordinatorTest, GroupEmittedTogetherInGroupOrder) {
  Coordinator c(2);
  // Rank 0 sends the group in reverse, with an ungrouped tensor in between.
  c.add(0,
        list_of({grouped("g.c", "G", 3, 2), allreduce("solo"), grouped("g.a", "G", 3, 0),
                 grouped("g.b", "G", 3, 1)}),
        kT0);
  c.add(1, list_of({grouped("g.a", "G", 3, 0), grouped("g.b", "G", 3, 1), allreduce("solo")}), kT0);
  // g.c is still missing on rank 1: no member may run.
  EXPECT_EQ(names_of(c.take_ready()), (std::vector<std::string>{"solo"}));
  c.add(1, list_of({grouped("g.c", "G", 3, 2)}), kT0);
  std::vector<Response> ready = c.take_ready();
  EXPECT_EQ(names_of(ready), (std::vector<std::string>{"g.a", "g.b", "g.c"}));
  for (std::size_t i = 0; i < ready.size(); ++i) {
    EXPECT_TRUE(ready[i].status.ok()) << ready[i].status.to_string();
    EXPECT_EQ(ready[i].group_index, static_cast<int>(i));
    EXPECT_EQ(ready[i].group_size, 3);
    EXPECT_EQ(ready[i].group, "G");
  }
}

TEST(CoordinatorTest, GroupWaitsForMembersNobodySentYet) {
  Coordinator c(2);
  c.add(0, list_of({grouped("a", "G", 3, 0), grouped("b", "G", 3, 1)}), kT0);
  c.add(1, list_of({grouped("a", "G", 3, 0), grouped("b", "G", 3, 1)}), kT0);
  EXPECT_TRUE(c.take_ready().empty()) << "a group of 3 ran with 2 members";
  c.add(0, list_of({grouped("c", "G", 3, 2)}), kT0);
  c.add(1, list_of({grouped("c", "G", 3, 2)}), kT0);
  EXPECT_EQ(names_of(c.take_ready()), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(CoordinatorTest, TwoGroupsDoNotMix) {
  Coordinator c(2);
  c.add(0,
        list_of({grouped("a0", "A", 2, 0), grouped("a1", "A", 2, 1), grouped("b0", "B", 2, 0),
                 grouped("b1", "B", 2, 1)}),
        kT0);
  c.add(1, list_of({grouped("b0", "B", 2, 0), grouped("b1", "B", 2, 1), grouped("a0", "A", 2, 0)}),
        kT0);
  EXPECT_EQ(names_of(c.take_ready()), (std::vector<std::string>{"b0", "b1"}));
  c.add(1, list_of({grouped("a1", "A", 2, 1)}), kT0);
  EXPECT_EQ(names_of(c.take_ready()), (std::vector<std::string>{"a0", "a1"}));
}

TEST(CoordinatorTest, FailingMemberFailsTheWholeGroup) {
  Coordinator c(3);
  for (int r = 0; r < 3; ++r) {
    Request b = grouped("g.b", "G", 3, 1);
    if (r == 2) b.dtype = DataType::kFloat64;
    c.add(r, list_of({grouped("g.a", "G", 3, 0), b, grouped("g.c", "G", 3, 2)}), kT0);
  }
  std::vector<Response> ready = c.take_ready();
  ASSERT_EQ(names_of(ready), (std::vector<std::string>{"g.a", "g.b", "g.c"}));
  for (const Response& r : ready) {
    EXPECT_EQ(r.status.code(), StatusCode::kMismatch) << r.name << ": " << r.status.to_string();
    // Every member's message explains the real cause.
    expect_message_has(r, {"g.b", "float64", "[2]"});
  }
  EXPECT_TRUE(c.pending_names().empty());
}

// --- join -------------------------------------------------------------------------------

TEST(CoordinatorTest, AllreduceCountsJoinedRanks) {
  Coordinator c(3);
  c.add(0, list_of({allreduce("w")}), kT0);
  c.add(1, list_of({}), kT0);
  c.add(2, list_of({join_request()}), kT0);
  EXPECT_TRUE(c.take_ready().empty()) << "rank 1 has not sent w";
  c.add(1, list_of({allreduce("w")}), kT0);
  std::vector<Response> ready = c.take_ready();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].name, "w");
  EXPECT_TRUE(ready[0].status.ok()) << ready[0].status.to_string();
}

TEST(CoordinatorTest, JoinCompletesAnAllreduceAlreadyWaiting) {
  Coordinator c(3);
  c.add(0, list_of({allreduce("w")}), kT0);
  c.add(1, list_of({allreduce("w")}), kT0);
  EXPECT_TRUE(c.take_ready().empty());
  c.add(2, list_of({join_request()}), kT0);
  std::vector<Response> ready = c.take_ready();
  ASSERT_EQ(names_of(ready), (std::vector<std::string>{"w"}));
}

TEST(CoordinatorTest, GroupCompletesWithJoinedRank) {
  Coordinator c(2);
  c.add(0, list_of({grouped("a", "G", 2, 0), grouped("b", "G", 2, 1)}), kT0);
  c.add(1, list_of({join_request()}), kT0);
  std::vector<Response> ready = c.take_ready();
  ASSERT_EQ(names_of(ready), (std::vector<std::string>{"a", "b"}));
}

TEST(CoordinatorTest, NonAllreduceWithJoinedRankFails) {
  Coordinator c(4);
  c.add(0, list_of({with_op(allreduce("g", {2, 2}), OpType::kAllgather)}), kT0);
  c.add(1, list_of({join_request()}), kT0);
  c.add(2, list_of({with_op(allreduce("g", {2, 2}), OpType::kAllgather)}), kT0);
  c.add(3, list_of({join_request()}), kT0);
  std::vector<Response> ready = c.take_ready();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].name, "g");
  EXPECT_EQ(ready[0].status.code(), StatusCode::kFailedPrecondition);
  expect_message_has(ready[0], {"allgather 'g'", "[1, 3]"});
}

TEST(CoordinatorTest, NonAllreduceFailsAtOnceWhileARankHasJoined) {
  // Rank 1 joined; ranks 0 and 2 send allgathers under names that do not match (unnamed
  // calls whose counters the join left out of step): each fails at once, alone.
  Coordinator c(3);
  c.add(1, list_of({join_request()}), kT0);
  c.add(0, list_of({with_op(allreduce("g.1", {2}), OpType::kAllgather)}), kT0);
  std::vector<Response> ready = c.take_ready();
  ASSERT_EQ(names_of(ready), (std::vector<std::string>{"g.1"}));
  EXPECT_EQ(ready[0].status.code(), StatusCode::kFailedPrecondition);
  expect_message_has(ready[0], {"allgather 'g.1'", "ranks [1] have joined"});
  c.add(2, list_of({with_op(allreduce("g.2", {2}), OpType::kBroadcast)}), kT0);
  ready = c.take_ready();
  ASSERT_EQ(names_of(ready), (std::vector<std::string>{"g.2"}));
  EXPECT_EQ(ready[0].status.code(), StatusCode::kFailedPrecondition);
  // An allreduce still waits for the ranks that have not joined.
  c.add(0, list_of({allreduce("w")}), kT0);
  EXPECT_TRUE(c.take_ready().empty());
}

TEST(CoordinatorTest, JoinResponseWhenAllJoinedNamesLastRank) {
  Coordinator c(3);
  c.add(0, list_of({}), at(0));
  c.add(1, list_of({join_request()}), at(0));
  c.add(2, list_of({join_request()}), at(0));
  EXPECT_TRUE(c.take_ready().empty()) << "rank 0 has not joined";
  c.add(0, list_of({join_request()}), at(1));
  c.add(1, list_of({}), at(1));
  c.add(2, list_of({}), at(1));
  std::vector<Response> ready = c.take_ready();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].op, OpType::kJoin);
  EXPECT_TRUE(ready[0].status.ok());
  EXPECT_EQ(ready[0].last_joined_rank, 0) << "rank 0 joined last, though it is the lowest rank";
}

TEST(CoordinatorTest, JoinTieInOneRoundGoesToHighestRank) {
  Coordinator c(4);
  c.add(2, list_of({join_request()}), at(0));
  EXPECT_TRUE(c.take_ready().empty());
  for (int r : {0, 1, 3}) c.add(r, list_of({join_request()}), at(1));
  std::vector<Response> ready = c.take_ready();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].op, OpType::kJoin);
  EXPECT_EQ(ready[0].last_joined_rank, 3);
}

TEST(CoordinatorTest, SingleRankJoin) {
  Coordinator c(1);
  c.add(0, list_of({join_request()}), kT0);
  std::vector<Response> ready = c.take_ready();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].op, OpType::kJoin);
  EXPECT_EQ(ready[0].last_joined_rank, 0);
}

TEST(CoordinatorTest, JoinResetsForTheNextEpoch) {
  Coordinator c(2);
  c.add(0, list_of({join_request()}), kT0);
  c.add(1, list_of({join_request()}), kT0);
  ASSERT_EQ(c.take_ready().size(), 1u);
  // After the join, nobody counts as joined: an allreduce needs both ranks again.
  c.add(0, list_of({allreduce("w")}), kT0);
  EXPECT_TRUE(c.take_ready().empty()) << "rank 1 still counted as joined";
  c.add(1, list_of({allreduce("w")}), kT0);
  std::vector<Response> ready = c.take_ready();
  ASSERT_EQ(ready.size(), 1u);
  // And a second join names its own last rank.
  c.add(1, list_of({join_request()}), kT0);
  EXPECT_TRUE(c.take_ready().empty());
  c.add(0, list_of({join_request()}), kT0);
  ready = c.take_ready();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].last_joined_rank, 0);
}

TEST(CoordinatorTest, DataResponsesPrecedeTheJoinResponse) {
  Coordinator c(2);
  c.add(0, list_of({join_request()}), kT0);
  c.add(1, list_of({allreduce("w"), join_request()}), kT0);
  std::vector<Response> ready = c.take_ready();
  ASSERT_EQ(ready.size(), 2u);
  EXPECT_EQ(ready[0].name, "w");
  EXPECT_EQ(ready[1].op, OpType::kJoin);
  EXPECT_EQ(ready[1].last_joined_rank, 1);
}

// --- process sets -----------------------------------------------------------------------

TEST(CoordinatorTest, AddProcessSetGetsIncreasingIds) {
  Coordinator c(2);
  std::vector<int32_t> ids;
  for (int i = 0; i < 3; ++i) {
    Request q;
    q.op = OpType::kAddProcessSet;
    q.name = "chorus.add_process_set";
    q.ranks = {0, 1};
    c.add(0, list_of({q}), kT0);
    c.add(1, list_of({q}), kT0);
    std::vector<Response> ready = c.take_ready();
    ASSERT_EQ(ready.size(), 1u);
    EXPECT_TRUE(ready[0].status.ok()) << ready[0].status.to_string();
    EXPECT_EQ(ready[0].op, OpType::kAddProcessSet);
    EXPECT_EQ(ready[0].ranks, (std::vector<int32_t>{0, 1}));
    ids.push_back(ready[0].new_set_id);
  }
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2, 3})) << "set 0 is the global set";
}

// A set its members alone ask for (torch.distributed's new_group): ready once the ranks it
// lists have asked, the others owing nothing and never reported missing.
TEST(CoordinatorTest, ASetOfMembersWaitsForItsMembersAlone) {
  Coordinator c(4);
  Request q;
  q.op = OpType::kAddProcessSetOfMembers;
  q.name = "chorus.add_process_set_of_members.[1, 3].0";
  q.ranks = {1, 3};
  c.add(3, list_of({q}), at(0));
  EXPECT_TRUE(c.take_ready().empty()) << "rank 1 has not asked yet";
  StallReport rep = c.inspect_stalls(at(6), /*check_seconds=*/5, /*shutdown_seconds=*/0);
  ASSERT_EQ(rep.warnings.size(), 1u);
  EXPECT_TRUE(has(rep.warnings[0], "not yet by ranks [1]")) << rep.warnings[0];
  c.add(1, list_of({q}), at(7));
  std::vector<Response> ready = c.take_ready();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_TRUE(ready[0].status.ok()) << ready[0].status.to_string();
  EXPECT_EQ(ready[0].ranks, (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(ready[0].new_set_id, 1);
}

// --- stall inspection -------------------------------------------------------------------

TEST(CoordinatorTest, StallWarningNamesSubmittedAndMissingRanks) {
  Coordinator c(4);
  c.add(0, list_of({allreduce("late")}), at(0));
  c.add(2, list_of({allreduce("late")}), at(1));
  const double check = 5, shutdown = 0;

  EXPECT_FALSE(c.stall_due(at(4.9), check, shutdown));
  StallReport rep = c.inspect_stalls(at(4.9), check, shutdown);
  EXPECT_TRUE(rep.warnings.empty());
  EXPECT_TRUE(rep.failures.empty());

  // The age counts from the first rank's submission.
  EXPECT_TRUE(c.stall_due(at(5), check, shutdown));
  rep = c.inspect_stalls(at(5), check, shutdown);
  ASSERT_EQ(rep.warnings.size(), 1u);
  EXPECT_TRUE(has(rep.warnings[0], "allreduce 'late'"));
  EXPECT_TRUE(has(rep.warnings[0], "submitted by ranks [0, 2]"));
  EXPECT_TRUE(has(rep.warnings[0], "not yet by ranks [1, 3]"));
  EXPECT_TRUE(rep.failures.empty());

  // Repeated only after another check period.
  EXPECT_FALSE(c.stall_due(at(9.9), check, shutdown));
  EXPECT_TRUE(c.inspect_stalls(at(9.9), check, shutdown).warnings.empty());
  EXPECT_TRUE(c.stall_due(at(10), check, shutdown));
  rep = c.inspect_stalls(at(10), check, shutdown);
  ASSERT_EQ(rep.warnings.size(), 1u);
  EXPECT_TRUE(has(rep.warnings[0], "waited 10.0 s"));
  EXPECT_FALSE(c.stall_due(at(12), check, shutdown));

  // Warnings never fail a tensor when the shutdown time is 0.
  EXPECT_TRUE(c.inspect_stalls(at(1000), check, shutdown).failures.empty());
  EXPECT_EQ(c.pending_names(), (std::vector<std::string>{"late"}));
}

TEST(CoordinatorTest, StallCheckZeroNeverWarns) {
  Coordinator c(2);
  c.add(0, list_of({allreduce("late")}), at(0));
  EXPECT_FALSE(c.stall_due(at(1e6), 0, 0));
  StallReport rep = c.inspect_stalls(at(1e6), 0, 0);
  EXPECT_TRUE(rep.warnings.empty());
  EXPECT_TRUE(rep.failures.empty());
}

TEST(CoordinatorTest, StallShutdownFailsAndRemovesTheEntry) {
  Coordinator c(3);
  c.add(1, list_of({allreduce("never.elsewhere")}), at(0));
  c.add(0, list_of({allreduce("fine")}), at(0));
  const double check = 2, shutdown = 6;

  EXPECT_FALSE(c.stall_due(at(1), check, shutdown));
  EXPECT_TRUE(c.stall_due(at(2), check, shutdown));
  EXPECT_EQ(c.inspect_stalls(at(2), check, shutdown).warnings.size(), 2u);
  EXPECT_FALSE(c.stall_due(at(3), check, shutdown));
  EXPECT_TRUE(c.stall_due(at(6), check, shutdown));

  StallReport rep = c.inspect_stalls(at(6), check, shutdown);
  ASSERT_EQ(rep.failures.size(), 2u);
  // Sorted by name.
  EXPECT_EQ(rep.failures[0].name, "fine");
  EXPECT_EQ(rep.failures[1].name, "never.elsewhere");
  for (const Response& f : rep.failures) {
    EXPECT_EQ(f.status.code(), StatusCode::kStalled);
    EXPECT_EQ(f.op, OpType::kAllreduce);
    expect_message_has(f, {"CHORUS_STALL_SHUTDOWN_SECONDS", "'" + f.name + "'"});
  }
  expect_message_has(rep.failures[1], {"submitted by ranks [1]", "not yet by ranks [0, 2]"});
  expect_message_has(rep.failures[0], {"submitted by ranks [0]", "not yet by ranks [1, 2]"});
  EXPECT_FALSE(c.stall_due(at(100), check, shutdown)) << "a failed entry is still inspected";
  EXPECT_TRUE(c.inspect_stalls(at(100), check, shutdown).failures.empty()) << "failed twice";
  EXPECT_TRUE(c.take_ready().empty());
}

// Two ranks that submitted in different orders and wait: the warning round says the class
// once, and the shutdown round fails both with it and asks for its exit status (82).
TEST(CoordinatorTest, StallsAreClassifiedAndEndTheJobWithTheClassStatus) {
  Coordinator c(2);
  c.add(0, list_of({allreduce("a")}), at(0));
  c.add(1, list_of({allreduce("b")}), at(0));
  const double check = 1, shutdown = 5;
  StallReport warn = c.inspect_stalls(at(2), check, shutdown);
  ASSERT_EQ(warn.findings.size(), 1u);
  EXPECT_EQ(warn.findings[0].cls, StallClass::kOrderDeadlock);
  EXPECT_EQ(warn.findings[0].tensors, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(warn.exit_status, 0) << "a warning ends nothing";
  StallReport quiet = c.inspect_stalls(at(2.5), check, shutdown);
  EXPECT_TRUE(quiet.findings.empty()) << "said again before the next check period";
  StallReport end = c.inspect_stalls(at(6), check, shutdown);
  ASSERT_EQ(end.failures.size(), 2u);
  for (const Response& f : end.failures) {
    expect_message_has(f, {"ranks submit in different orders"});
  }
  EXPECT_EQ(end.exit_status, 82);
}

TEST(CoordinatorTest, StalledEntryIsNoLongerPending) {
  Coordinator c(2);
  c.add(0, list_of({allreduce("x")}), at(0));
  c.take_ready();
  ASSERT_EQ(c.inspect_stalls(at(10), 1, 5).failures.size(), 1u);
  EXPECT_TRUE(c.pending_names().empty())
      << "pending_names() still lists a tensor the stall inspector failed";
}

TEST(CoordinatorTest, ResubmittedAfterStallFailureStartsAfresh) {
  Coordinator c(2);
  c.add(0, list_of({allreduce("x")}), at(0));
  c.add(1, list_of({}), at(0));
  c.take_ready();
  ASSERT_EQ(c.inspect_stalls(at(10), 1, 5).failures.size(), 1u);
  // Next round: rank 1 finally sends x, which is now a new collective waiting for rank 0.
  c.add(0, list_of({}), at(11));
  c.add(1, list_of({allreduce("x")}), at(11));
  EXPECT_TRUE(c.take_ready().empty()) << "rank 0's failed request was reused";
  EXPECT_EQ(c.pending_names(), (std::vector<std::string>{"x"}));
  // Its age counts from its new first arrival.
  EXPECT_FALSE(c.stall_due(at(15.9), 0, 5));
  EXPECT_TRUE(c.inspect_stalls(at(15.9), 0, 5).failures.empty());
  c.add(0, list_of({allreduce("x")}), at(12));
  EXPECT_EQ(names_of(c.take_ready()), (std::vector<std::string>{"x"}));
}

TEST(CoordinatorTest, OrderAfterStallFailureFollowsNewArrival) {
  Coordinator c(2);
  c.add(0, list_of({allreduce("x")}), at(0));
  c.add(1, list_of({}), at(0));
  c.take_ready();
  ASSERT_EQ(c.inspect_stalls(at(10), 1, 5).failures.size(), 1u);
  // y arrives before the new x; both complete in the same round.
  c.add(0, list_of({allreduce("y"), allreduce("x")}), at(11));
  c.add(1, list_of({allreduce("y"), allreduce("x")}), at(11));
  EXPECT_EQ(names_of(c.take_ready()), (std::vector<std::string>{"y", "x"}));
}

TEST(CoordinatorTest, WaitingReportsForCachedTensors) {
  Coordinator c(3);
  Response cached;
  cached.op = OpType::kBroadcast;
  cached.name = "cached.once";
  c.add_waiting(0, cached, 3.0);
  c.add_waiting(2, cached, 7.5);
  StallReport rep = c.inspect_stalls(kT0, 5, 0);
  ASSERT_EQ(rep.warnings.size(), 1u);
  EXPECT_TRUE(has(rep.warnings[0], "broadcast 'cached.once' waited 7.5 s"));
  EXPECT_TRUE(has(rep.warnings[0], "submitted by ranks [0, 2]"));
  EXPECT_TRUE(has(rep.warnings[0], "not yet by ranks [1]"));
  EXPECT_TRUE(rep.failures.empty());
  // Reports last one round only.
  EXPECT_TRUE(c.inspect_stalls(kT0, 5, 0).warnings.empty());

  // Below the check time: nothing to say.
  c.add_waiting(1, cached, 4.9);
  EXPECT_TRUE(c.inspect_stalls(kT0, 5, 0).warnings.empty());

  // Past the shutdown time: a kStalled failure instead of a warning.
  c.add_waiting(1, cached, 9.0);
  rep = c.inspect_stalls(kT0, 5, 8);
  EXPECT_TRUE(rep.warnings.empty());
  ASSERT_EQ(rep.failures.size(), 1u);
  EXPECT_EQ(rep.failures[0].name, "cached.once");
  EXPECT_EQ(rep.failures[0].op, OpType::kBroadcast);
  EXPECT_EQ(rep.failures[0].status.code(), StatusCode::kStalled);
  expect_message_has(rep.failures[0], {"submitted by ranks [1]", "not yet by ranks [0, 2]"});
}

TEST(CoordinatorTest, JoinedRanksAreNotMissing) {
  Coordinator c(3);
  c.add(0, list_of({join_request()}), at(0));
  Response cached;
  cached.name = "w";
  c.add_waiting(1, cached, 10);
  StallReport rep = c.inspect_stalls(at(0), 5, 0);
  ASSERT_EQ(rep.warnings.size(), 1u);
  EXPECT_TRUE(has(rep.warnings[0], "submitted by ranks [1]"));
  EXPECT_TRUE(has(rep.warnings[0], "not yet by ranks [2]"));
}

}  // namespace
}  // namespace chorus::testing
