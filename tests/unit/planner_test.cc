// Unit tests of the fusion planner (src/fusion/planner.h): thresholds, keys, order, and a
// randomized check of the properties every plan must have.
#include "fusion/planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace chorus {
namespace {

using Indices = std::vector<std::size_t>;

FusionItem item(std::size_t bytes, uint64_t key = 0, bool fusible = true) {
  FusionItem i;
  i.bytes = bytes;
  i.key = key;
  i.fusible = fusible;
  return i;
}

std::vector<Indices> groups(const std::vector<FusionBatch>& batches) {
  std::vector<Indices> out;
  for (const FusionBatch& b : batches) out.push_back(b.items);
  return out;
}

TEST(PlannerTest, EmptyInput) { EXPECT_TRUE(plan_fusion({}, 100).empty()); }

TEST(PlannerTest, SmallItemsShareABatch) {
  std::vector<FusionBatch> plan = plan_fusion({item(10), item(20), item(30)}, 100);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].items, (Indices{0, 1, 2}));
  EXPECT_EQ(plan[0].bytes, 60u);
}

TEST(PlannerTest, ThresholdRespected) {
  std::vector<FusionBatch> plan = plan_fusion({item(40), item(40), item(40), item(40)}, 100);
  EXPECT_EQ(groups(plan), (std::vector<Indices>{{0, 1}, {2, 3}}));
  for (const FusionBatch& b : plan) EXPECT_EQ(b.bytes, 80u);
}

TEST(PlannerTest, ExactFitBoundary) {
  EXPECT_EQ(groups(plan_fusion({item(60), item(40)}, 100)), (std::vector<Indices>{{0, 1}}));
  EXPECT_EQ(groups(plan_fusion({item(60), item(41)}, 100)), (std::vector<Indices>{{0}, {1}}));
  // An item of exactly the threshold is fusible-sized; the next one starts a new batch.
  EXPECT_EQ(groups(plan_fusion({item(100), item(1)}, 100)), (std::vector<Indices>{{0}, {1}}));
  std::vector<FusionBatch> plan = plan_fusion({item(1), item(99)}, 100);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].bytes, 100u);
}

TEST(PlannerTest, ItemLargerThanThresholdRunsAlone) {
  std::vector<FusionBatch> plan = plan_fusion({item(10), item(500), item(10)}, 100);
  // The big one is alone; the small ones may still fuse around it.
  for (const FusionBatch& b : plan) {
    if (std::find(b.items.begin(), b.items.end(), 1u) != b.items.end()) {
      EXPECT_EQ(b.items, (Indices{1}));
      EXPECT_EQ(b.bytes, 500u);
    }
  }
  EXPECT_EQ(groups(plan), (std::vector<Indices>{{0, 2}, {1}}));
}

TEST(PlannerTest, NonFusibleRunsAlone) {
  std::vector<FusionBatch> plan =
      plan_fusion({item(10), item(10, 0, false), item(10), item(10, 0, false)}, 100);
  EXPECT_EQ(groups(plan), (std::vector<Indices>{{0, 2}, {1}, {3}}));
}

TEST(PlannerTest, DifferentKeysNeverShare) {
  std::vector<FusionBatch> plan = plan_fusion({item(1, 7), item(1, 8), item(1, 9)}, 1000);
  EXPECT_EQ(groups(plan), (std::vector<Indices>{{0}, {1}, {2}}));
}

TEST(PlannerTest, InterleavedKeys) {
  std::vector<FusionBatch> plan =
      plan_fusion({item(10, 1), item(10, 2), item(10, 1), item(10, 2), item(10, 1)}, 100);
  EXPECT_EQ(groups(plan), (std::vector<Indices>{{0, 2, 4}, {1, 3}}));
}

TEST(PlannerTest, BatchOrderIsOrderOfFirstItem) {
  // Key 2's batch opens first; key 1's second batch opens after key 3's.
  std::vector<FusionBatch> plan = plan_fusion(
      {item(60, 2), item(60, 1), item(60, 1), item(10, 3), item(30, 2), item(10, 3)}, 100);
  EXPECT_EQ(groups(plan), (std::vector<Indices>{{0, 4}, {1}, {2}, {3, 5}}));
}

TEST(PlannerTest, FullBatchClosesAndANewOneOpens) {
  // 30 would still fit beside 60, but that batch closed when 50 did not fit.
  std::vector<FusionBatch> plan = plan_fusion({item(60), item(50), item(30)}, 100);
  EXPECT_EQ(groups(plan), (std::vector<Indices>{{0}, {1, 2}}));
}

TEST(PlannerTest, ThresholdZeroMeansNoFusion) {
  std::vector<FusionBatch> plan = plan_fusion({item(4), item(4), item(8), item(4, 1)}, 0);
  EXPECT_EQ(groups(plan), (std::vector<Indices>{{0}, {1}, {2}, {3}}));
}

// Zero-element tensors are valid allreduces; with fusion off they must still run one by one.
TEST(PlannerTest, ThresholdZeroMeansNoFusionEvenForEmptyTensors) {
  std::vector<FusionBatch> plan = plan_fusion({item(0), item(0), item(4)}, 0);
  EXPECT_EQ(groups(plan), (std::vector<Indices>{{0}, {1}, {2}}));
}

TEST(PlannerTest, EmptyTensorsFuseUnderAPositiveThreshold) {
  std::vector<FusionBatch> plan = plan_fusion({item(0), item(8), item(0)}, 8);
  EXPECT_EQ(groups(plan), (std::vector<Indices>{{0, 1, 2}}));
  EXPECT_EQ(plan[0].bytes, 8u);
}

TEST(PlannerTest, RandomPlansKeepEveryProperty) {
  std::mt19937 rng(20240611);
  for (int trial = 0; trial < 2000; ++trial) {
    const std::size_t n = rng() % 40;
    const std::size_t threshold = (trial % 10 == 0) ? 0 : 1 + rng() % 300;
    std::vector<FusionItem> items;
    for (std::size_t i = 0; i < n; ++i) {
      // Zero-byte items only under a positive threshold: fusion-off with empty tensors has
      // its own test above.
      const std::size_t bytes = (threshold == 0 ? 1 : 0) + rng() % 200;
      items.push_back(item(bytes, rng() % 3, rng() % 5 != 0));
    }
    std::vector<FusionBatch> plan = plan_fusion(items, threshold);

    std::vector<int> seen(n, 0);
    std::size_t previous_first = 0;
    for (std::size_t b = 0; b < plan.size(); ++b) {
      const FusionBatch& batch = plan[b];
      ASSERT_FALSE(batch.items.empty()) << "trial " << trial;
      std::size_t bytes = 0;
      for (std::size_t k = 0; k < batch.items.size(); ++k) {
        const std::size_t i = batch.items[k];
        ASSERT_LT(i, n) << "trial " << trial;
        ++seen[i];
        bytes += items[i].bytes;
        if (k > 0) {
          EXPECT_LT(batch.items[k - 1], i) << "trial " << trial << ": not in input order";
          EXPECT_EQ(items[i].key, items[batch.items[0]].key) << "trial " << trial;
        }
      }
      EXPECT_EQ(batch.bytes, bytes) << "trial " << trial;
      if (batch.items.size() > 1) {
        EXPECT_LE(bytes, threshold) << "trial " << trial;
        EXPECT_GT(threshold, 0u) << "trial " << trial << ": fused with fusion off";
        for (std::size_t i : batch.items) {
          EXPECT_TRUE(items[i].fusible) << "trial " << trial << ": item " << i;
        }
      }
      if (b > 0) EXPECT_LT(previous_first, batch.items[0]) << "trial " << trial;
      previous_first = batch.items[0];
    }
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(seen[i], 1) << "trial " << trial << ": item " << i;
    }
  }
}

// Given ample room, each key ends up in exactly one batch.
TEST(PlannerTest, AmpleThresholdGivesOneBatchPerKey) {
  std::mt19937 rng(7);
  std::vector<FusionItem> items;
  for (int i = 0; i < 100; ++i) items.push_back(item(1 + rng() % 10, rng() % 4));
  std::vector<FusionBatch> plan = plan_fusion(items, 1 << 20);
  std::vector<uint64_t> keys;
  for (const FusionBatch& b : plan) keys.push_back(items[b.items[0]].key);
  std::vector<uint64_t> unique = keys;
  std::sort(unique.begin(), unique.end());
  unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
  EXPECT_EQ(keys.size(), unique.size()) << "a key was split without need";
}

}  // namespace
}  // namespace chorus
