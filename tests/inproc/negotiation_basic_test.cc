// In-process negotiation tests, the core protocol: ranks that submit in different orders
// agree on one order, the response cache settles repeated rounds without a gather (and is
// evicted and renegotiated correctly), disagreements fail on every rank, grouped requests
// run together, and a shutdown request reaches every rank in the same round. The harness
// (N ranks as threads, each test under a hard time bound) is in negotiation_world.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/assertions.h"
#include "common/requests.h"
#include "core/codec.h"
#include "core/negotiator.h"
#include "negotiation_world.h"
#include "protocol/message.h"

namespace chorus::testing {
namespace {

// with byte-identical response lists, and each tensor is answered exactly once.
TEST_P(NegotiationTest, EveryRankEndsEveryRoundWithTheSameResponses) {
  World w(n());
  const int kTensors = 12;
  std::vector<std::string> names;
  for (int i = 0; i < kTensors; ++i) names.push_back("grad." + std::to_string(i));
  w.run([&](Rank& r) {
    std::vector<int> order(kTensors);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(100 + r.rank()));
    std::size_t next = 0;
    std::set<std::string> seen;
    for (int round = 0; !contains_all(seen, names); ++round) {
      // Rank r submits 1 + (round + r) % 3 tensors this round.
      for (int k = 1 + (round + r.rank()) % 3; k > 0 && next < order.size(); --k, ++next) {
        r.submit(allreduce(names[order[next]], {order[next] + 1}));
      }
      if (!r.round()) return;
      for (const Response& resp : r.last().responses) seen.insert(resp.name);
    }
  });
  ASSERT_TRUE(no_errors(w));
  EXPECT_TRUE(identical_everywhere(w));
  for (const auto& r : w.ranks) {
    EXPECT_EQ(r->negotiator().pending(), 0u) << "rank " << r->rank();
    for (int i = 0; i < kTensors; ++i) {
      std::vector<Response> got = named(*r, names[i]);
      ASSERT_EQ(got.size(), 1u) << "rank " << r->rank() << ": " << names[i];
      EXPECT_TRUE(got[0].status.ok()) << got[0].status.to_string();
      EXPECT_EQ(got[0].shape, (std::vector<int64_t>{i + 1}));
    }
  }
}

// Mixed ops, submitted one per round in a different order on every rank.
TEST_P(NegotiationTest, DifferentSubmissionOrdersGiveOneOrder) {
  World w(n());
  const std::vector<std::string> names = {"ar.a", "bc.b", "ag.c", "rs.d", "ar.e", "bc.f"};
  auto make = [&](const std::string& name, int rank) {
    Request q = allreduce(name, {static_cast<int64_t>(2 * n()), 3});
    if (name.rfind("bc", 0) == 0) {
      q.op = OpType::kBroadcast;
      q.root = n() - 1;
    } else if (name.rfind("ag", 0) == 0) {
      q.op = OpType::kAllgather;
      q.shape = {rank + 1, 3};
    } else if (name.rfind("rs", 0) == 0) {
      q.op = OpType::kReducescatter;
    }
    return q;
  };
  w.run([&](Rank& r) {
    std::vector<std::string> order = names;
    std::rotate(order.begin(), order.begin() + r.rank() % order.size(), order.end());
    if (r.rank() % 2) std::reverse(order.begin(), order.end());
    std::set<std::string> seen;
    for (std::size_t round = 0; !contains_all(seen, names); ++round) {
      if (round < order.size()) r.submit(make(order[round], r.rank()));
      if (!r.round()) return;
      for (const Response& resp : r.last().responses) seen.insert(resp.name);
    }
  });
  ASSERT_TRUE(no_errors(w));
  EXPECT_TRUE(identical_everywhere(w));
  const Rank& r0 = *w.ranks[0];
  ASSERT_EQ(r0.responses().size(), names.size()) << describe(r0.responses());
  for (const Response& resp : r0.responses()) {
    EXPECT_TRUE(resp.status.ok()) << resp.name << ": " << resp.status.to_string();
  }
  std::vector<Response> ag = named(r0, "ag.c");
  ASSERT_EQ(ag.size(), 1u);
  std::vector<int64_t> first_dims;
  for (int r = 0; r < n(); ++r) first_dims.push_back(r + 1);
  EXPECT_EQ(ag[0].first_dims, first_dims);
  std::vector<Response> bc = named(r0, "bc.b");
  ASSERT_EQ(bc.size(), 1u);
  EXPECT_EQ(bc[0].root, n() - 1);
}

// The second time the same tensors come, the cache settles the round without a gather;
// a new shape under a known name is renegotiated.
TEST_P(NegotiationTest, CacheHitNeedsNoGatherAndShapeChangeRenegotiates) {
  World w(n());
  struct Phase {
    std::vector<Request> requests;
    int rounds = 0;
    int64_t gathers = 0;  // gathers the phase needed (read by rank 0)
    bool any_coordinator = false;
  };
  std::vector<Phase> phases(4);
  phases[0].requests = {allreduce("a"), allreduce("b", {2, 2}), allreduce("c", {7})};
  phases[1].requests = phases[0].requests;
  phases[2].requests = {allreduce("a", {8}), allreduce("b", {2, 2}), allreduce("c", {7})};
  phases[3].requests = phases[2].requests;
  std::vector<std::vector<Response>> answers(phases.size());  // rank 0's, per phase

  w.run([&](Rank& r) {
    for (std::size_t p = 0; p < phases.size(); ++p) {
      const int64_t gathers_before = w.hub.gathers();
      for (const Request& q : phases[p].requests) r.submit(q);
      int rounds = 0;
      bool coordinator = false;
      std::vector<Response> got;
      while (got.size() < phases[p].requests.size()) {
        if (!r.round()) return;
        ++rounds;
        coordinator = coordinator || r.last().used_coordinator;
        for (const Response& resp : r.last().responses) got.push_back(resp);
      }
      if (r.rank() == 0) {
        phases[p].rounds = rounds;
        phases[p].gathers = w.hub.gathers() - gathers_before;
        phases[p].any_coordinator = coordinator;
        answers[p] = got;
      }
    }
  });
  ASSERT_TRUE(no_errors(w));
  EXPECT_TRUE(identical_everywhere(w));

  EXPECT_TRUE(phases[0].any_coordinator);
  EXPECT_GE(phases[0].gathers, 1);
  for (int p : {1, 3}) {
    EXPECT_EQ(phases[p].rounds, 1) << "phase " << p << ": a cached round should be enough";
    EXPECT_FALSE(phases[p].any_coordinator) << "phase " << p;
    EXPECT_EQ(phases[p].gathers, 0) << "phase " << p << " gathered";
  }
  EXPECT_TRUE(phases[2].any_coordinator) << "a changed shape must go to the coordinator";
  EXPECT_GE(phases[2].gathers, 1);
  EXPECT_LE(phases[2].rounds, 3);

  for (std::size_t p = 0; p < phases.size(); ++p) {
    ASSERT_EQ(answers[p].size(), 3u) << "phase " << p << ": " << describe(answers[p]);
    for (const Request& q : phases[p].requests) {
      auto it = std::find_if(answers[p].begin(), answers[p].end(),
                             [&](const Response& x) { return x.name == q.name; });
      ASSERT_NE(it, answers[p].end()) << "phase " << p << ": no answer for " << q.name;
      EXPECT_TRUE(it->status.ok()) << it->status.to_string();
      EXPECT_EQ(it->shape, q.shape) << "phase " << p << ": " << q.name;
    }
  }
  for (const auto& r : w.ranks) {
    EXPECT_EQ(r->negotiator().cache().size(), 3) << "rank " << r->rank();
  }
}

// A cache hit counts as a use: with two slots, the tensor that ran from the cache most
// recently survives the next insertion, and the other one is evicted.
TEST_P(NegotiationTest, CacheHitRefreshesEvictionOrder) {
  NegotiatorOptions options;
  options.cache_capacity = 2;
  World w(n(), options);
  const std::vector<std::string> phases = {"a", "b", "a", "c", "a", "b"};
  std::vector<int64_t> gathers(phases.size(), 0);  // per phase, read by rank 0
  w.run([&](Rank& r) {
    for (std::size_t p = 0; p < phases.size(); ++p) {
      const int64_t before = w.hub.gathers();
      r.submit(allreduce(phases[p]));
      const std::size_t want = named(r, phases[p]).size() + 1;
      while (named(r, phases[p]).size() < want) {
        if (!r.round()) return;
      }
      if (r.rank() == 0) gathers[p] = w.hub.gathers() - before;
    }
  });
  ASSERT_TRUE(no_errors(w));
  EXPECT_TRUE(identical_everywhere(w));
  EXPECT_EQ(gathers[2], 0) << "'a' was cached";
  EXPECT_GE(gathers[3], 1) << "'c' is new";
  EXPECT_EQ(gathers[4], 0) << "'a' ran from the cache after 'b', so 'c' should have evicted 'b'";
  EXPECT_GE(gathers[5], 1) << "'b' should have been evicted";
}

// One rank disagrees on the dtype: every rank gets the same error, naming both groups of
// ranks and both values.
TEST_P(NegotiationTest, MismatchFailsOnEveryRank) {
  if (n() < 2) GTEST_SKIP() << "a disagreement needs two ranks";
  World w(n());
  w.run([&](Rank& r) {
    r.submit(allreduce("w", {4}, r.rank() == n() - 1 ? DataType::kFloat64 : DataType::kFloat32));
    r.submit(allreduce("ok"));
    std::set<std::string> seen;
    while (!contains_all(seen, {"w", "ok"})) {
      if (!r.round()) return;
      for (const Response& resp : r.last().responses) seen.insert(resp.name);
    }
  });
  ASSERT_TRUE(no_errors(w));
  EXPECT_TRUE(identical_everywhere(w));
  for (const auto& r : w.ranks) {
    std::vector<Response> got = named(*r, "w");
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].status.code(), StatusCode::kMismatch) << got[0].status.to_string();
    const std::string& m = got[0].status.message();
    EXPECT_TRUE(has(m, "float32 on ranks " + ranks_string(range_ranks(0, n() - 1))));
    EXPECT_TRUE(has(m, "float64 on ranks " + ranks_string({n() - 1})));
    ASSERT_EQ(named(*r, "ok").size(), 1u);
    EXPECT_TRUE(named(*r, "ok")[0].status.ok());
    EXPECT_EQ(r->negotiator().pending(), 0u);
  }
}

// A disagreement about a cached tensor: the rank whose request differs evicts the slot
// everywhere, the coordinator then sees the disagreement, and every rank fails it.
TEST_P(NegotiationTest, MismatchOnACachedTensorFailsOnEveryRank) {
  if (n() < 2) GTEST_SKIP() << "a disagreement needs two ranks";
  World w(n());
  const int odd = n() / 2;  // the rank that changes its shape
  std::vector<std::vector<Response>> phase_answers(3);
  w.run([&](Rank& r) {
    for (int phase = 0; phase < 3; ++phase) {
      std::vector<int64_t> shape = {4};
      if (phase == 1 && r.rank() == odd) shape = {5};
      r.submit(allreduce("v", shape));
      std::vector<Response> got;
      while (got.empty()) {
        if (!r.round()) return;
        got = r.last().responses;
      }
      if (r.rank() == 0) phase_answers[phase] = got;
    }
  });
  ASSERT_TRUE(no_errors(w));
  EXPECT_TRUE(identical_everywhere(w));
  ASSERT_EQ(phase_answers[1].size(), 1u) << describe(phase_answers[1]);
  const Response& bad = phase_answers[1][0];
  EXPECT_EQ(bad.status.code(), StatusCode::kMismatch) << bad.status.to_string();
  EXPECT_TRUE(has(bad.status.message(), "[5] on ranks [" + std::to_string(odd) + "]"));
  std::vector<int32_t> others;
  for (int r = 0; r < n(); ++r) {
    if (r != odd) others.push_back(r);
  }
  EXPECT_TRUE(has(bad.status.message(), "[4] on ranks " + ranks_string(others)));
  // Agreement again afterwards.
  ASSERT_EQ(phase_answers[2].size(), 1u);
  EXPECT_TRUE(phase_answers[2][0].status.ok()) << phase_answers[2][0].status.to_string();
}

// A grouped allreduce: members run in the same round, together and in group order, even
// when ranks submit the group in different rounds; the second time, from the cache.
TEST_P(NegotiationTest, GroupedRequestsRunTogether) {
  World w(n());
  const int kMembers = 3;
  auto member = [&](int i) {
    Request q = allreduce("layer.w" + std::to_string(i), {i + 2});
    q.group = "layer.w0/group";
    q.group_size = kMembers;
    q.group_index = i;
    return q;
  };
  w.run([&](Rank& r) {
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<std::string> want;
      for (int i = 0; i < kMembers; ++i) want.push_back("layer.w" + std::to_string(i));
      std::set<std::string> seen;
      for (int round = 0; !contains_all(seen, want); ++round) {
        // Rank r submits the group at round r, members in reverse. In the first pass a new
        // solo tensor comes every round as well; the second pass is the group alone, so
        // its rounds show whether the cache settled them.
        if (round == r.rank()) {
          for (int i = kMembers - 1; i >= 0; --i) r.submit(member(i));
        }
        if (pass == 0) {
          const std::string solo = "solo." + std::to_string(round);
          r.submit(allreduce(solo));
          want.push_back(solo);
        }
        if (!r.round()) return;
        for (const Response& resp : r.last().responses) seen.insert(resp.name);
      }
    }
  });
  ASSERT_TRUE(no_errors(w));
  EXPECT_TRUE(identical_everywhere(w));
  // Rank 0's rounds: in each, the members either all appear or none does.
  int rounds_with_group = 0;
  int cached_group_rounds = 0;
  for (std::size_t k = 0; k < w.ranks[0]->records().size(); ++k) {
    StatusOr<ResponseList> list = codec::decode_response_list(w.ranks[0]->records()[k].encoded);
    ASSERT_TRUE(list.ok());
    std::vector<int> positions;
    for (std::size_t i = 0; i < list->responses.size(); ++i) {
      const Response& resp = list->responses[i];
      EXPECT_TRUE(resp.status.ok()) << resp.name << ": " << resp.status.to_string();
      if (resp.group_size > 0) positions.push_back(static_cast<int>(i));
    }
    if (positions.empty()) continue;
    ++rounds_with_group;
    ASSERT_EQ(positions.size(), static_cast<std::size_t>(kMembers))
        << "round " << k << ": " << describe(list->responses);
    if (!w.ranks[0]->records()[k].used_coordinator) ++cached_group_rounds;
    if (rounds_with_group == 1) {
      // From the coordinator: adjacent, in group order.
      for (int i = 0; i < kMembers; ++i) {
        EXPECT_EQ(positions[i], positions[0] + i) << describe(list->responses);
        EXPECT_EQ(list->responses[positions[i]].group_index, i) << describe(list->responses);
        EXPECT_EQ(list->responses[positions[i]].shape, (std::vector<int64_t>{i + 2}));
      }
    }
  }
  EXPECT_EQ(rounds_with_group, 2);
  EXPECT_EQ(cached_group_rounds, 1) << "the second pass should be settled by the cache";
}

// A shutdown request from one rank is seen by every rank in the same round.
TEST_P(NegotiationTest, ShutdownFromOneRankSeenByAllInTheSameRound) {
  World w(n());
  const int asker = (n() - 1) / 2;
  const int kAskAt = 4;
  w.run([&](Rank& r) {
    for (int round = 0;; ++round) {
      r.submit(allreduce("step." + std::to_string(round)));
      if (!r.round(r.rank() == asker && round == kAskAt)) return;
      if (r.last().shutdown) return;
      if (round > kAskAt + 20) return;  // identical_everywhere will tell what happened
    }
  });
  ASSERT_TRUE(no_errors(w));
  EXPECT_TRUE(identical_everywhere(w));
  for (const auto& r : w.ranks) {
    ASSERT_EQ(r->records().size(), static_cast<std::size_t>(kAskAt + 1)) << "rank " << r->rank();
    for (int k = 0; k < kAskAt; ++k) {
      EXPECT_FALSE(r->records()[k].shutdown) << "rank " << r->rank() << " round " << k;
    }
    EXPECT_TRUE(r->records()[kAskAt].shutdown) << "rank " << r->rank();
  }
}

// A cache of two slots and ten tensors, submitted a few per round in rank-specific orders,
// some changing shape from one step to the next: slots are evicted while requests that hit
// them are pending. Everything completes, identically, with the right shapes.
TEST_P(NegotiationTest, TinyCacheWithEvictionsWhileRequestsPending) {
  NegotiatorOptions options;
  options.cache_capacity = 2;
  World w(n(), options);
  const int kTensors = 10, kSteps = 5;
  auto shape_of = [](int tensor, int step) {
    return std::vector<int64_t>{tensor + 1 + ((tensor % 3 == 0) ? step % 2 : 0)};
  };
  w.run([&](Rank& r) {
    std::mt19937 rng(7 * r.rank() + 1);
    for (int step = 0; step < kSteps; ++step) {
      std::vector<int> order(kTensors);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
      std::size_t next = 0;
      std::set<std::string> seen;
      std::vector<std::string> want;
      for (int t = 0; t < kTensors; ++t) want.push_back("t" + std::to_string(t));
      for (int round = 0; !contains_all(seen, want); ++round) {
        for (int k = static_cast<int>(rng() % 3); k > 0 && next < order.size(); --k, ++next) {
          r.submit(allreduce("t" + std::to_string(order[next]), shape_of(order[next], step)));
        }
        if (!r.round()) return;
        for (const Response& resp : r.last().responses) {
          if (!seen.insert(resp.name).second) {
            ADD_FAILURE() << "rank " << r.rank() << " step " << step << ": " << resp.name
                          << " answered twice";
          }
        }
        if (r.negotiator().cache().size() > 2) {
          ADD_FAILURE() << "rank " << r.rank() << ": cache holds " << r.negotiator().cache().size();
        }
      }
    }
  });
  ASSERT_TRUE(no_errors(w));
  EXPECT_TRUE(identical_everywhere(w));
  const Rank& r0 = *w.ranks[0];
  ASSERT_EQ(r0.responses().size(), static_cast<std::size_t>(kTensors * kSteps));
  for (int t = 0; t < kTensors; ++t) {
    std::vector<Response> got = named(r0, "t" + std::to_string(t));
    ASSERT_EQ(got.size(), static_cast<std::size_t>(kSteps));
    for (int step = 0; step < kSteps; ++step) {
      EXPECT_TRUE(got[step].status.ok()) << got[step].name << ": " << got[step].status.to_string();
      EXPECT_EQ(got[step].shape, shape_of(t, step)) << got[step].name << " step " << step;
    }
  }
  // The caches ended identical.
  for (const auto& r : w.ranks) {
    const ResponseCache& a = r0.negotiator().cache();
    const ResponseCache& b = r->negotiator().cache();
    ASSERT_EQ(a.slot_bound(), b.slot_bound()) << "rank " << r->rank();
    for (int s = 0; s < a.slot_bound(); ++s) {
      ASSERT_EQ(a.occupied(s), b.occupied(s)) << "rank " << r->rank() << " slot " << s;
      if (a.occupied(s)) EXPECT_EQ(a.at(s), b.at(s)) << "rank " << r->rank() << " slot " << s;
    }
  }
}

// Cache capacity 0: every round goes through the coordinator, and still agrees.
TEST_P(NegotiationTest, CacheOffStillAgrees) {
  NegotiatorOptions options;
  options.cache_capacity = 0;
  World w(n(), options);
  w.run([&](Rank& r) {
    for (int pass = 0; pass < 3; ++pass) {
      r.submit(allreduce("a"));
      r.submit(allreduce("b"));
      std::size_t before = r.responses().size();
      while (r.responses().size() < before + 2) {
        if (!r.round()) return;
        if (!r.last().responses.empty() && !r.last().used_coordinator) {
          ADD_FAILURE() << "rank " << r.rank() << ": responses without the coordinator";
        }
      }
    }
  });
  ASSERT_TRUE(no_errors(w));
  EXPECT_TRUE(identical_everywhere(w));
  EXPECT_EQ(w.ranks[0]->responses().size(), 6u);
  for (const auto& r : w.ranks) EXPECT_EQ(r->negotiator().cache().size(), 0);
}

INSTANTIATE_TEST_SUITE_P(Ranks, NegotiationTest, ::testing::Values(1, 2, 3, 4, 5), rank_count_name);

}  // namespace
}  // namespace chorus::testing
