// In-process negotiation tests: N ranks as threads, each with its own Negotiator over the
// in-memory transport, driving rounds (start, poll until done) until a condition that every
// rank computes from the round's responses (identical everywhere, so all ranks stop in the
// same round). Every test has a hard bound: a rank that gives up aborts the hub, the others
// then fail too, and the test reports what was missing instead of hanging.
#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/codec.h"
#include "core/logging.h"
#include "core/message.h"
#include "core/negotiator.h"
#include "in_memory_transport.h"

namespace chorus {
namespace {

using Clock = Negotiator::Clock;
using Hub = chorus::testing::Hub;
using InMemoryTransport = chorus::testing::InMemoryTransport;

// --- harness ----------------------------------------------------------------------------

struct RoundRecord {
  std::string encoded;  // the round's responses, encoded: compared byte for byte
  bool shutdown = false;
  bool used_coordinator = false;
};

class Rank {
 public:
  Rank(Hub* hub, int rank, const NegotiatorOptions& options, Clock::time_point deadline)
      : hub_(hub),
        transport_(hub, rank),
        negotiator_(&transport_, options, "global"),
        deadline_(deadline) {}

  int rank() const { return transport_.rank(); }
  int size() const { return transport_.size(); }
  Negotiator& negotiator() { return negotiator_; }
  const Negotiator& negotiator() const { return negotiator_; }

  void submit(Request q) { negotiator_.submit(std::move(q), Clock::now()); }

  /// One round: start, then poll until done. False (with error() set and the hub aborted)
  /// when the round failed or the test's time bound passed.
  bool round(bool shutdown = false) {
    if (Clock::now() > deadline_) {
      return fail("gave up at round " + std::to_string(records_.size()) +
                  ": the test's condition was not reached within its time bound (" +
                  std::to_string(negotiator_.pending()) + " requests still pending here)");
    }
    Status s = negotiator_.start(shutdown, Clock::now());
    if (!s.ok())
      return fail("start of round " + std::to_string(records_.size()) + ": " + s.to_string());
    for (;;) {
      StatusOr<bool> done = negotiator_.poll();
      if (!done.ok()) {
        return fail("poll in round " + std::to_string(records_.size()) + ": " +
                    done.status().to_string());
      }
      if (*done) break;
      if (Clock::now() > deadline_) {
        return fail("round " + std::to_string(records_.size()) + " did not finish in time");
      }
      std::this_thread::yield();
    }
    if (Status c = negotiator_.complete(Clock::now()); !c.ok()) {
      return fail("completion of round " + std::to_string(records_.size()) + ": " + c.to_string());
    }
    const Negotiator::Round& r = negotiator_.round();
    records_.push_back({codec::encode(ResponseList{r.responses}), r.shutdown, r.used_coordinator});
    for (const Response& resp : r.responses) responses_.push_back(resp);
    return true;
  }

  const Negotiator::Round& last() const { return negotiator_.round(); }
  const std::vector<RoundRecord>& records() const { return records_; }
  const std::vector<Response>& responses() const { return responses_; }
  const std::string& error() const { return error_; }

 private:
  bool fail(const std::string& why) {
    if (error_.empty()) error_ = "rank " + std::to_string(rank()) + ": " + why;
    hub_->abort(error_);
    return false;
  }

  Hub* hub_;
  InMemoryTransport transport_;
  Negotiator negotiator_;
  Clock::time_point deadline_;
  std::vector<RoundRecord> records_;
  std::vector<Response> responses_;
  std::string error_;
};

/// N ranks and their hub. run() starts one thread per rank and joins them all.
struct World {
  World(int n, NegotiatorOptions options = {},
        std::chrono::milliseconds bound = std::chrono::seconds(10))
      : hub(n, bound) {
    const Clock::time_point deadline = Clock::now() + bound;
    for (int r = 0; r < n; ++r) ranks.push_back(std::make_unique<Rank>(&hub, r, options, deadline));
  }

  void run(const std::function<void(Rank&)>& body) {
    std::vector<std::thread> threads;
    for (auto& r : ranks) threads.emplace_back([&body, rank = r.get()] { body(*rank); });
    for (std::thread& t : threads) t.join();
  }

  Hub hub;
  std::vector<std::unique_ptr<Rank>> ranks;
};

// Fails unless no rank reported an error.
::testing::AssertionResult no_errors(const World& w) {
  std::string all;
  for (const auto& r : w.ranks) {
    if (!r->error().empty()) all += r->error() + "\n";
  }
  if (all.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << all;
}

std::string describe(const std::vector<Response>& rs) {
  std::string out;
  for (const Response& r : rs) {
    out += std::string(op_type_name(r.op)) + " '" + r.name + "'" +
           (r.status.ok() ? "" : " " + r.status.to_string()) + "; ";
  }
  return out;
}

// Fails unless every rank ran the same rounds with byte-identical responses.
::testing::AssertionResult identical_everywhere(const World& w) {
  const Rank& ref = *w.ranks[0];
  for (const auto& r : w.ranks) {
    if (r->records().size() != ref.records().size()) {
      return ::testing::AssertionFailure() << "rank " << r->rank() << " ran " << r->records().size()
                                           << " rounds, rank 0 " << ref.records().size();
    }
    for (std::size_t k = 0; k < ref.records().size(); ++k) {
      const RoundRecord& a = ref.records()[k];
      const RoundRecord& b = r->records()[k];
      if (a.encoded != b.encoded || a.shutdown != b.shutdown ||
          a.used_coordinator != b.used_coordinator) {
        auto decode = [](const std::string& e) {
          StatusOr<ResponseList> l = codec::decode_response_list(e);
          return l.ok() ? describe(l->responses) : l.status().to_string();
        };
        return ::testing::AssertionFailure()
               << "round " << k << " differs between rank 0 and rank " << r->rank()
               << "\n  rank 0: " << decode(a.encoded) << " shutdown=" << a.shutdown
               << " coordinator=" << a.used_coordinator << "\n  rank " << r->rank() << ": "
               << decode(b.encoded) << " shutdown=" << b.shutdown
               << " coordinator=" << b.used_coordinator;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

Request allreduce(const std::string& name, std::vector<int64_t> shape = {4},
                  DataType dtype = DataType::kFloat32) {
  Request q;
  q.op = OpType::kAllreduce;
  q.name = name;
  q.dtype = dtype;
  q.shape = std::move(shape);
  return q;
}

Request join_request() {
  Request q;
  q.op = OpType::kJoin;
  q.name = "chorus.join";  // the name the runtime gives it (api.cc)
  return q;
}

std::vector<int32_t> range_ranks(int from, int to) {  // [from, to)
  std::vector<int32_t> v;
  for (int r = from; r < to; ++r) v.push_back(r);
  return v;
}

// "[0, 1, 2]", as the coordinator writes rank lists.
std::string ranks_string(const std::vector<int32_t>& ranks) {
  std::string out = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

// The responses named `name`, over the whole run of one rank.
std::vector<Response> named(const Rank& r, const std::string& name) {
  std::vector<Response> out;
  for (const Response& resp : r.responses()) {
    if (resp.name == name) out.push_back(resp);
  }
  return out;
}

bool contains_all(const std::set<std::string>& seen, const std::vector<std::string>& names) {
  return std::all_of(names.begin(), names.end(),
                     [&](const std::string& n) { return seen.count(n); });
}

::testing::AssertionResult has(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << part << "\" not found in: " << text;
}

// Collects the library's log lines (warnings and worse, at the default level).
class CaptureSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    lines_.emplace_back(msg.payload.data(), msg.payload.size());
  }
  void flush_() override {}

 private:
  std::vector<std::string> lines_;
};

// Adds a CaptureSink to the library's logger for the lifetime of this object. Only while
// no rank thread runs (spdlog's sink list is not guarded).
class ScopedCapture {
 public:
  ScopedCapture() : sink_(std::make_shared<CaptureSink>()) { log().sinks().push_back(sink_); }
  ~ScopedCapture() {
    auto& sinks = log().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  std::vector<std::string> lines() { return sink_->lines(); }

 private:
  std::shared_ptr<CaptureSink> sink_;
};

class NegotiationTest : public ::testing::TestWithParam<int> {
 protected:
  int n() const { return GetParam(); }
};

std::string rank_count_name(const ::testing::TestParamInfo<int>& info) {
  return "np" + std::to_string(info.param);
}

// --- tests ------------------------------------------------------------------------------

// Ranks submit the same tensors in their own orders, a few per round: every round ends
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
        EXPECT_EQ(resp.value, last) << "join rounds " << ::testing::PrintToString(join_round);
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

// Runs rounds, with a short pause between them, until `name` is answered everywhere.
// Returns the seconds it took on this rank.
double rounds_until_answered(Rank& r, const std::string& name, std::size_t answers = 1) {
  const Clock::time_point start = Clock::now();
  while (named(r, name).size() < answers) {
    if (!r.round()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A tensor the last rank never submits: the stall inspector warns, naming the ranks that
// did and did not submit, then fails it on every rank.
TEST_P(NegotiationTest, StallWarningThenShutdownForANewTensor) {
  if (n() < 2) GTEST_SKIP() << "a stall needs a rank that does not submit";
  NegotiatorOptions options;
  options.stall_check_seconds = 0.1;
  options.stall_shutdown_seconds = 0.3;
  World w(n(), options);
  ScopedCapture capture;
  std::vector<double> took(n());
  w.run([&](Rank& r) {
    if (r.rank() != n() - 1) r.submit(allreduce("late.tensor"));
    took[r.rank()] = rounds_until_answered(r, "late.tensor");
  });
  ASSERT_TRUE(no_errors(w));
  EXPECT_TRUE(identical_everywhere(w));
  const std::string submitted = "submitted by ranks " + ranks_string(range_ranks(0, n() - 1));
  const std::string missing = "not yet by ranks " + ranks_string({n() - 1});
  for (const auto& r : w.ranks) {
    std::vector<Response> got = named(*r, "late.tensor");
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].status.code(), StatusCode::kStalled) << got[0].status.to_string();
    EXPECT_TRUE(has(got[0].status.message(), submitted));
    EXPECT_TRUE(has(got[0].status.message(), missing));
    EXPECT_GE(took[r->rank()], 0.29) << "failed before CHORUS_STALL_SHUTDOWN_SECONDS";
    EXPECT_LT(took[r->rank()], 3.0);
    EXPECT_EQ(r->negotiator().pending(), 0u);
  }
  int warnings = 0;
  for (const std::string& line : capture.lines()) {
    if (line.find("stall inspector") == std::string::npos) continue;
    if (line.find("'late.tensor'") == std::string::npos) continue;
    if (line.find("STALLED") != std::string::npos ||
        line.find("CHORUS_STALL_SHUTDOWN_SECONDS") != std::string::npos) {
      continue;  // the failure itself
    }
    ++warnings;
    EXPECT_TRUE(has(line, submitted));
    EXPECT_TRUE(has(line, missing));
  }
  EXPECT_GE(warnings, 1) << "no stall warning before the shutdown";
}

// The same for a cached tensor (agreed by bits, reported through the waiting lists). The
// ranks that do submit it do so at different times; all of them must be named as having
// submitted it, and only the one that never did as missing.
TEST_P(NegotiationTest, StallShutdownForACachedTensorNamesTheRightRanks) {
  if (n() < 2) GTEST_SKIP() << "a stall needs a rank that does not submit";
  NegotiatorOptions options;
  options.stall_check_seconds = 0.1;
  options.stall_shutdown_seconds = 0.3;
  World w(n(), options);
  w.run([&](Rank& r) {
    r.submit(allreduce("cached.once"));
    rounds_until_answered(r, "cached.once");
    // Cached now. Rank 0 submits at once, the middle ranks 0.15 s later, the last never.
    const Clock::time_point start = Clock::now();
    bool submitted = false;
    while (named(r, "cached.once").size() < 2) {
      const double t = std::chrono::duration<double>(Clock::now() - start).count();
      if (!submitted && r.rank() < n() - 1 && (r.rank() == 0 || t >= 0.15)) {
        r.submit(allreduce("cached.once"));
        submitted = true;
      }
      if (!r.round()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  ASSERT_TRUE(no_errors(w));
  EXPECT_TRUE(identical_everywhere(w));
  std::vector<Response> got = named(*w.ranks[0], "cached.once");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[0].status.ok());
  EXPECT_EQ(got[1].status.code(), StatusCode::kStalled) << got[1].status.to_string();
  EXPECT_TRUE(
      has(got[1].status.message(), "submitted by ranks " + ranks_string(range_ranks(0, n() - 1))));
  EXPECT_TRUE(has(got[1].status.message(), "not yet by ranks " + ranks_string({n() - 1})));
  for (const auto& r : w.ranks) EXPECT_EQ(r->negotiator().pending(), 0u) << "rank " << r->rank();
}

// CHORUS_STALL_CHECK_SECONDS=0 turns the warnings off, not the shutdown: a tensor some rank
// never submits still fails after CHORUS_STALL_SHUTDOWN_SECONDS, cached or not.
TEST_P(NegotiationTest, StallShutdownWithoutWarnings) {
  if (n() < 2) GTEST_SKIP() << "a stall needs a rank that does not submit";
  NegotiatorOptions options;
  options.stall_check_seconds = 0;
  options.stall_shutdown_seconds = 0.2;
  World w(n(), options, std::chrono::seconds(2));
  w.run([&](Rank& r) {
    // "new.tensor" is never cached; "cached.tensor" is, after its first run.
    r.submit(allreduce("cached.tensor"));
    rounds_until_answered(r, "cached.tensor");
    if (r.rank() != n() - 1) {
      r.submit(allreduce("new.tensor"));
      r.submit(allreduce("cached.tensor"));
    }
    while (named(r, "new.tensor").empty() || named(r, "cached.tensor").size() < 2) {
      if (!r.round()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  EXPECT_TRUE(no_errors(w));
  EXPECT_TRUE(identical_everywhere(w));
  std::vector<Response> fresh = named(*w.ranks[0], "new.tensor");
  ASSERT_EQ(fresh.size(), 1u) << "the uncached tensor never failed";
  EXPECT_EQ(fresh[0].status.code(), StatusCode::kStalled) << fresh[0].status.to_string();
  std::vector<Response> cached = named(*w.ranks[0], "cached.tensor");
  ASSERT_EQ(cached.size(), 2u) << "the cached tensor never failed: it waits forever";
  EXPECT_EQ(cached[1].status.code(), StatusCode::kStalled) << cached[1].status.to_string();
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

// The harness's own bound: a rank that never takes part makes the others fail in time
// instead of hanging (this is what protects every test above).
TEST(InMemoryTransportTest, MissingRankFailsWithinTheBound) {
  World w(3, {}, std::chrono::milliseconds(300));
  const Clock::time_point start = Clock::now();
  w.run([&](Rank& r) {
    if (r.rank() == 2) return;  // never takes part
    r.submit(allreduce("x"));
    while (r.responses().empty()) {
      if (!r.round()) return;
    }
  });
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0);
  EXPECT_FALSE(w.ranks[0]->error().empty());
  EXPECT_FALSE(w.ranks[1]->error().empty());
}

TEST(InMemoryTransportTest, AndRoundsDoNotMix) {
  Hub hub(2);
  InMemoryTransport a(&hub, 0), b(&hub, 1);
  std::vector<uint64_t> a1 = {0b1110}, a2 = {0b0111}, b1 = {0b0111}, b2 = {0b1111};
  ASSERT_TRUE(a.start_and(&a1).ok());
  EXPECT_FALSE(*a.test_and());
  ASSERT_TRUE(b.start_and(&b1).ok());
  ASSERT_TRUE(*b.test_and());
  EXPECT_EQ(b1[0], 0b0110u);
  // b starts round 2 before a has collected round 1.
  ASSERT_TRUE(b.start_and(&b2).ok());
  EXPECT_FALSE(*b.test_and());
  ASSERT_TRUE(*a.test_and());
  EXPECT_EQ(a1[0], 0b0110u);
  ASSERT_TRUE(a.start_and(&a2).ok());
  ASSERT_TRUE(*a.test_and());
  ASSERT_TRUE(*b.test_and());
  EXPECT_EQ(a2[0], 0b0111u);
  EXPECT_EQ(b2[0], 0b0111u);
  EXPECT_EQ(hub.and_rounds(), 2);
}

TEST(InMemoryTransportTest, DifferentLengthsAreAnError) {
  Hub hub(2);
  InMemoryTransport a(&hub, 0), b(&hub, 1);
  std::vector<uint64_t> x = {1}, y = {1, 1};
  ASSERT_TRUE(a.start_and(&x).ok());
  ASSERT_TRUE(b.start_and(&y).ok());
  EXPECT_FALSE(a.test_and().ok());
}

TEST(InMemoryTransportTest, GatherAndBroadcast) {
  Hub hub(3);
  std::vector<std::vector<std::string>> gathered(3);
  std::vector<std::string> received(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      InMemoryTransport t(&hub, r);
      for (int round = 0; round < 2; ++round) {
        StatusOr<std::vector<std::string>> g =
            t.gather("r" + std::to_string(r) + "/" + std::to_string(round));
        ASSERT_TRUE(g.ok()) << g.status().to_string();
        if (round == 1) gathered[r] = *g;
        std::string data = r == 0 ? "from 0, round " + std::to_string(round) : "junk";
        ASSERT_TRUE(t.broadcast(&data).ok());
        if (round == 1) received[r] = data;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(gathered[0], (std::vector<std::string>{"r0/1", "r1/1", "r2/1"}));
  EXPECT_TRUE(gathered[1].empty());
  for (int r = 0; r < 3; ++r) EXPECT_EQ(received[r], "from 0, round 1") << "rank " << r;
  EXPECT_EQ(hub.gathers(), 2);
  EXPECT_EQ(hub.broadcasts(), 2);
}

}  // namespace
}  // namespace chorus
