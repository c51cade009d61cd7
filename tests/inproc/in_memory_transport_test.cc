// Tests of the in-process harness itself: the in-memory transport's AND rounds, gather and
// broadcast (in_memory_transport.h), and the time bound that makes a missing rank fail a
// negotiation test instead of hanging it (negotiation_world.h).
#include "in_memory_transport.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "common/requests.h"
#include "core/negotiator.h"
#include "negotiation_world.h"

namespace chorus::testing {
namespace {

using Clock = Negotiator::Clock;

// The harness's own bound: a rank that never takes part makes the others fail in time
// instead of hanging (this is what protects every negotiation test).
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
}  // namespace chorus::testing
