// Timeline: the file is a complete JSON array after open, after every flush and after stop;
// every tensor gets exactly one named row; names and details survive any bytes.
#include "timeline/timeline.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/json_value.h"

namespace chorus {
namespace {

using namespace std::chrono_literals;

using Json = JsonValue;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The trace at `path` as a list of events; fails the test if it is not a JSON array.
std::vector<Json> load_trace(const std::string& path) {
  StatusOr<Json> doc = parse_json(read_file(path), path);
  EXPECT_TRUE(doc.ok()) << doc.status().to_string();
  if (!doc.ok()) return {};
  EXPECT_TRUE(doc->is_array());
  return doc->is_array() ? doc->items() : std::vector<Json>{};
}

std::string str(const Json& event, const std::string& key) {
  const Json* v = event.find(key);
  return v != nullptr && v->is_string() ? v->as_string() : std::string();
}
double num(const Json& event, const std::string& key) {
  const Json* v = event.find(key);
  return v != nullptr && v->is_number() ? v->as_number() : -1;
}
std::string arg(const Json& event, const std::string& key) {
  const Json* args = event.find("args");
  return args != nullptr ? str(*args, key) : std::string();
}

// What a trace holds, checked for the invariants every trace must keep.
struct Summary {
  std::vector<Json> complete;          // ph "X"
  std::map<std::string, int> row_of;   // thread_name -> tid
  std::map<int, std::string> name_of;  // tid -> thread_name
  int process_names = 0;
};

Summary summarize(const std::vector<Json>& events, int rank) {
  Summary s;
  for (const Json& e : events) {
    EXPECT_TRUE(e.is_object());
    EXPECT_EQ(num(e, "pid"), rank);
    const std::string ph = str(e, "ph");
    const std::string name = str(e, "name");
    if (ph == "M" && name == "process_name") {
      ++s.process_names;
      EXPECT_EQ(arg(e, "name"), "rank " + std::to_string(rank));
    } else if (ph == "M" && name == "thread_name") {
      const int tid = static_cast<int>(num(e, "tid"));
      const std::string tensor = arg(e, "name");
      EXPECT_TRUE(s.row_of.emplace(tensor, tid).second) << "two rows for " << tensor;
      EXPECT_TRUE(s.name_of.emplace(tid, tensor).second) << "two names for tid " << tid;
    } else if (ph == "X") {
      s.complete.push_back(e);
    }
  }
  EXPECT_EQ(s.process_names, 1);
  for (const Json& e : s.complete) {
    EXPECT_EQ(s.name_of.count(static_cast<int>(num(e, "tid"))), 1u) << "event on an unnamed row";
  }
  return s;
}

class TimelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = ::testing::TempDir() + "chorus_timeline_" + info->name() + "_" +
            std::to_string(::getpid()) + ".json";
  }
  void TearDown() override { std::remove(path_.c_str()); }

  std::unique_ptr<Timeline> open_timeline(int rank) {
    Timeline::Options options;
    options.rank = rank;
    auto timeline = Timeline::open(path_, options);
    EXPECT_TRUE(timeline.ok()) << timeline.status().to_string();
    return timeline.ok() ? std::move(timeline).value() : nullptr;
  }

  std::string path_;
};

TEST(TimelinePhaseTest, Names) {
  EXPECT_STREQ(timeline_phase_name(TimelinePhase::kNegotiate), "NEGOTIATE");
  EXPECT_STREQ(timeline_phase_name(TimelinePhase::kQueue), "QUEUE");
  EXPECT_STREQ(timeline_phase_name(TimelinePhase::kMemcpyIn), "MEMCPY_IN");
  EXPECT_STREQ(timeline_phase_name(TimelinePhase::kCollective), "COLLECTIVE");
  EXPECT_STREQ(timeline_phase_name(TimelinePhase::kMemcpyOut), "MEMCPY_OUT");
  EXPECT_STREQ(timeline_phase_name(TimelinePhase::kStep), "STEP");
  EXPECT_STREQ(timeline_phase_name(TimelinePhase::kWait), "WAIT");
}

TEST_F(TimelineTest, EmptyTraceIsValidJson) {
  auto timeline = open_timeline(2);
  ASSERT_NE(timeline, nullptr);
  EXPECT_EQ(load_trace(path_).size(), 2u);  // valid straight after open
  timeline->flush();
  EXPECT_EQ(load_trace(path_).size(), 2u);
  timeline->stop();
  const std::vector<Json> events = load_trace(path_);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(str(events[0], "name"), "process_name");
  EXPECT_EQ(arg(events[0], "name"), "rank 2");
  EXPECT_EQ(str(events[1], "name"), "thread_name");
  EXPECT_EQ(num(events[1], "tid"), 0);
}

TEST_F(TimelineTest, ConcurrentProducersEachTensorOneRow) {
  constexpr int kRank = 3, kThreads = 8, kPerThread = 2000, kTensorsPerThread = 10;
  auto timeline = open_timeline(kRank);
  ASSERT_NE(timeline, nullptr);
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const auto start = Timeline::Clock::now();
        const std::string tensor =
            "grad/" + std::to_string(t) + "/" + std::to_string(i % kTensorsPerThread);
        timeline->record(tensor, static_cast<TimelinePhase>(i % 5), start, start + 10us,
                         i % 2 ? "" : "batch " + std::to_string(i));
        if (i % 500 == 0) timeline->flush();  // flushes race with other producers
      }
    });
  }
  for (auto& p : producers) p.join();

  timeline->flush();  // no stop: the file must already be complete
  Summary s = summarize(load_trace(path_), kRank);
  EXPECT_EQ(s.complete.size(), static_cast<std::size_t>(kThreads * kPerThread));
  // The tensors' rows and the trainer's.
  EXPECT_EQ(s.row_of.size(), static_cast<std::size_t>(kThreads * kTensorsPerThread + 1));
  for (int t = 0; t < kThreads; ++t) {
    for (int k = 0; k < kTensorsPerThread; ++k) {
      EXPECT_EQ(s.row_of.count("grad/" + std::to_string(t) + "/" + std::to_string(k)), 1u);
    }
  }

  timeline->stop();
  s = summarize(load_trace(path_), kRank);
  EXPECT_EQ(s.complete.size(), static_cast<std::size_t>(kThreads * kPerThread));
}

TEST_F(TimelineTest, CompleteEventFields) {
  auto timeline = open_timeline(0);
  ASSERT_NE(timeline, nullptr);
  const auto start = Timeline::Clock::now();
  timeline->record("w", TimelinePhase::kCollective, start, start + 1500us, "allreduce 4 MB");
  timeline->record("w", TimelinePhase::kMemcpyOut, start + 1500us, start + 1600us);
  timeline->record("w", TimelinePhase::kQueue, start, start - 5us);  // clock skew: dur 0
  timeline->flush();
  Summary s = summarize(load_trace(path_), 0);
  ASSERT_EQ(s.complete.size(), 3u);
  const Json& collective = s.complete[0];
  EXPECT_EQ(str(collective, "name"), "COLLECTIVE");
  EXPECT_EQ(num(collective, "tid"), s.row_of.at("w"));
  EXPECT_GE(num(collective, "ts"), 0);
  EXPECT_EQ(num(collective, "dur"), 1500);
  EXPECT_EQ(arg(collective, "detail"), "allreduce 4 MB");
  const Json& memcpy_out = s.complete[1];
  EXPECT_EQ(str(memcpy_out, "name"), "MEMCPY_OUT");
  EXPECT_EQ(num(memcpy_out, "ts") - num(collective, "ts"), 1500);
  EXPECT_EQ(memcpy_out.find("args"), nullptr);  // no detail, no args
  EXPECT_EQ(num(s.complete[2], "dur"), 0);
}

TEST_F(TimelineTest, ValidAfterEveryFlush) {
  auto timeline = open_timeline(1);
  ASSERT_NE(timeline, nullptr);
  const auto now = Timeline::Clock::now();
  for (int round = 1; round <= 5; ++round) {
    timeline->record("t" + std::to_string(round % 2), TimelinePhase::kNegotiate, now, now + 1us);
    timeline->flush();
    EXPECT_EQ(summarize(load_trace(path_), 1).complete.size(), static_cast<std::size_t>(round));
  }
}

TEST_F(TimelineTest, WriterDrainsWithoutFlush) {
  auto timeline = open_timeline(0);
  ASSERT_NE(timeline, nullptr);
  const auto now = Timeline::Clock::now();
  timeline->record("lonely", TimelinePhase::kQueue, now, now + 1us);
  // The writer wakes every 100 ms on its own; allow a slow machine plenty of time.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  std::size_t seen = 0;
  while (seen == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
    seen = summarize(load_trace(path_), 0).complete.size();
  }
  EXPECT_EQ(seen, 1u);
}

TEST_F(TimelineTest, EscapesNamesAndDetails) {
  const std::string name = "layer\"1\"\\weight\nbias\t\x01\x1f end/\xC3\xA9";  // é stays as is
  const std::string detail = "shape [\"4\", 4]\r\n\\";
  auto timeline = open_timeline(0);
  ASSERT_NE(timeline, nullptr);
  const auto now = Timeline::Clock::now();
  timeline->record(name, TimelinePhase::kMemcpyIn, now, now + 3us, detail);
  timeline->record("bad\xFF\xC3utf8\xED\xA0\x80", TimelinePhase::kMemcpyIn, now, now + 3us);
  timeline->stop();
  Summary s = summarize(load_trace(path_), 0);
  ASSERT_EQ(s.complete.size(), 2u);
  EXPECT_EQ(s.row_of.count(name), 1u);
  EXPECT_EQ(arg(s.complete[0], "detail"), detail);
  // Bytes that are not UTF-8 (a stray byte, a cut sequence, a surrogate) become U+FFFD.
  EXPECT_EQ(s.row_of.count("bad\xEF\xBF\xBD\xEF\xBF\xBDutf8\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"),
            1u);
}

TEST_F(TimelineTest, TruncatesAnOldFile) {
  {
    std::ofstream old(path_);
    old << std::string(10000, 'x');
  }
  auto timeline = open_timeline(0);
  ASSERT_NE(timeline, nullptr);
  timeline->stop();
  EXPECT_EQ(load_trace(path_).size(), 2u);  // the process's name, the trainer row's
}

TEST_F(TimelineTest, StopIsIdempotentAndLaterCallsAreHarmless) {
  auto timeline = open_timeline(0);
  ASSERT_NE(timeline, nullptr);
  const auto now = Timeline::Clock::now();
  timeline->record("a", TimelinePhase::kQueue, now, now + 1us);
  std::thread other([&] { timeline->stop(); });
  timeline->stop();
  other.join();
  timeline->stop();
  timeline->flush();                                             // returns at once
  timeline->record("b", TimelinePhase::kQueue, now, now + 1us);  // ignored
  Summary s = summarize(load_trace(path_), 0);
  EXPECT_EQ(s.complete.size(), 1u);
  EXPECT_EQ(s.row_of.count("b"), 0u);
}

TEST_F(TimelineTest, DestructorWritesEverything) {
  {
    auto timeline = open_timeline(0);
    ASSERT_NE(timeline, nullptr);
    const auto now = Timeline::Clock::now();
    for (int i = 0; i < 100; ++i) {
      timeline->record("t", TimelinePhase::kCollective, now, now + 1us);
    }
  }
  EXPECT_EQ(summarize(load_trace(path_), 0).complete.size(), 100u);
}

// A long run under a small cap, flushed in small batches as a real job's writer writes them
// (and in one large one): after every flush the file is under the cap and valid, each row is
// named once, the newest events are there, in order and none missing, with older ones kept
// beside the last batch, and a marker says that older ones were dropped.
void run_under_cap(const std::string& path, int flush_every) {
  Timeline::Options options;
  options.max_bytes = 256 << 10;
  auto opened = Timeline::open(path, options);
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  std::unique_ptr<Timeline> timeline = std::move(opened).value();
  const auto start = Timeline::Clock::now();
  constexpr int kEvents = 20000;
  for (int i = 0; i < kEvents; ++i) {
    const auto at = start + std::chrono::microseconds(i);
    timeline->record("grad." + std::to_string(i % 50), TimelinePhase::kCollective, at, at + 1us,
                     "event " + std::to_string(i));
    if (i % flush_every == flush_every - 1) {
      timeline->flush();
      struct stat st {};
      ASSERT_EQ(::stat(path.c_str(), &st), 0);
      ASSERT_LE(st.st_size, options.max_bytes) << "after " << i + 1 << " events";
      if (i % 2000 == 1999) summarize(load_trace(path), 0);  // valid, rows named once
    }
  }
  timeline->stop();
  const std::vector<Json> events = load_trace(path);
  Summary s = summarize(events, 0);
  ASSERT_FALSE(s.complete.empty());
  EXPECT_LT(s.complete.size(), static_cast<std::size_t>(kEvents));
  EXPECT_GT(s.complete.size(), 800u) << "older events were not kept beside the last batch";
  EXPECT_EQ(arg(s.complete.back(), "detail"), "event " + std::to_string(kEvents - 1));
  for (std::size_t i = 1; i < s.complete.size(); ++i) {
    ASSERT_EQ(num(s.complete[i], "ts"), num(s.complete[i - 1], "ts") + 1) << "at " << i;
  }
  EXPECT_EQ(s.row_of.size(), 51u);  // 50 tensors and the trainer row
  int markers = 0;
  for (const Json& e : events) markers += str(e, "name") == "older events dropped";
  EXPECT_EQ(markers, 1);
}

TEST_F(TimelineTest, StaysUnderItsCapInSmallBatches) { run_under_cap(path_, 50); }
TEST_F(TimelineTest, StaysUnderItsCapInLargeBatches) { run_under_cap(path_, 5000); }

TEST_F(TimelineTest, TimesCountFromTheOriginAndTheTrainerRowIsZero) {
  Timeline::Options options;
  options.rank = 3;
  options.origin = Timeline::Clock::now() - 5s;
  options.clock_label = "clock +1.0 us from rank 0's (within 0.5 us)";
  auto opened = Timeline::open(path_, options);
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  const auto now = Timeline::Clock::now();
  (*opened)->record_trainer(TimelinePhase::kWait, now, now + 7us);
  (*opened)->record_trainer(TimelinePhase::kStep, now - 1ms, now + 10us, "step 1");
  (*opened)->stop();
  const std::vector<Json> events = load_trace(path_);
  Summary s = summarize(events, 3);
  ASSERT_EQ(s.complete.size(), 2u);
  EXPECT_EQ(str(s.complete[0], "name"), "WAIT");
  EXPECT_EQ(num(s.complete[0], "tid"), 0);
  EXPECT_EQ(num(s.complete[0], "dur"), 7);
  EXPECT_GE(num(s.complete[0], "ts"), 5e6);
  EXPECT_LT(num(s.complete[0], "ts"), 5e6 + 60e6);
  EXPECT_EQ(str(s.complete[1], "name"), "STEP");
  EXPECT_EQ(arg(s.complete[1], "detail"), "step 1");
  EXPECT_EQ(s.name_of[0], "trainer: steps and waits");
  bool labelled = false;
  for (const Json& e : events) {
    labelled =
        labelled || (str(e, "name") == "process_labels" && arg(e, "labels") == options.clock_label);
  }
  EXPECT_TRUE(labelled);
}

TEST(TimelinePathTest, RankPlaceholder) {
  EXPECT_FALSE(timeline_on_every_rank("/tmp/trace.json"));
  EXPECT_TRUE(timeline_on_every_rank("/tmp/trace.{rank}.json"));
  EXPECT_EQ(timeline_path_for("/tmp/trace.json", 4), "/tmp/trace.json");
  EXPECT_EQ(timeline_path_for("/t/{rank}/trace.{rank}.json", 12), "/t/12/trace.12.json");
  EXPECT_EQ(timeline_path_for("{rank}", 0), "0");
  EXPECT_EQ(timeline_path_for("{ran}{rank", 1), "{ran}{rank");
}

TEST(TimelineOpenTest, MissingDirectoryNamesThePath) {
  const std::string path = "/nonexistent-chorus-dir/sub/trace.json";
  auto timeline = Timeline::open(path, Timeline::Options{});
  ASSERT_FALSE(timeline.ok());
  EXPECT_EQ(timeline.status().code(), StatusCode::kInvalidArgument);
  const std::string& message = timeline.status().message();
  EXPECT_NE(message.find("CHORUS_TIMELINE=" + path), std::string::npos) << message;
  EXPECT_NE(message.find("cannot open"), std::string::npos) << message;
  EXPECT_NE(message.find("No such file or directory"), std::string::npos) << message;
}

}  // namespace
}  // namespace chorus
