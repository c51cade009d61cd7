// In-process negotiation tests of the stall inspector: a tensor that some rank never
// submits is warned about (naming the ranks that did and did not submit it) and then failed
// on every rank, new or cached, with or without the warnings. The harness (N ranks as
// threads, each test under a hard time bound) is in negotiation_world.h.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/assertions.h"
#include "common/requests.h"
#include "core/negotiator.h"
#include "negotiation_world.h"
#include "protocol/message.h"

namespace chorus::testing {
namespace {

using Clock = Negotiator::Clock;

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
    EXPECT_TRUE(has(got[0].status.message(), "; ranks stopped taking part"));
    EXPECT_GE(took[r->rank()], 0.29) << "failed before CHORUS_STALL_SHUTDOWN_SECONDS";
    EXPECT_LT(took[r->rank()], 3.0);
    EXPECT_EQ(r->negotiator().pending(), 0u);
  }
  int warnings = 0, classes = 0;
  for (const std::string& line : capture.lines()) {
    if (line.find("stall inspector") == std::string::npos) continue;
    if (line.find("'late.tensor'") == std::string::npos) continue;
    if (line.find("STALLED") != std::string::npos ||
        line.find("CHORUS_STALL_SHUTDOWN_SECONDS") != std::string::npos) {
      continue;  // the failure itself
    }
    if (has(line, "fix:")) {  // the class of the stall (protocol/stall_classes.h)
      ++classes;
      EXPECT_TRUE(has(line, "ranks stopped taking part")) << line;
      EXPECT_TRUE(has(line, "rank " + std::to_string(n() - 1) + " has nothing outstanding"))
          << line;
      continue;
    }
    ++warnings;
    EXPECT_TRUE(has(line, submitted));
    EXPECT_TRUE(has(line, missing));
  }
  EXPECT_GE(warnings, 1) << "no stall warning before the shutdown";
  EXPECT_GE(classes, 1) << "no stall class said";
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

INSTANTIATE_TEST_SUITE_P(Ranks, NegotiationTest, ::testing::Values(1, 2, 3, 4, 5), rank_count_name);

}  // namespace
}  // namespace chorus::testing
