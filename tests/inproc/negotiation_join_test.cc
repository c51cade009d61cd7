// In-process negotiation tests of join(): ranks that join at different rounds while the
// others keep working, work after a join, and the collectives that cannot run with a joined
// rank (broadcast, a changed shape), cached or not, failing on every rank instead of
// hanging. The harness (N ranks as threads, each test under a hard time bound) is in
// negotiation_world.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "common/assertions.h"
#include "common/requests.h"
#include "core/codec.h"
#include "core/negotiator.h"
#include "negotiation_world.h"
#include "protocol/message.h"

namespace chorus::testing {
namespace {

// Ranks join at different rounds while the others keep submitting allreduces, cached and
// new. Every rank sees the same rounds; new allreduces list the joined ranks; the join
// response comes once, when the last rank joins, and names it.
TEST_P(NegotiationTest, JoinAtDifferentRounds) {
  World w(n());
  std::vector<int> join_round(n(), -1);  // written by each rank for itself
  std::vector<int> batches(n(), 0);      // likewise
  w.run([&](Rank& r) {
    const int planned = 3 + 2 * ((r.rank() + 1) % n());
    bool joined = false;
    int batch = 0;
    for (int round = 0;; ++round) {
      if (!joined && r.negotiator().pending() == 0) {
        if (round >= planned) {
          r.submit(join_request());
          join_round[r.rank()] = round;
          joined = true;
        } else {
          r.submit(allreduce("cached.0"));
          r.submit(allreduce("cached.1", {2, 2}));
          r.submit(allreduce("fresh." + std::to_string(batch++), {3}));
          batches[r.rank()] = batch;
        }
      }
      if (!r.round()) return;
      bool done = false;
      for (const Response& resp : r.last().responses) done = done || resp.op == OpType::kJoin;
      if (done) return;
    }
  });
  ASSERT_TRUE(no_errors(w));
  EXPECT_TRUE(identical_everywhere(w));

  int last = 0;
  for (int r = 0; r < n(); ++r) {
    ASSERT_GE(join_round[r], 0) << "rank " << r << " never joined";
    if (join_round[r] >= join_round[last]) last = r;  // a tie goes to the higher rank
  }
  const Rank& r0 = *w.ranks[0];
  const int final_round = static_cast<int>(r0.records().size()) - 1;
  EXPECT_EQ(final_round, join_round[last]) << "the join response should come in the round "
                                              "the last rank joined";
  int joins = 0;
  int fresh_with_joined = 0;
  for (int k = 0; k <= final_round; ++k) {
    StatusOr<ResponseList> list = codec::decode_response_list(r0.records()[k].encoded);
    ASSERT_TRUE(list.ok());
    std::vector<int32_t> joined_by_now;
    for (int r = 0; r < n(); ++r) {
      if (join_round[r] <= k) joined_by_now.push_back(r);
    }
    for (const Response& resp : list->responses) {
      EXPECT_TRUE(resp.status.ok())
          << "round " << k << ": " << resp.name << ": " << resp.status.to_string();
      if (resp.op == OpType::kJoin) {
        ++joins;
        EXPECT_EQ(resp.last_joined_rank, last)
            << "join rounds " << ::testing::PrintToString(join_round);
      } else if (resp.name.rfind("fresh.", 0) == 0) {
        if (!joined_by_now.empty()) ++fresh_with_joined;
      }
    }
  }
  EXPECT_EQ(joins, 1);
  if (n() > 1) EXPECT_GT(fresh_with_joined, 0) << "the scenario never ran with a joined rank";
  // Each batch ran once: no cached allreduce ran for nobody (e.g. once every rank joined).
  const int ran = *std::max_element(batches.begin(), batches.end());
  for (const char* name : {"cached.0", "cached.1"}) {
    EXPECT_EQ(named(r0, name).size(), static_cast<std::size_t>(ran)) << name;
  }
  for (int b = 0; b < ran; ++b) {
    EXPECT_EQ(named(r0, "fresh." + std::to_string(b)).size(), 1u) << "fresh." << b;
  }
  for (const auto& r : w.ranks) EXPECT_EQ(r->negotiator().pending(), 0u) << "rank " << r->rank();
}

// After a join, the same allreduces run again (from the cache) without any joined rank.
TEST_P(NegotiationTest, WorkAfterJoinStillNegotiates) {
  World w(n());
  std::vector<std::vector<Response>> after(n());
  w.run([&](Rank& r) {
    r.submit(allreduce("x"));
    while (r.responses().empty()) {
      if (!r.round()) return;
    }
    r.submit(join_request());
    bool joined_all = false;
    while (!joined_all) {
      if (!r.round()) return;
      for (const Response& resp : r.last().responses) {
        joined_all |= resp.op == OpType::kJoin;
        // Every rank has joined or is joining: no rank holds "x", so it must not run.
        if (resp.op != OpType::kJoin) {
          ADD_FAILURE() << "rank " << r.rank() << ": '" << resp.name
                        << "' ran while every rank was joining";
        }
      }
    }
    r.submit(allreduce("x"));
    r.submit(allreduce("y"));
    while (after[r.rank()].size() < 2) {
      if (!r.round()) return;
      for (const Response& resp : r.last().responses) after[r.rank()].push_back(resp);
    }
  });
  ASSERT_TRUE(no_errors(w));
  EXPECT_TRUE(identical_everywhere(w));
  for (const Response& resp : after[0]) {
    EXPECT_TRUE(resp.status.ok()) << resp.name << ": " << resp.status.to_string();
  }
}

// A broadcast cannot run with a joined rank. Uncached, the coordinator fails it on every
// rank; it must fail the same way when the broadcast is a cache hit, not wait forever.
TEST_P(NegotiationTest, CachedBroadcastWithJoinedRankFailsInsteadOfHanging) {
  if (n() < 2) GTEST_SKIP() << "needs a rank that joins while another works";
  World w(n(), {}, std::chrono::seconds(2));
  const int joiner = n() - 1;
  w.run([&](Rank& r) {
    auto pause = [] { std::this_thread::sleep_for(std::chrono::microseconds(200)); };
    Request b = allreduce("params", {16});
    b.op = OpType::kBroadcast;
    b.root = 0;
    r.submit(b);
    while (named(r, "params").empty()) {
      if (!r.round()) return;
    }
    // Cached now. The last rank joins; the others broadcast again.
    if (r.rank() == joiner) {
      r.submit(join_request());
    } else {
      r.submit(b);
    }
    while (named(r, "params").size() < 2) {
      if (!r.round()) return;
      pause();
    }
    if (r.rank() != joiner) r.submit(join_request());
    while (named(r, "chorus.join").empty()) {
      if (!r.round()) return;
      pause();
    }
  });
  ASSERT_TRUE(no_errors(w)) << "a broadcast that is a cache hit never completed while rank "
                            << joiner << " had joined";
  EXPECT_TRUE(identical_everywhere(w));
  std::vector<Response> got = named(*w.ranks[0], "params");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].status.code(), StatusCode::kFailedPrecondition) << got[1].status.to_string();
  EXPECT_TRUE(has(got[1].status.message(), ranks_string({joiner})));
}

// join() does not wait for the rank's earlier work, so a rank may join in the same round in
// which it submits an allreduce. If that allreduce disagrees with a cached one (a new shape
// here) while the other ranks ask for the cached version, the ranks disagree: every rank
// must get a mismatch, and the joining rank must never be handed a response for a shape it
// did not ask for.
TEST_P(NegotiationTest, JoinWithAPendingChangedShapeIsAMismatch) {
  if (n() < 2) GTEST_SKIP() << "a disagreement needs two ranks";
  World w(n(), {}, std::chrono::seconds(3));
  const int joiner = n() - 1;
  w.run([&](Rank& r) {
    auto pause = [] { std::this_thread::sleep_for(std::chrono::microseconds(200)); };
    r.submit(allreduce("a", {4}));
    while (named(r, "a").empty()) {
      if (!r.round()) return;
    }
    // "a" is cached with shape [4].
    if (r.rank() == joiner) {
      r.submit(allreduce("a", {8}));
      r.submit(join_request());
    } else {
      r.submit(allreduce("a", {4}));
    }
    while (named(r, "a").size() < 2) {
      if (!r.round()) return;
      pause();
    }
    if (r.rank() != joiner) r.submit(join_request());
    while (named(r, "chorus.join").empty()) {
      if (!r.round()) return;
      pause();
    }
  });
  ASSERT_TRUE(no_errors(w));
  EXPECT_TRUE(identical_everywhere(w));
  std::vector<Response> got = named(*w.ranks[joiner], "a");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].status.code(), StatusCode::kMismatch)
      << "rank " << joiner << " asked for a [8] tensor and got: " << got[1].status.to_string()
      << ", shape " << shape_string(got[1].shape);
  EXPECT_TRUE(has(got[1].status.message(), "[8] on ranks " + ranks_string({joiner})));
  EXPECT_TRUE(has(got[1].status.message(), "[4] on ranks " + ranks_string(range_ranks(0, joiner))));
}

// The uncached version of CachedBroadcastWithJoinedRankFailsInsteadOfHanging: the
// reference behaviour.
TEST_P(NegotiationTest, UncachedBroadcastWithJoinedRankFails) {
  if (n() < 2) GTEST_SKIP() << "needs a rank that joins while another works";
  World w(n());
  const int joiner = 0;
  w.run([&](Rank& r) {
    Request b = allreduce("params", {16});
    b.op = OpType::kBroadcast;
    b.root = n() - 1;
    if (r.rank() == joiner) {
      r.submit(join_request());
    } else {
      r.submit(b);
    }
    while (named(r, "params").empty()) {
      if (!r.round()) return;
    }
    if (r.rank() != joiner) r.submit(join_request());
    while (named(r, "chorus.join").empty()) {
      if (!r.round()) return;
    }
  });
  ASSERT_TRUE(no_errors(w));
  EXPECT_TRUE(identical_everywhere(w));
  std::vector<Response> got = named(*w.ranks[0], "params");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status.code(), StatusCode::kFailedPrecondition) << got[0].status.to_string();
  EXPECT_TRUE(has(got[0].status.message(), "ranks [0] have joined"));
}

INSTANTIATE_TEST_SUITE_P(Ranks, NegotiationTest, ::testing::Values(1, 2, 3, 4, 5), rank_count_name);

}  // namespace
}  // namespace chorus::testing
