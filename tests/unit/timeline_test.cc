// Timeline: the file is a complete JSON array after open, after every flush and after stop;
// every tensor gets exactly one named row; names and details survive any bytes.
#include "timeline/timeline.h"

#include <gtest/gtest.h>
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

namespace chorus {
namespace {

using namespace std::chrono_literals;

// A strict JSON reader (RFC 8259), just enough to check the traces: any deviation (a
// trailing comma, a raw control character, a missing "]") makes parse() fail.
struct Json {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject } type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> array;
  std::vector<std::pair<std::string, Json>> object;

  const Json* get(const std::string& key) const {
    for (const auto& [k, v] : object) {
      if (k == key) return &v;
    }
    return nullptr;
  }
};

class JsonParser {
 public:
  explicit JsonParser(std::string text) : s_(std::move(text)) {}

  // The document, or nullopt with error() saying where it went wrong.
  std::optional<Json> parse() {
    Json v;
    skip_ws();
    if (!value(v)) return std::nullopt;
    skip_ws();
    if (i_ != s_.size()) return fail("trailing characters");
    return v;
  }
  const std::string& error() const { return error_; }

 private:
  std::nullopt_t fail(const std::string& why) {
    if (error_.empty()) error_ = why + " at offset " + std::to_string(i_);
    return std::nullopt;
  }
  bool failed(const std::string& why) {
    fail(why);
    return false;
  }
  void skip_ws() {
    while (i_ < s_.size() &&
           (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) {
      ++i_;
    }
  }
  bool literal(const char* word) {
    const std::string w = word;
    if (s_.compare(i_, w.size(), w) != 0) return failed("bad literal");
    i_ += w.size();
    return true;
  }
  bool value(Json& v) {
    if (i_ >= s_.size()) return failed("unexpected end");
    switch (s_[i_]) {
      case '{': return object(v);
      case '[': return array(v);
      case '"': return string_value(v);
      case 't': return boolean(v, true);
      case 'f': return boolean(v, false);
      case 'n': return literal("null");
      default: return number(v);
    }
  }
  bool string_value(Json& v) {
    v.type = Json::Type::kString;
    return string(v.string);
  }
  bool boolean(Json& v, bool b) {
    v.type = Json::Type::kBool;
    v.boolean = b;
    return literal(b ? "true" : "false");
  }
  bool number(Json& v) {
    const std::size_t start = i_;
    auto digits = [&] {
      const std::size_t from = i_;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
      return i_ > from;
    };
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    if (i_ < s_.size() && s_[i_] == '0') {
      ++i_;
    } else if (!digits()) {
      return failed("bad number");
    }
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (!digits()) return failed("bad fraction");
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (!digits()) return failed("bad exponent");
    }
    v.type = Json::Type::kNumber;
    v.number = std::stod(s_.substr(start, i_ - start));
    return true;
  }
  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  bool hex4(uint32_t& cp) {
    if (i_ + 4 > s_.size()) return failed("short \\u escape");
    cp = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[i_++];
      cp <<= 4;
      if (c >= '0' && c <= '9') {
        cp |= c - '0';
      } else if (c >= 'a' && c <= 'f') {
        cp |= c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        cp |= c - 'A' + 10;
      } else {
        return failed("bad \\u escape");
      }
    }
    return true;
  }
  bool string(std::string& out) {
    ++i_;  // opening quote
    for (;;) {
      if (i_ >= s_.size()) return failed("unterminated string");
      const auto c = static_cast<unsigned char>(s_[i_++]);
      if (c == '"') return true;
      if (c < 0x20) return failed("raw control character in string");
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      if (i_ >= s_.size()) return failed("unterminated escape");
      switch (s_[i_++]) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp;
          if (!hex4(cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00 && s_.compare(i_, 2, "\\u") == 0) {
            i_ += 2;
            uint32_t low;
            if (!hex4(low)) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default: return failed("bad escape");
      }
    }
  }
  bool array(Json& v) {
    v.type = Json::Type::kArray;
    ++i_;
    skip_ws();
    if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
    for (;;) {
      skip_ws();
      v.array.emplace_back();
      if (!value(v.array.back())) return false;
      skip_ws();
      if (i_ >= s_.size()) return failed("unterminated array");
      if (s_[i_] == ']') return ++i_, true;
      if (s_[i_++] != ',') return failed("expected , or ] in array");
    }
  }
  bool object(Json& v) {
    v.type = Json::Type::kObject;
    ++i_;
    skip_ws();
    if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
    for (;;) {
      skip_ws();
      if (i_ >= s_.size() || s_[i_] != '"') return failed("expected key");
      std::string key;
      if (!string(key)) return false;
      skip_ws();
      if (i_ >= s_.size() || s_[i_++] != ':') return failed("expected :");
      skip_ws();
      Json member;
      if (!value(member)) return false;
      v.object.emplace_back(std::move(key), std::move(member));
      skip_ws();
      if (i_ >= s_.size()) return failed("unterminated object");
      if (s_[i_] == '}') return ++i_, true;
      if (s_[i_++] != ',') return failed("expected , or } in object");
    }
  }

  std::string s_;
  std::size_t i_ = 0;
  std::string error_;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The trace at `path` as a list of events; fails the test if it is not a JSON array.
std::vector<Json> load_trace(const std::string& path) {
  JsonParser parser(read_file(path));
  std::optional<Json> doc = parser.parse();
  EXPECT_TRUE(doc.has_value()) << path << ": " << parser.error();
  if (!doc) return {};
  EXPECT_EQ(doc->type, Json::Type::kArray);
  return doc->array;
}

std::string str(const Json& event, const std::string& key) {
  const Json* v = event.get(key);
  return v != nullptr && v->type == Json::Type::kString ? v->string : std::string();
}
double num(const Json& event, const std::string& key) {
  const Json* v = event.get(key);
  return v != nullptr && v->type == Json::Type::kNumber ? v->number : -1;
}
std::string arg(const Json& event, const std::string& key) {
  const Json* args = event.get("args");
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
    EXPECT_EQ(e.type, Json::Type::kObject);
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
    auto timeline = Timeline::open(path_, rank);
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
}

TEST_F(TimelineTest, EmptyTraceIsValidJson) {
  auto timeline = open_timeline(2);
  ASSERT_NE(timeline, nullptr);
  EXPECT_EQ(load_trace(path_).size(), 1u);  // valid straight after open
  timeline->flush();
  EXPECT_EQ(load_trace(path_).size(), 1u);
  timeline->stop();
  const std::vector<Json> events = load_trace(path_);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(str(events[0], "name"), "process_name");
  EXPECT_EQ(arg(events[0], "name"), "rank 2");
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
  EXPECT_EQ(s.row_of.size(), static_cast<std::size_t>(kThreads * kTensorsPerThread));
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
  EXPECT_EQ(memcpy_out.get("args"), nullptr);  // no detail, no args
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
  EXPECT_EQ(load_trace(path_).size(), 1u);
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

TEST(TimelineOpenTest, MissingDirectoryNamesThePath) {
  const std::string path = "/nonexistent-chorus-dir/sub/trace.json";
  auto timeline = Timeline::open(path, 0);
  ASSERT_FALSE(timeline.ok());
  EXPECT_EQ(timeline.status().code(), StatusCode::kInvalidArgument);
  const std::string& message = timeline.status().message();
  EXPECT_NE(message.find("CHORUS_TIMELINE=" + path), std::string::npos) << message;
  EXPECT_NE(message.find("cannot open"), std::string::npos) << message;
  EXPECT_NE(message.find("No such file or directory"), std::string::npos) << message;
}

}  // namespace
}  // namespace chorus
