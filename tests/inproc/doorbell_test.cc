// Doorbells: the background thread's sleep and who ends it. Ranks are threads here, each
// mapping the host's board on its own, as separate processes would.
//
// A wait that should end on a ring has a long timeout; the tests check that it ended well
// before it, so a lost wake-up fails them instead of passing late.

#include "core/doorbell.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "in_memory_transport.h"

namespace chorus {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr auto kLong = std::chrono::seconds(60);
constexpr auto kWokenWithin = std::chrono::seconds(30);

// `n` doorbells on one board, joined concurrently as every rank of a host would.
std::vector<std::unique_ptr<Doorbells>> host_board(int n) {
  testing::Hub hub(n);
  std::vector<std::unique_ptr<testing::InMemoryTransport>> transports;
  std::vector<std::unique_ptr<Doorbells>> bells;
  for (int r = 0; r < n; ++r) {
    transports.push_back(std::make_unique<testing::InMemoryTransport>(&hub, r));
    bells.push_back(std::make_unique<Doorbells>());
  }
  std::vector<Status> joined(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] { joined[r] = bells[r]->join_host(*transports[r]); });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < n; ++r)
    EXPECT_TRUE(joined[r].ok()) << "rank " << r << ": " << joined[r].to_string();
  return bells;
}

// Runs `wait` on a thread, then `act`; returns how long the wait took and its result.
template <class Wait, class Act>
std::pair<Clock::duration, bool> time_wait(Wait wait, Act act) {
  bool changed = false;
  Clock::time_point start = Clock::now(), end;
  std::thread waiter([&] {
    changed = wait();
    end = Clock::now();
  });
  std::this_thread::sleep_for(milliseconds(20));
  act();
  waiter.join();
  return {end - start, changed};
}

TEST(Doorbells, RingWakesAPrivateWait) {
  Doorbells bell;
  EXPECT_FALSE(bell.shared());
  const uint32_t seen = bell.seq();
  auto [took, changed] =
      time_wait([&] { return bell.wait(seen, kLong, Doorbells::kOwnWork); }, [&] { bell.ring(); });
  EXPECT_TRUE(changed);
  EXPECT_LT(took, kWokenWithin);
}

TEST(Doorbells, RingBeforeTheWaitEndsItAtOnce) {
  Doorbells bell;
  const uint32_t seen = bell.seq();
  bell.ring();
  const Clock::time_point start = Clock::now();
  EXPECT_TRUE(bell.wait(seen, kLong, Doorbells::kOwnWork));
  EXPECT_LT(Clock::now() - start, kWokenWithin);
}

TEST(Doorbells, WaitWithoutRingTimesOut) {
  Doorbells bell;
  EXPECT_FALSE(bell.wait(bell.seq(), microseconds(2000), Doorbells::kOwnWork));
}

TEST(Doorbells, OneRankHostStaysPrivate) {
  std::vector<std::unique_ptr<Doorbells>> bells = host_board(1);
  EXPECT_FALSE(bells[0]->shared());
}

TEST(Doorbells, PeerAnnouncementWakesAWaitForPeers) {
  std::vector<std::unique_ptr<Doorbells>> bells = host_board(3);
  for (const auto& b : bells) ASSERT_TRUE(b->shared());
  const uint32_t seen = bells[0]->seq();
  auto [took, changed] = time_wait([&] { return bells[0]->wait(seen, kLong, Doorbells::kPeers); },
                                   [&] { bells[2]->announce(1); });
  EXPECT_TRUE(changed);
  EXPECT_LT(took, kWokenWithin);
}

// Sleeps on `bell` for `wake` (reading the word again after each wake, as the runtime does,
// each sleep at most 1 s) while another thread calls `ring` 30 times, 5 ms apart. Returns
// how many sleeps that took: one or two if those rings do not end this wait (one may land
// between a read of the word and the sleep), about one per ring if they do.
template <class Ring>
int sleeps_while_ringing(Doorbells& bell, uint32_t wake, Ring ring) {
  std::atomic<bool> done{false};
  std::thread ringer([&] {
    for (int i = 0; i < 30; ++i) {
      ring();
      std::this_thread::sleep_for(milliseconds(5));
    }
    done = true;
  });
  int sleeps = 0;
  for (; !done.load(); ++sleeps) bell.wait(bell.seq(), milliseconds(1000), wake);
  ringer.join();
  return sleeps;
}

TEST(Doorbells, PeerAnnouncementsDoNotEndAWaitForOwnWork) {
  std::vector<std::unique_ptr<Doorbells>> bells = host_board(2);
  EXPECT_LT(sleeps_while_ringing(*bells[0], Doorbells::kOwnWork, [&] { bells[1]->announce(1); }),
            10);
}

TEST(Doorbells, OwnRingsDoNotEndAWaitForPeers) {
  std::vector<std::unique_ptr<Doorbells>> bells = host_board(2);
  EXPECT_LT(sleeps_while_ringing(*bells[0], Doorbells::kPeers, [&] { bells[0]->ring(); }), 10);
}

TEST(Doorbells, RingsEndAWaitForThem) {
  // The check of the two tests above: the same rings, waited for, end each sleep.
  std::vector<std::unique_ptr<Doorbells>> bells = host_board(2);
  EXPECT_GT(sleeps_while_ringing(*bells[0], Doorbells::kPeers, [&] { bells[1]->announce(1); }), 10);
}

TEST(Doorbells, PeerAheadComparesCycles) {
  std::vector<std::unique_ptr<Doorbells>> bells = host_board(3);
  EXPECT_FALSE(bells[0]->peer_ahead(0));
  bells[2]->announce(5);
  EXPECT_TRUE(bells[0]->peer_ahead(4));
  EXPECT_FALSE(bells[0]->peer_ahead(5));
  EXPECT_TRUE(bells[1]->peer_ahead(4));
  // A rank's own cycle never counts.
  EXPECT_FALSE(bells[2]->peer_ahead(0));
}

TEST(Doorbells, RoundCompletesWhenEveryPeerPublished) {
  std::vector<std::unique_ptr<Doorbells>> bells = host_board(3);
  std::vector<uint64_t> mine = {0b1111, ~uint64_t{0}};
  bells[0]->publish(1, mine);
  bells[1]->publish(1, {0b0111, 1});
  EXPECT_FALSE(bells[0]->and_round(1, &mine));
  EXPECT_EQ(mine[0], 0b1111u);  // untouched until the round is complete
  bells[2]->publish(1, {0b1101, 3});
  ASSERT_TRUE(bells[0]->and_round(1, &mine));
  EXPECT_EQ(mine, (std::vector<uint64_t>{0b0101, 1}));
}

TEST(Doorbells, AFasterRankDoesNotOverwriteARoundStillBeingRead) {
  // In each round rank 1 completes first and publishes the next round before rank 0 reads
  // the current one: rank 0 must still see rank 1's bits of the current round.
  std::vector<std::unique_ptr<Doorbells>> bells = host_board(2);
  auto bits_of = [](uint64_t round) { return std::vector<uint64_t>{~(uint64_t{1} << round)}; };
  const std::vector<uint64_t> all = {~uint64_t{0}};
  bells[1]->publish(1, bits_of(1));
  for (uint64_t round = 1; round <= 6; ++round) {
    std::vector<uint64_t> b0 = all;
    bells[0]->publish(round, b0);
    std::vector<uint64_t> b1 = bits_of(round);
    ASSERT_TRUE(bells[1]->and_round(round, &b1));
    bells[1]->publish(round + 1, bits_of(round + 1));
    ASSERT_TRUE(bells[0]->and_round(round, &b0)) << "round " << round;
    EXPECT_EQ(b0, bits_of(round)) << "round " << round;
    EXPECT_EQ(b1, bits_of(round)) << "round " << round;
  }
}

}  // namespace
}  // namespace chorus
