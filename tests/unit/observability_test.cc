// The observability service (core/observability.h): timeline requests in order, each
// switch telling the listener before the old file closes, a failed start leaving none; a
// rank other than 0 writing CHORUS_TIMELINE only with "{rank}" in it; flight records with
// the collectives outstanding, oldest first, and the stall lines last said.
#include "core/observability.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace chorus {
namespace {

using Clock = Observability::Clock;

std::string temp_dir() {
  char dir[] = "/tmp/chorus-observability-test.XXXXXX";
  const char* made = mkdtemp(dir);
  EXPECT_NE(nullptr, made);
  return made ? made : "/tmp";
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// The listener's calls: the timeline it was handed each time (null: none).
struct Seen {
  std::vector<Timeline*> timelines;
};

Observability make(const std::string& dir, Seen* seen,
                   Observability::Outstanding outstanding = nullptr) {
  return Observability(
      {dir, 64, [seen](Timeline* t) { seen->timelines.push_back(t); }, std::move(outstanding)});
}

Status request(Observability& o, const std::string& path) {
  std::vector<Submissions::TimelineRequest> requests(1);
  requests[0].path = path;
  std::future<Status> done = requests[0].done.get_future();
  o.apply(std::move(requests));
  return done.get();
}

TEST(Observability, TimelineRequestsSwitchFilesAndTellTheListener) {
  const std::string dir = temp_dir();
  Seen seen;
  Observability o = make(dir, &seen);
  o.start(0, ClockOffset{});
  ASSERT_TRUE(request(o, dir + "/a.json").ok());
  ASSERT_NE(nullptr, o.timeline());
  ASSERT_FALSE(seen.timelines.empty());
  EXPECT_EQ(o.timeline(), seen.timelines.back());
  ASSERT_TRUE(request(o, dir + "/b.json").ok());
  // The switch closed a.json (the listener heard null first), then opened b.json.
  ASSERT_GE(seen.timelines.size(), 3u);
  EXPECT_EQ(o.timeline(), seen.timelines.back());
  EXPECT_EQ(nullptr, seen.timelines[seen.timelines.size() - 2]);
  EXPECT_NE(std::string::npos, read(dir + "/a.json").find("]"));
  // A stop, then a start that cannot open its file: no timeline, and the error names it.
  ASSERT_TRUE(request(o, "").ok());
  EXPECT_EQ(nullptr, o.timeline());
  const Status bad = request(o, "/nonexistent-chorus-dir/c.json");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(std::string::npos, bad.message().find("/nonexistent-chorus-dir/c.json"));
  EXPECT_EQ(nullptr, o.timeline());
  o.stop();
  EXPECT_NE(std::string::npos, read(dir + "/b.json").find("]"));
  std::filesystem::remove_all(dir);
}

TEST(Observability, InitialTimelineOnRankZeroOrWithRankInThePath) {
  const std::string dir = temp_dir();
  Seen seen;
  Observability other = make(dir, &seen);
  other.start(3, ClockOffset{});
  ASSERT_TRUE(other.open_initial_timeline(dir + "/only0.json", false).ok());
  EXPECT_EQ(nullptr, other.timeline());
  ASSERT_TRUE(other.open_initial_timeline(dir + "/every.{rank}.json", true).ok());
  ASSERT_NE(nullptr, other.timeline());
  other.stop();
  EXPECT_FALSE(exists(dir + "/only0.json"));
  EXPECT_TRUE(exists(dir + "/every.3.json"));
  std::filesystem::remove_all(dir);
}

TEST(Observability, FlightRecordListsOutstandingOldestFirstWithStallLines) {
  const std::string dir = temp_dir();
  Entry older, newer;
  older.request.name = "grad.older";
  older.request.shape = {4};
  older.enqueued = Clock::now() - std::chrono::seconds(5);
  newer.request.name = "grad.newer";
  newer.request.shape = {4};
  newer.enqueued = Clock::now();
  Seen seen;
  Observability o = make(dir, &seen, [&](SetMembers* sets, std::vector<Observability::Pending>* p) {
    (*sets)[0] = {0, 1};
    p->push_back({0, &newer});
    p->push_back({0, &older});
  });
  o.write_flight_record("before start");  // nothing to write with yet
  EXPECT_FALSE(exists(dir + "/chorus-flight.rank1.json"));
  o.start(1, ClockOffset{});
  Entry done;
  done.request.name = "grad.done";
  done.enqueued = Clock::now();
  o.finished(0, done, Clock::now(), Status());
  o.stalled({"rank 1 waits for grad.older"});
  o.write_flight_record("a test");
  const std::string text = read(dir + "/chorus-flight.rank1.json");
  EXPECT_NE(std::string::npos, text.find("a test"));
  EXPECT_NE(std::string::npos, text.find("grad.done"));
  EXPECT_NE(std::string::npos, text.find("rank 1 waits for grad.older"));
  // Within the outstanding list (the stall line names grad.older too): oldest first.
  const std::size_t list = text.find("\"outstanding\"");
  ASSERT_NE(std::string::npos, list);
  EXPECT_LT(text.find("grad.older", list), text.find("grad.newer", list));
  o.stop();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace chorus
