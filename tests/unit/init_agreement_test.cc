// Unit tests of init()'s agreement (core/init_agreement.h): every rank reaches the same
// verdict from every rank's report, naming the ranks and values at fault.
#include "core/init_agreement.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace chorus {
namespace {

Settings settings(const std::string& threshold, const std::string& cache = "1024") {
  return {{"CHORUS_FUSION_THRESHOLD", threshold}, {"CHORUS_CACHE_CAPACITY", cache}};
}

std::vector<std::string> reports(const std::vector<Status>& outcomes,
                                 const std::vector<Settings>& values) {
  std::vector<std::string> out;
  for (std::size_t r = 0; r < outcomes.size(); ++r) {
    out.push_back(encode_init_report(outcomes[r], values.empty() ? Settings{} : values[r]));
  }
  return out;
}

void expect_has(const Status& s, const std::vector<std::string>& parts) {
  for (const std::string& p : parts) {
    EXPECT_NE(s.message().find(p), std::string::npos) << "'" << p << "' not in: " << s.message();
  }
}

TEST(InitAgreementTest, SameSettingsAndSuccessEverywhereIsOk) {
  auto all = reports({Status(), Status(), Status()}, {settings("0"), settings("0"), settings("0")});
  EXPECT_TRUE(decide_init("step", Status(), all).ok());
}

TEST(InitAgreementTest, DifferentSettingNamesVariableRanksAndValues) {
  auto all = reports({Status(), Status(), Status()},
                     {settings("0"), settings("524288"), settings("0", "0")});
  Status s = decide_init("step", Status(), all);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  expect_has(s, {"CHORUS_FUSION_THRESHOLD differs across ranks", "'0' on ranks [0, 2]",
                 "'524288' on ranks [1]", "CHORUS_CACHE_CAPACITY differs across ranks",
                 "'1024' on ranks [0, 1]", "'0' on ranks [2]", "same on every rank"});
}

TEST(InitAgreementTest, AFailedStepFailsEveryRankNamingTheRankAndItsMessage) {
  const Status bad(StatusCode::kInvalidArgument, "cannot open timeline '/no/such/dir/t.json'");
  auto all = reports({bad, Status(), Status()}, {});
  // The failing rank keeps its own message; the others name it.
  Status mine = decide_init("opening the timeline", bad, all);
  EXPECT_EQ(mine.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(mine.message(), bad.message());
  Status other = decide_init("opening the timeline", Status(), all);
  EXPECT_EQ(other.code(), StatusCode::kInvalidArgument);
  expect_has(other,
             {"opening the timeline failed on ranks [0]", "rank 0 says", "/no/such/dir/t.json"});
}

TEST(InitAgreementTest, MessagesWithNewlinesAndEqualsSurvive) {
  const Status bad(StatusCode::kInternal, "line one\nCHORUS_X=1\nline three");
  auto all = reports({Status(), bad}, {settings("1"), settings("1")});
  Status s = decide_init("step", Status(), all);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  expect_has(s, {"failed on ranks [1]", "line one\nCHORUS_X=1\nline three"});
}

TEST(InitAgreementTest, AnUndecodableReportIsAFailureOfItsRank) {
  std::vector<std::string> all = reports({Status(), Status()}, {});
  all[1] = "garbage";
  Status s = decide_init("step", Status(), all);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  expect_has(s, {"failed on ranks [1]"});
}

}  // namespace
}  // namespace chorus
