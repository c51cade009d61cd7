// The cost model of the host algorithms (collectives/cost_model.h): the counts each
// algorithm's derivation gives, the growth in P that the algorithms exist for, and the choice.
#include "collectives/cost_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace chorus {
namespace {

constexpr int64_t kMiB = 1 << 20;

TEST(CostModel, CountsOnAPowerOfTwo) {
  const LinkModel link;
  const int64_t n = 64 * kMiB;
  const Cost doubling = allreduce_cost(HostAlgorithm::kRecursiveDoubling, 8, n, link);
  EXPECT_EQ(3, doubling.rounds);
  EXPECT_EQ(3, doubling.messages);
  EXPECT_EQ(3 * n, doubling.bytes);
  EXPECT_EQ(3 * n, doubling.combined);
  const Cost halving = allreduce_cost(HostAlgorithm::kHalvingDoubling, 8, n, link);
  EXPECT_EQ(6, halving.rounds);
  EXPECT_EQ(6, halving.messages);
  EXPECT_EQ(2 * n * 7 / 8, halving.bytes);
  EXPECT_EQ(n * 7 / 8, halving.combined);
  const Cost direct = allreduce_cost(HostAlgorithm::kDirect, 8, n, link);
  EXPECT_EQ(2, direct.rounds);
  EXPECT_EQ(14, direct.messages);
  EXPECT_EQ(2 * n * 7 / 8, direct.bytes);
  const Cost gather = allreduce_cost(HostAlgorithm::kGatherAll, 8, n, link);
  EXPECT_EQ(3, gather.rounds);
  EXPECT_EQ(7 * n, gather.bytes);
  EXPECT_DOUBLE_EQ(link.alpha_s * 6 + link.beta_s_per_byte * halving.bytes +
                       link.gamma_s_per_byte * halving.combined,
                   halving.seconds);
}

TEST(CostModel, OddSizesFoldInAndOut) {
  const LinkModel link;
  const int64_t n = 1 << 20;
  // Seven ranks: four leaves, three folded pairs.
  const Cost halving = allreduce_cost(HostAlgorithm::kHalvingDoubling, 7, n, link);
  EXPECT_EQ(2 * 2 + 2, halving.rounds);
  EXPECT_EQ(2 * n * 3 / 4 + 2 * n, halving.bytes);
  const Cost rs = reducescatter_cost(HostAlgorithm::kHalvingDoubling, 7, n, link);
  EXPECT_EQ(2 + 2, rs.rounds);
  const Cost rs_direct = reducescatter_cost(HostAlgorithm::kDirect, 7, n, link);
  EXPECT_EQ(1, rs_direct.rounds);
  EXPECT_EQ(6, rs_direct.messages);
}

TEST(CostModel, MessagesGrowAsLogPForTheTreesAndAsPForDirect) {
  const LinkModel link;
  for (int p : {64, 512, 4096}) {
    const int log_p = static_cast<int>(std::lround(std::log2(p)));
    EXPECT_EQ(2 * log_p, allreduce_cost(HostAlgorithm::kHalvingDoubling, p, kMiB, link).messages);
    EXPECT_EQ(log_p, allreduce_cost(HostAlgorithm::kRecursiveDoubling, p, kMiB, link).messages);
    EXPECT_EQ(2 * (p - 1), allreduce_cost(HostAlgorithm::kDirect, p, kMiB, link).messages);
  }
}

TEST(CostModel, ChoiceFollowsSizeAndRanks) {
  const LinkModel link;
  // Small messages at scale: latency decides, so a log P algorithm without the halving's
  // extra rounds.
  for (int p : {64, 512, 4096}) {
    const HostAlgorithm small = choose_allreduce(p, 4, link);
    EXPECT_TRUE(small == HostAlgorithm::kRecursiveDoubling || small == HostAlgorithm::kGatherAll)
        << p << " ranks: " << kHostAlgorithmWords.name(small);
    EXPECT_EQ(HostAlgorithm::kHalvingDoubling, choose_allreduce(p, 64 * kMiB, link)) << p;
    EXPECT_EQ(HostAlgorithm::kHalvingDoubling, choose_reducescatter(p, 64 * kMiB, link)) << p;
  }
  // Two ranks: gathering the other's vector is one round and as many bytes as any.
  EXPECT_EQ(HostAlgorithm::kGatherAll, choose_allreduce(2, 4, link));
  // The choice is the cheapest, whichever it is.
  for (int p : {2, 3, 5, 7, 8, 100}) {
    for (int64_t n : {int64_t{4}, int64_t{64 << 10}, 64 * kMiB}) {
      const HostAlgorithm best = choose_allreduce(p, n, link);
      for (HostAlgorithm a : {HostAlgorithm::kGatherAll, HostAlgorithm::kDirect,
                              HostAlgorithm::kRecursiveDoubling, HostAlgorithm::kHalvingDoubling}) {
        EXPECT_LE(allreduce_cost(best, p, n, link).seconds, allreduce_cost(a, p, n, link).seconds)
            << p << " ranks, " << n << " bytes: " << kHostAlgorithmWords.name(best) << " vs "
            << kHostAlgorithmWords.name(a);
      }
    }
  }
}

TEST(CostModel, TwoLevelsAddTheHostsPartsToTheCrossAllreduceOfAShard) {
  const LinkModel network;
  LinkModel host;
  host.alpha_s = 1e-6;
  const int64_t n = 64 * kMiB;
  // 1,024 hosts x 4: a direct reduce-scatter and an allgather of 3 blocks inside the host,
  // and halving-doubling of n / 4 over 1,024 hosts (10 levels each way).
  const Cost two = hierarchical_allreduce_cost(1024, 4, n, network, host);
  const Cost cross = allreduce_cost(HostAlgorithm::kHalvingDoubling, 1024, n / 4, network);
  const Cost inside = reducescatter_cost(HostAlgorithm::kDirect, 4, n, host);
  EXPECT_EQ(HostAlgorithm::kHalvingDoubling, choose_allreduce(1024, n / 4, network));
  EXPECT_EQ(inside.rounds + 20 + 1, two.rounds);
  EXPECT_EQ(3 + 20 + 3, two.messages);
  EXPECT_EQ(inside.bytes + cross.bytes + 3 * n / 4, two.bytes);
  EXPECT_EQ(inside.combined + cross.combined, two.combined);
  EXPECT_NEAR(inside.seconds + cross.seconds + 3 * host.alpha_s + 0.75 * n * host.beta_s_per_byte,
              two.seconds, 1e-12);
  // Across the network each rank sends a quarter of what the flat allreduce over all 4,096
  // ranks sends, in fewer rounds.
  const Cost flat = allreduce_cost(HostAlgorithm::kHalvingDoubling, 4096, n, network);
  EXPECT_NEAR(static_cast<double>(flat.bytes) / 4, static_cast<double>(cross.bytes), n * 1e-3);
  EXPECT_LT(cross.rounds, flat.rounds);
  // One rank per host: the cross allreduce alone.
  const Cost one = hierarchical_allreduce_cost(8, 1, n, network, host);
  const Cost eight = allreduce_cost(choose_allreduce(8, n, network), 8, n, network);
  EXPECT_EQ(eight.messages, one.messages);
  EXPECT_EQ(eight.bytes, one.bytes);
  EXPECT_DOUBLE_EQ(eight.seconds, one.seconds);
}

TEST(CostModel, NamesRoundTripAndBadValuesNameTheVariable) {
  for (HostAlgorithm a : {HostAlgorithm::kAuto, HostAlgorithm::kGatherAll, HostAlgorithm::kDirect,
                          HostAlgorithm::kRecursiveDoubling, HostAlgorithm::kHalvingDoubling}) {
    StatusOr<HostAlgorithm> back = kHostAlgorithmWords.parse(kHostAlgorithmWords.name(a), "X");
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(a, *back);
  }
  StatusOr<HostAlgorithm> bad = kHostAlgorithmWords.parse("ring", "CHORUS_HOST_ALGORITHM");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string::npos, bad.status().message().find("CHORUS_HOST_ALGORITHM='ring'"));
}

}  // namespace
}  // namespace chorus
