// chorus-trace's parts on hand-made input: the step split (computing, waiting for peers,
// reducing) with overlapping waits and fused reductions, the slowest rank, the grouping of
// negotiations by their collective's number, the fusion batches, the per-step JSON, and the
// stall classes from flight records written by hand.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "autotune.h"
#include "base/json_value.h"
#include "stall.h"
#include "summary.h"
#include "trace_events.h"

namespace chorus::trace {
namespace {

Span span(int rank, std::string row, std::string phase, int64_t begin, int64_t end,
          std::string detail = {}) {
  return Span{rank, std::move(row), std::move(phase), begin, end, std::move(detail)};
}

const RankStep* find(const StepSummary& s, int rank) {
  for (const RankStep& r : s.ranks) {
    if (r.rank == rank) return &r;
  }
  return nullptr;
}

// Two ranks, one step of 100 ms each. Rank 0 waits from 60 to 100 ms (two overlapping
// waits), its fused reduction runs 80-95 (two tensors, the same interval): 60 computing,
// 15 reducing, 25 waiting for peers. Rank 1 computes 90 and waits 10, 5 of them reducing.
std::vector<Span> one_step() {
  return {span(0, "", "STEP", 0, 100'000, "step 7"),
          span(0, "", "WAIT", 60'000, 90'000),
          span(0, "", "WAIT", 70'000, 100'000),
          span(0, "a", "COLLECTIVE", 80'000, 95'000, "fused: 2 tensors, 300 bytes"),
          span(0, "b", "COLLECTIVE", 80'000, 95'000, "fused: 2 tensors, 300 bytes"),
          span(0, "c", "COLLECTIVE", 96'000, 97'000),
          span(1, "", "STEP", 0, 100'000, "step 7"),
          span(1, "", "WAIT", 90'000, 100'000),
          span(1, "a", "MEMCPY_IN", 92'000, 94'000),
          span(1, "a", "COLLECTIVE", 94'000, 97'000, "fused: 2 tensors, 300 bytes"),
          span(1, "b", "COLLECTIVE", 94'000, 97'000, "fused: 2 tensors, 300 bytes")};
}

TEST(TraceSummary, SplitsAStepIntoComputingWaitingAndReducing) {
  const Summary s = summarize(one_step());
  ASSERT_EQ(s.steps.size(), 1u);
  const StepSummary& step = s.steps[0];
  EXPECT_EQ(step.step, 7);
  const RankStep* r0 = find(step, 0);
  const RankStep* r1 = find(step, 1);
  ASSERT_NE(r0, nullptr);
  ASSERT_NE(r1, nullptr);
  EXPECT_DOUBLE_EQ(r0->step_ms, 100);
  EXPECT_DOUBLE_EQ(r0->compute_ms, 60);
  EXPECT_DOUBLE_EQ(r0->reduce_ms, 16);  // 80-95 and 96-97, inside the waits
  EXPECT_DOUBLE_EQ(r0->peers_ms, 24);
  EXPECT_DOUBLE_EQ(r1->compute_ms, 90);
  EXPECT_DOUBLE_EQ(r1->reduce_ms, 5);  // 92-97
  EXPECT_DOUBLE_EQ(r1->peers_ms, 5);
  EXPECT_EQ(step.slowest_rank, 1);
  EXPECT_TRUE(s.ranks_without_steps.empty());
}

TEST(TraceSummary, CountsFusionBatchesOnTheLowestRankOnce) {
  const Summary s = summarize(one_step());
  EXPECT_EQ(s.fusion.batches, 1);
  EXPECT_EQ(s.fusion.fused, 2);
  EXPECT_EQ(s.fusion.max_tensors, 2);
  EXPECT_EQ(s.fusion.bytes, 300);
  EXPECT_EQ(s.fusion.alone, 1);  // 'c' on rank 0; rank 1's spans are not counted again
}

TEST(TraceSummary, NamesARankWithoutStepMarks) {
  std::vector<Span> spans = one_step();
  spans.push_back(span(2, "a", "COLLECTIVE", 1, 2));
  const Summary s = summarize(spans);
  EXPECT_EQ(s.ranks, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(s.ranks_without_steps, (std::vector<int>{2}));
  EXPECT_NE(summary_text(s).find("rank 2 marked no steps"), std::string::npos);
}

// Rank 1's file dropped its first collective (a rewrite under the cap): numbers, not
// positions, say which spans are one collective.
TEST(TraceSummary, GroupsNegotiationsByTheirCollectiveNumber) {
  const std::vector<Span> spans = {
      span(0, "g", "NEGOTIATE", 10, 50, "collective 1"),
      span(0, "g", "NEGOTIATE", 100, 150, "collective 2"),
      span(1, "g", "NEGOTIATE", 140, 150, "collective 2"),
      span(2, "g", "NEGOTIATE", 20, 50, "collective 1"),
      span(2, "g", "NEGOTIATE", 120, 150, "collective 2"),
      span(2, "h", "NEGOTIATE", 30, 60, "collective 1"),  // another tensor, its own group
      span(1, "g", "NEGOTIATE", 0, 1),                    // no number: not grouped
  };
  const std::vector<std::vector<std::size_t>> groups = negotiations(spans);
  ASSERT_EQ(groups.size(), 3u);
  for (const auto& g : groups) {
    if (spans[g.front()].detail == "collective 2") {
      EXPECT_EQ(g.size(), 3u);
      EXPECT_EQ(spans[last_submitted(spans, g)].rank, 1);
    } else if (spans[g.front()].row == "g") {
      EXPECT_EQ(g.size(), 2u);
      EXPECT_EQ(spans[last_submitted(spans, g)].rank, 2);
    } else {
      EXPECT_EQ(g.size(), 1u);
    }
  }
  const Summary s = summarize(spans);
  ASSERT_FALSE(s.waits.empty());
  EXPECT_EQ(s.waits.front().name, "g");
  EXPECT_EQ(s.waits.front().collectives, 2);
}

TEST(TraceSummary, StepsJsonReadsBack) {
  StatusOr<JsonValue> doc = parse_json(summary_json(summarize(one_step())), "summary");
  ASSERT_TRUE(doc.ok()) << doc.status().to_string();
  const JsonValue* steps = doc->find("steps");
  ASSERT_NE(steps, nullptr);
  ASSERT_EQ(steps->items().size(), 1u);
  const JsonValue& step = steps->items()[0];
  EXPECT_EQ(integer_member(step, "slowest_rank"), 1);
  ASSERT_EQ(step.find("ranks")->items().size(), 2u);
  EXPECT_DOUBLE_EQ(step.find("ranks")->items()[0].find("compute_ms")->as_number(), 60);
}

// Flight records written by hand, as three ranks of a set would write them at a stall.
class StallFromRecords : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/chorus-trace-stall.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    for (int r = 0; r < 3; ++r) std::remove(path(r).c_str());
    rmdir(dir_.c_str());
  }
  std::string path(int rank) const {
    return dir_ + "/chorus-flight.rank" + std::to_string(rank) + ".json";
  }
  // A record of `rank` with `outstanding` (names, submitted at 1 s) at 5 s.
  void write(int rank, const std::vector<std::string>& outstanding) {
    std::string text = "{\"rank\":" + std::to_string(rank) +
                       ",\"reason\":\"test\",\"time_us\":5000000,"
                       "\"sets\":[{\"id\":0,\"ranks\":[0,1,2]}],\"records\":[],\"outstanding\":[";
    for (std::size_t i = 0; i < outstanding.size(); ++i) {
      text += (i ? "," : "") + std::string("{\"set\":0,\"name\":\"") + outstanding[i] +
              "\",\"op\":\"allreduce\",\"submitted_us\":1000000}";
    }
    text += "],\"stall_lines\":[]}";
    std::FILE* f = std::fopen(path(rank).c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text.c_str(), f);
    std::fclose(f);
  }
  std::string dir_;
};

TEST_F(StallFromRecords, FindsTwoOrders) {
  write(0, {"order.a"});
  write(1, {"order.b"});
  write(2, {"order.b"});
  StatusOr<StallReport> r = stall_report(dir_);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_FALSE(r->lines.empty());
  EXPECT_EQ(r->lines.front().rfind("ranks submit in different orders", 0), 0u) << r->lines.front();
  EXPECT_EQ(r->exit_status, 82);
}

TEST_F(StallFromRecords, NamesARankWithoutARecordAsStopped) {
  write(0, {"lonely"});
  write(1, {"lonely"});
  StatusOr<StallReport> r = stall_report(dir_);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->ranks_without_records, (std::vector<int>{2}));
  ASSERT_EQ(r->lines.size(), 1u);
  EXPECT_EQ(r->lines.front().rfind("ranks stopped taking part", 0), 0u) << r->lines.front();
  EXPECT_NE(r->lines.front().find("'lonely' (4.0 s)"), std::string::npos) << r->lines.front();
  EXPECT_EQ(r->exit_status, 84);
}

TEST_F(StallFromRecords, NothingStuckWhenEveryRankHoldsTheSame) {
  for (int rank = 0; rank < 3; ++rank) write(rank, {"everyone"});
  StatusOr<StallReport> r = stall_report(dir_);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->lines.empty());
  EXPECT_EQ(r->exit_status, 0);
  EXPECT_NE(stall_text(*r).find("no stuck collectives"), std::string::npos);
}

TEST_F(StallFromRecords, AnEmptyDirectoryAndABadRecordAreErrors) {
  StatusOr<StallReport> none = stall_report(dir_);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no flight records"), std::string::npos);
  std::FILE* f = std::fopen(path(0).c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("{\"rank\":0}", f);
  std::fclose(f);
  StatusOr<StallReport> bad = stall_report(dir_);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not a Chorus flight record"), std::string::npos);
}

// chorus-trace autotune: a log as the autotuner writes it, drawn with bars scaled to the
// best sample, the winner's samples marked and its line last.
constexpr char kAutotuneLog[] =
    "sample,kind,fusion_bytes,host_algorithm,cycle_ms,mb_per_s,spread_mb_per_s,ranks,round,"
    "gain_over_defaults\n"
    "1,warmup,524288,auto,5,40.000,0.100,3,100,\n"
    "2,sample,524288,auto,5,50.000,0.200,3,120,\n"
    "3,sample,2097152,auto,5,100.000,1.500,3,140,+100.0%\n"
    "3,winner,2097152,auto,5,100.000,1.500,,140,+100.0%\n";

TEST(TraceAutotune, DrawsEachSampleAndNamesTheWinner) {
  StatusOr<std::string> chart = autotune_chart(kAutotuneLog);
  ASSERT_TRUE(chart.ok()) << chart.status().to_string();
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t end; (end = chart->find('\n', start)) != std::string::npos; start = end + 1) {
    lines.push_back(chart->substr(start, end - start));
  }
  ASSERT_EQ(lines.size(), 4u) << *chart;
  auto bar = [](const std::string& line) { return line.size() - line.find('|') - 1; };
  EXPECT_EQ(bar(lines[0]), 16u) << lines[0];  // 40 of 100 MB/s: 16 of 40 columns
  EXPECT_EQ(bar(lines[1]), 20u) << lines[1];
  EXPECT_EQ(bar(lines[2]), 40u) << lines[2];
  EXPECT_NE(lines[2].find("* |"), std::string::npos) << "the winner's sample is marked";
  EXPECT_EQ(lines[1].find("* |"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("+100.0%"), std::string::npos) << lines[2];
  EXPECT_EQ(lines[3],
            "winner (*): 2097152 B, auto, 5 ms, 100.000 MB/s (spread 1.500), +100.0% over the "
            "defaults, after 3 samples");
}

TEST(TraceAutotune, SaysWhenTheSearchHadNotEnded) {
  std::string unfinished = kAutotuneLog;
  unfinished.erase(unfinished.find("3,winner"));
  StatusOr<std::string> chart = autotune_chart(unfinished);
  ASSERT_TRUE(chart.ok()) << chart.status().to_string();
  EXPECT_NE(chart->find("no winner yet"), std::string::npos) << *chart;
}

TEST(TraceAutotune, RefusesWhatIsNotItsLogNamingTheLine) {
  EXPECT_FALSE(autotune_chart("a,b\n1,2\n").ok());
  StatusOr<std::string> chart = autotune_chart(std::string(kAutotuneLog) + "4,sample,1\n");
  ASSERT_FALSE(chart.ok());
  EXPECT_NE(chart.status().message().find("line 6"), std::string::npos) << chart.status().message();
  StatusOr<std::string> missing = autotune_chart_of("/nonexistent/autotune.csv");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/autotune.csv"), std::string::npos);
}

}  // namespace
}  // namespace chorus::trace
