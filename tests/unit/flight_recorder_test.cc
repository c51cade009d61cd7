// The flight recorder (core/flight_recorder.h): the ring keeps the last N collectives in
// order, times become wall-clock microseconds, and the file it writes is the JSON text
// flight_json() makes, replaced whole on every write.
#include "core/flight_recorder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace chorus {
namespace {

using Clock = FlightRecorder::Clock;

Request request(const std::string& name, std::vector<int64_t> shape) {
  Request q;
  q.name = name;
  q.op = OpType::kAllreduce;
  q.dtype = DataType::kFloat32;
  q.shape = std::move(shape);
  return q;
}

TEST(FlightRecorder, KeepsTheLastCollectivesInOrder) {
  FlightRecorder f(3, 4);
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < 10; ++i) {
    f.record(0, request("grad." + std::to_string(i), {i, 2}), t0, t0, t0,
             i == 9 ? StatusCode::kStalled : StatusCode::kOk);
  }
  const std::vector<FlightRecord> kept = f.records();
  ASSERT_EQ(4u, kept.size());
  for (int k = 0; k < 4; ++k) EXPECT_EQ("grad." + std::to_string(6 + k), kept[k].name);
  EXPECT_EQ(9 * 2 * 4, kept[3].bytes);
  EXPECT_EQ(StatusCode::kStalled, kept[3].status);
}

TEST(FlightRecorder, TimesAreWallClockMicroseconds) {
  FlightRecorder f(0, 8);
  const Clock::time_point submitted = Clock::now();
  const Clock::time_point done = submitted + std::chrono::milliseconds(250);
  f.record(1, request("w", {3}), submitted, {}, done, StatusCode::kOk);
  const FlightRecord r = f.records().at(0);
  const int64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  EXPECT_NEAR(static_cast<double>(now_us), static_cast<double>(r.submitted_us), 5e6);
  EXPECT_EQ(250000, r.done_us - r.submitted_us);
  EXPECT_EQ(0, r.agreed_us) << "never agreed: 0";
  EXPECT_EQ(1, r.set_id);
}

TEST(FlightRecorder, JsonHoldsEveryPartAndEscapesNames) {
  FlightRecord r;
  r.name = "odd \"name\"\n";
  r.bytes = 12;
  r.submitted_us = 5;
  const std::string text = flight_json(2, "SIGUSR1", 99, {{0, {0, 1, 2}}, {3, {2, 0}}}, {r}, {r},
                                       {"ranks stopped taking part"});
  EXPECT_EQ(0u, text.find("{\"rank\":2,\"reason\":\"SIGUSR1\",\"time_us\":99")) << text;
  EXPECT_NE(std::string::npos, text.find("\"name\":\"odd \\\"name\\\"\\u000a\"")) << text;
  EXPECT_NE(std::string::npos,
            text.find("\"sets\":[\n  {\"id\":0,\"ranks\":[0,1,2]},\n  {\"id\":3,\"ranks\":[2,0]}]"))
      << text;
  EXPECT_NE(std::string::npos, text.find("\"records\":[")) << text;
  EXPECT_NE(std::string::npos, text.find("\"outstanding\":[")) << text;
  EXPECT_NE(std::string::npos, text.find("\"stall_lines\":[\n  \"ranks stopped taking part\"]"))
      << text;
  EXPECT_NE(std::string::npos, text.find("\"op\":\"allreduce\",\"dtype\":\"float32\",\"bytes\":12"))
      << text;
}

TEST(FlightRecorder, WritesTheFileWholeAndNamesAPathItCannotWrite) {
  char dir[] = "/tmp/chorus-flight-test.XXXXXX";
  ASSERT_NE(nullptr, mkdtemp(dir));
  FlightRecorder f(5, 2);
  f.record(0, request("a", {1}), Clock::now(), Clock::now(), Clock::now(), StatusCode::kOk);
  ASSERT_TRUE(f.write(dir, "first", {}, {}, {}).ok());
  ASSERT_TRUE(f.write(dir, "second", {}, {}, {}).ok());
  const std::string path = std::string(dir) + "/chorus-flight.rank5.json";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(0u, text.str().find("{\"rank\":5,\"reason\":\"second\"")) << text.str();
  EXPECT_EQ('\n', text.str().back());
  EXPECT_NE(0, access((path + ".tmp").c_str(), F_OK)) << "the temporary file stayed";
  std::remove(path.c_str());
  rmdir(dir);
  const Status bad = f.write("/nonexistent-chorus-dir", "x", {}, {}, {});
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(std::string::npos, bad.message().find("/nonexistent-chorus-dir/chorus-flight.rank5"))
      << bad.message();
}

}  // namespace
}  // namespace chorus
