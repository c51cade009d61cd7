// The rounds of an elastic job that resets in place (launch/elastic_rounds.h), driven through
// scripted events: the first round waits for every worker, a death breaks the round and its
// host leaves, workers that do not come back within the bound are ended, the answers' ranks
// follow the hosts' order, added workers wait for the others' next commit, and the limits
// (--min-np, --max-restarts, program errors) end the job.
#include "elastic_rounds.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "transport/elastic_round.h"

namespace chorus::launch {
namespace {

using Clock = ElasticRounds::Clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

const Clock::time_point kT0{};
constexpr milliseconds kBound = seconds(15);

// The answers of a decision, by worker id (from the keys assign/ID/N).
std::map<std::string, std::string> answers(const ElasticRounds::Decision& d) {
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : d.answers) {
    if (key.rfind("assign/", 0) != 0) continue;
    const std::string id = key.substr(7, key.rfind('/') - 7);
    EXPECT_EQ(out.count(id), 0u) << "two answers for " << id;
    out[id] = value;
  }
  return out;
}

ElasticRound round_of(const std::string& answer) {
  std::optional<ElasticRound> r = parse_elastic_round(answer);
  EXPECT_TRUE(r.has_value()) << answer;
  return r.value_or(ElasticRound{});
}

// Three workers on a, b, c (one each), all asked and answered: round 1.
ElasticRounds three_hosts(const ElasticRequest& request) {
  ElasticRounds rounds(request, kBound);
  rounds.started("w1", "a");
  rounds.started("w2", "b");
  rounds.started("w3", "c");
  return rounds;
}

void ask_all(ElasticRounds& rounds, Clock::time_point now) {
  for (const auto& [id, key] : rounds.awaited_asks()) rounds.joined(id, now);
}

TEST(ElasticRounds, TheFirstRoundWaitsForEveryWorkerThenRanksThemByHost) {
  ElasticRounds rounds(ElasticRequest{}, kBound);
  rounds.started("w1", "b");
  rounds.started("w2", "a");
  rounds.started("w3", "b");
  rounds.joined("w1", kT0);
  rounds.joined("w3", kT0);
  EXPECT_TRUE(rounds.step(kT0 + seconds(60), 0).answers.empty()) << "w2 has not asked";
  rounds.joined("w2", kT0 + seconds(61));
  const ElasticRounds::Decision d = rounds.step(kT0 + seconds(61), 4);
  std::map<std::string, std::string> a = answers(d);
  ASSERT_EQ(a.size(), 3u);
  // Hosts in the order they joined the job (b first), workers in their start order.
  EXPECT_EQ(round_of(a["w1"]).rank, 0);
  EXPECT_EQ(round_of(a["w3"]).rank, 1);
  EXPECT_EQ(round_of(a["w2"]).rank, 2);
  for (const auto& [id, answer] : a) {
    EXPECT_EQ(round_of(answer).round, 1);
    EXPECT_EQ(round_of(answer).size, 3);
    EXPECT_EQ(round_of(answer).hosts_version, 4);
  }
  ASSERT_EQ(d.lines.size(), 1u);
  EXPECT_EQ(d.lines[0], "chorusrun: round 1: 3 ranks on b:2,a:1");
  // The next asks are each worker's second.
  for (const auto& [id, key] : rounds.awaited_asks()) EXPECT_EQ(key, "join/" + id + "/2");
}

TEST(ElasticRounds, ADeathBreaksTheRoundAndItsHostLeaves) {
  ElasticRequest request;
  request.max_restarts = 2;
  ElasticRounds rounds = three_hosts(request);
  ask_all(rounds, kT0);
  ASSERT_EQ(answers(rounds.step(kT0, 0)).size(), 3u);
  rounds.ended("w3", 128 + 9, kT0 + seconds(1));
  rounds.joined("w1", kT0 + seconds(2));
  // The round's waits learn of the death at once; w2 has not asked yet.
  const ElasticRounds::Decision broke = rounds.step(kT0 + seconds(2), 0);
  ASSERT_EQ(broke.answers.size(), 1u);
  EXPECT_EQ(broke.answers[0].first, "round/1/lost");
  EXPECT_EQ(broke.answers[0].second, "rank 2 (worker w3 on c, ended on signal 9 (Killed))");
  rounds.joined("w2", kT0 + seconds(3));
  const ElasticRounds::Decision d = rounds.step(kT0 + seconds(3), 0);
  std::map<std::string, std::string> a = answers(d);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(round_of(a["w1"]).round, 2);
  EXPECT_EQ(round_of(a["w1"]).rank, 0);
  EXPECT_EQ(round_of(a["w2"]).rank, 1);
  EXPECT_EQ(round_of(a["w2"]).size, 2);
  ASSERT_EQ(d.lines.size(), 1u);
  EXPECT_EQ(d.lines[0],
            "chorusrun: round 2: 2 ranks on a:1,b:1 after worker w3 on c ended on signal 9 "
            "(Killed) (restart 1 of 2) (excluded: c)");
  EXPECT_EQ(rounds.excluded(), std::set<std::string>{"c"});
  EXPECT_FALSE(d.end);
}

TEST(ElasticRounds, WorkersThatDoNotComeBackWithinTheBoundAreEnded) {
  ElasticRequest request;
  request.max_restarts = 1;
  ElasticRounds rounds = three_hosts(request);
  ask_all(rounds, kT0);
  rounds.step(kT0, 0);
  // w3 stopped: w1 and w2 saw the round fail and asked again; w3 never does.
  rounds.joined("w1", kT0 + seconds(5));
  rounds.joined("w2", kT0 + seconds(6));
  EXPECT_TRUE(rounds.step(kT0 + seconds(5) + kBound - milliseconds(1), 0).answers.empty())
      << "the bound counts from the first ask";
  const ElasticRounds::Decision d = rounds.step(kT0 + seconds(5) + kBound, 0);
  EXPECT_EQ(d.stop, std::vector<std::string>{"w3"});
  EXPECT_EQ(answers(d).size(), 2u);
  ASSERT_EQ(d.lines.size(), 1u);
  EXPECT_NE(d.lines[0].find("after worker w3 on c did not come back within 15 s (stopped, or cut "
                            "off) (restart 1 of 1) (excluded: c)"),
            std::string::npos)
      << d.lines[0];
  // Its end, once chorusrun ended it, is not a second failure.
  rounds.ended("w3", 128 + 9, kT0 + seconds(30));
  EXPECT_TRUE(rounds.step(kT0 + seconds(30), 0).lines.empty());
}

TEST(ElasticRounds, TheOtherWorkersOfALostHostAreToldToLeave) {
  ElasticRequest request;
  request.max_restarts = 1;
  ElasticRounds rounds(request, kBound);
  rounds.started("w1", "a");
  rounds.started("w2", "a");
  rounds.started("w3", "b");
  rounds.started("w4", "b");
  ask_all(rounds, kT0);
  rounds.step(kT0, 0);
  rounds.ended("w4", 137, kT0 + seconds(1));
  ask_all(rounds, kT0 + seconds(2));  // w1, w2 and w3 ask again
  std::map<std::string, std::string> a = answers(rounds.step(kT0 + seconds(2), 0));
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a["w3"].rfind(kLeaveAnswer, 0), 0u) << a["w3"];
  EXPECT_EQ(round_of(a["w1"]).size, 2);
  // It ends with the status of a worker dropped from the job: not a failure.
  rounds.ended("w3", 86, kT0 + seconds(3));
  EXPECT_TRUE(rounds.step(kT0 + seconds(3), 0).lines.empty());
}

TEST(ElasticRounds, AddedWorkersWaitForTheOthersNextCommit) {
  ElasticRounds rounds(ElasticRequest{}, kBound);
  rounds.started("w1", "a");
  rounds.started("w2", "b");
  ask_all(rounds, kT0);
  rounds.step(kT0, 0);
  rounds.started("w3", "c");
  rounds.joined("w3", kT0 + seconds(1));
  // Long past the bound: the running round is not broken, so the new worker waits.
  EXPECT_TRUE(rounds.step(kT0 + seconds(100), 1).answers.empty());
  rounds.joined("w1", kT0 + seconds(101));  // their commit found the hosts added
  rounds.joined("w2", kT0 + seconds(101));
  const ElasticRounds::Decision d = rounds.step(kT0 + seconds(101), 1);
  std::map<std::string, std::string> a = answers(d);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(round_of(a["w3"]).rank, 2);
  EXPECT_EQ(round_of(a["w3"]).hosts_version, 1);
  ASSERT_EQ(d.lines.size(), 1u);
  EXPECT_EQ(d.lines[0], "chorusrun: round 2: 3 ranks on a:1,b:1,c:1") << "not a restart";
}

TEST(ElasticRounds, AWorkerThatDiesWaitingToJoinLeavesTheRoundRunning) {
  ElasticRounds rounds(ElasticRequest{}, kBound);
  rounds.started("w1", "a");
  rounds.started("w2", "b");
  ask_all(rounds, kT0);
  rounds.step(kT0, 0);
  rounds.started("w3", "c");  // an added host's
  rounds.ended("w3", 1, kT0 + seconds(1));
  const ElasticRounds::Decision d = rounds.step(kT0 + seconds(100), 1);
  EXPECT_FALSE(d.end.has_value());
  EXPECT_TRUE(d.stop.empty()) << "the round's workers are training, not missing";
  EXPECT_TRUE(d.answers.empty()) << "no lost key: the round lost none of its ranks";
  ASSERT_EQ(d.lines.size(), 1u);
  EXPECT_EQ(d.lines[0],
            "chorusrun: worker w3 on c exited with status 1 before it joined; its host "
            "leaves the job");
}

TEST(ElasticRounds, ARoundThatBrokeWithNoDeathCountsAsARestart) {
  // A member saw a collective fail (a peer stopped, or an error that comes back each time):
  // --max-restarts bounds the resets as it bounds deaths.
  ElasticRounds rounds(ElasticRequest{}, kBound);  // --max-restarts 0
  rounds.started("w1", "a");
  rounds.started("w2", "b");
  ask_all(rounds, kT0);
  rounds.step(kT0, 0);
  ask_all(rounds, kT0 + seconds(1));
  const ElasticRounds::Decision d = rounds.step(kT0 + seconds(1), 0);
  ASSERT_TRUE(d.end.has_value());
  EXPECT_EQ(*d.end, 1);
  EXPECT_NE(d.lines.back().find("worker w1 on a saw the round fail; no restarts left"),
            std::string::npos)
      << d.lines.back();
}

TEST(ElasticRounds, TheLimitsEndTheJob) {
  {
    ElasticRequest request;  // --max-restarts 0
    ElasticRounds rounds = three_hosts(request);
    ask_all(rounds, kT0);
    rounds.step(kT0, 0);
    rounds.ended("w3", 137, kT0);
    ask_all(rounds, kT0);
    const ElasticRounds::Decision d = rounds.step(kT0, 0);
    ASSERT_TRUE(d.end.has_value());
    EXPECT_EQ(*d.end, 137);
    EXPECT_TRUE(answers(d).empty());
    EXPECT_EQ(std::set<std::string>(d.stop.begin(), d.stop.end()),
              (std::set<std::string>{"w1", "w2"}));
    EXPECT_NE(d.lines.back().find("no restarts left (--max-restarts 0)"), std::string::npos);
  }
  {
    ElasticRequest request;
    request.max_restarts = 5;
    request.min_np = 3;
    ElasticRounds rounds = three_hosts(request);
    ask_all(rounds, kT0);
    rounds.step(kT0, 0);
    rounds.ended("w2", 1, kT0);
    ask_all(rounds, kT0);
    const ElasticRounds::Decision d = rounds.step(kT0, 0);
    ASSERT_TRUE(d.end.has_value());
    EXPECT_EQ(*d.end, 1);
    EXPECT_NE(d.lines.back().find("2 workers are left after worker w2 on b exited with status 1, "
                                  "fewer than --min-np 3"),
              std::string::npos)
        << d.lines.back();
  }
  {
    ElasticRequest request;
    request.max_restarts = 5;
    ElasticRounds rounds = three_hosts(request);
    ask_all(rounds, kT0);
    rounds.step(kT0, 0);
    rounds.ended("w1", 82, kT0);  // an order deadlock: an error in the program
    const ElasticRounds::Decision d = rounds.step(kT0, 0);
    ASSERT_TRUE(d.end.has_value());
    EXPECT_EQ(*d.end, 82);
  }
}

TEST(ElasticRounds, TheJobEndsOnceTheRoundsWorkersFinished) {
  ElasticRounds rounds = three_hosts(ElasticRequest{});
  ask_all(rounds, kT0);
  rounds.step(kT0, 0);
  rounds.ended("w1", 0, kT0);
  rounds.ended("w2", 0, kT0);
  EXPECT_FALSE(rounds.step(kT0, 0).end) << "w3 is still training";
  rounds.ended("w3", 0, kT0);
  const ElasticRounds::Decision d = rounds.step(kT0, 0);
  ASSERT_TRUE(d.end.has_value());
  EXPECT_EQ(*d.end, 0);
  EXPECT_TRUE(d.lines.empty());
}

TEST(ElasticRound, TheAnswersTextGoesBothWays) {
  const ElasticRound r{3, 1, 4, 7};
  const std::optional<ElasticRound> back = parse_elastic_round(format_elastic_round(r));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->round, 3);
  EXPECT_EQ(back->rank, 1);
  EXPECT_EQ(back->size, 4);
  EXPECT_EQ(back->hosts_version, 7);
  for (const char* bad : {"", "1 2 2 0", "0 0 1 0", "1 0 1", "1 0 1 0 x", "leave because"}) {
    EXPECT_FALSE(parse_elastic_round(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace chorus::launch
