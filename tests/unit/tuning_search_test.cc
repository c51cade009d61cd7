// The autotuner's search (src/core/tuning_search.h): which settings it samples, in which
// order, and which one it keeps, from scores written in the test.

#include "core/tuning_search.h"

#include <gtest/gtest.h>

#include <functional>
#include <vector>

namespace chorus {
namespace {

TuningCandidates small() {
  TuningCandidates c;
  c.fusion_bytes = {1 << 20, 8 << 20};
  c.algorithms = {HostAlgorithm::kAuto, HostAlgorithm::kDirect};
  c.cycle_ms = {1, 5};
  return c;
}

const TuningSetting kDefaults{4 << 20, HostAlgorithm::kAuto, 5};

// Runs `search` to its end, scoring each setting with `score`; returns the settings sampled.
std::vector<TuningSetting> walk(TuningSearch& search,
                                const std::function<double(const TuningSetting&)>& score) {
  std::vector<TuningSetting> sampled;
  while (!search.done()) {
    sampled.push_back(search.current());
    search.record(score(search.current()));
    if (sampled.size() > 1000) break;
  }
  return sampled;
}

TEST(TuningSearch, CoordinateSamplesTheDefaultsFirstThenOneDimensionAtATime) {
  TuningSearch search(kDefaults, small(), TuningSearchKind::kCoordinate, 100);
  // 8 MiB is the best fusion, direct the best algorithm, 1 ms the best cycle time; their
  // effects add.
  auto score = [](const TuningSetting& s) {
    return (s.fusion_bytes == 8 << 20 ? 10.0 : 0.0) +
           (s.algorithm == HostAlgorithm::kDirect ? 5.0 : 0.0) + (s.cycle_ms == 1 ? 1.0 : 0.0);
  };
  const std::vector<TuningSetting> sampled = walk(search, score);
  const std::vector<TuningSetting> expected = {
      kDefaults,
      {1 << 20, HostAlgorithm::kAuto, 5},
      {8 << 20, HostAlgorithm::kAuto, 5},
      // The algorithm varies around the best fusion so far.
      {8 << 20, HostAlgorithm::kDirect, 5},
      {8 << 20, HostAlgorithm::kDirect, 1},
  };
  EXPECT_EQ(sampled, expected);
  EXPECT_EQ(search.best(), (TuningSetting{8 << 20, HostAlgorithm::kDirect, 1}));
  EXPECT_EQ(search.current(), search.best()) << "the winner is current once the search ended";
  EXPECT_DOUBLE_EQ(search.best_score(), 16.0);
  EXPECT_DOUBLE_EQ(search.defaults_score(), 0.0);
  EXPECT_EQ(search.scored(), 5);
}

TEST(TuningSearch, GridSamplesEveryCombinationOnceAndKeepsTheBest) {
  TuningSearch search(kDefaults, small(), TuningSearchKind::kGrid, 1000);
  // Not additive: only one combination is good, which coordinates would miss.
  auto score = [](const TuningSetting& s) {
    return s == TuningSetting{1 << 20, HostAlgorithm::kDirect, 1} ? 3.0 : 1.0;
  };
  const std::vector<TuningSetting> sampled = walk(search, score);
  // 3 fusion values (the default's added) x 2 algorithms x 2 cycle times.
  ASSERT_EQ(sampled.size(), 12u);
  EXPECT_EQ(sampled.front(), kDefaults);
  for (std::size_t i = 0; i < sampled.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) EXPECT_FALSE(sampled[i] == sampled[j]) << i << " " << j;
  }
  EXPECT_EQ(search.best(), (TuningSetting{1 << 20, HostAlgorithm::kDirect, 1}));
}

TEST(TuningSearch, TiesKeepTheEarlierSettingSoTheDefaultsWinWhenNothingIsBetter) {
  TuningSearch search(kDefaults, small(), TuningSearchKind::kCoordinate, 100);
  walk(search, [](const TuningSetting&) { return 7.0; });
  EXPECT_EQ(search.best(), kDefaults);
}

TEST(TuningSearch, MaxSettingsEndsTheSearchWithTheBestSoFar) {
  TuningSearch search(kDefaults, small(), TuningSearchKind::kCoordinate, 2);
  const std::vector<TuningSetting> sampled =
      walk(search, [](const TuningSetting& s) { return s.fusion_bytes == 1 << 20 ? 2.0 : 1.0; });
  EXPECT_EQ(sampled.size(), 2u);
  EXPECT_EQ(search.best(), (TuningSetting{1 << 20, HostAlgorithm::kAuto, 5}));
}

TEST(TuningSearch, TheSameScoresGiveTheSameWalk) {
  // What makes ranks agree: the walk is a function of the scores alone.
  auto score = [](const TuningSetting& s) {
    return static_cast<double>(s.fusion_bytes % 7) + s.cycle_ms +
           static_cast<double>(static_cast<int>(s.algorithm));
  };
  TuningSearch a(kDefaults, TuningCandidates::standard(), TuningSearchKind::kCoordinate, 100);
  TuningSearch b(kDefaults, TuningCandidates::standard(), TuningSearchKind::kCoordinate, 100);
  EXPECT_EQ(walk(a, score), walk(b, score));
  EXPECT_EQ(a.best(), b.best());
}

TEST(TuningSearch, StandardCandidatesBoundTheFusionBuffer) {
  const TuningCandidates c = TuningCandidates::standard();
  EXPECT_EQ(c.largest_fusion(kDefaults), 32 << 20);
  EXPECT_EQ(c.largest_fusion({64 << 20, HostAlgorithm::kAuto, 5}), 64 << 20);
  EXPECT_EQ(kDefaults.describe(), "fusion 4194304 bytes, host algorithm auto, cycle time 5 ms");
}

}  // namespace
}  // namespace chorus
