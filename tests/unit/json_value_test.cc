// The JSON reader (base/json_value.h): every kind reads and writes back unchanged, escapes
// decode to UTF-8, integers stay exact past 2^53, malformed texts fail with the line and
// column of the fault, deep nesting fails instead of overflowing the stack, and a timeline
// of 100,000 events comes back byte for byte.
#include "base/json_value.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace chorus {
namespace {

JsonValue parse_ok(std::string_view text) {
  StatusOr<JsonValue> v = parse_json(text, "t");
  EXPECT_TRUE(v.ok()) << v.status().to_string() << "\n  in: " << text;
  return v.ok() ? std::move(v).value() : JsonValue();
}

std::string write(const JsonValue& v) {
  std::string out;
  append_json(out, v);
  return out;
}

// The error message for `text`, or "parsed" when it parsed.
std::string parse_error(std::string_view text) {
  StatusOr<JsonValue> v = parse_json(text, "t");
  if (v.ok()) return "parsed";
  EXPECT_EQ(StatusCode::kInvalidArgument, v.status().code());
  return v.status().message();
}

TEST(JsonValue, DefaultIsNullAndFactoriesSetTheKind) {
  EXPECT_EQ(JsonValue::Kind::kNull, JsonValue().kind());
  EXPECT_TRUE(JsonValue().is_null());
  EXPECT_TRUE(JsonValue::boolean(false).is_bool());
  EXPECT_FALSE(JsonValue::boolean(false).as_bool());
  EXPECT_TRUE(JsonValue::number(2.5).is_number());
  EXPECT_TRUE(JsonValue::integer(7).is_number());
  EXPECT_TRUE(JsonValue::string("x").is_string());
  EXPECT_TRUE(JsonValue::array().is_array());
  EXPECT_TRUE(JsonValue::object().is_object());
  EXPECT_FALSE(JsonValue::object().is_array());
  EXPECT_EQ("[null,true,2.5,7,\"x\",[],{}]",
            write(JsonValue::array({JsonValue(), JsonValue::boolean(true), JsonValue::number(2.5),
                                    JsonValue::integer(7), JsonValue::string("x"),
                                    JsonValue::array(), JsonValue::object()})));
}

TEST(JsonValue, EveryKindRoundTrips) {
  const std::vector<std::string> texts = {
      "null",
      "true",
      "false",
      "0",
      "-0",
      "12.5e-3",
      "1E+2",
      "-0.000",
      "\"\"",
      "\"plain\"",
      "[]",
      "{}",
      "[1,[2,[]],{}]",
      R"({"a":1,"b":[true,false,null],"c":{"d":"e"}})",
      R"({"a":1,"a":2})",                               // duplicates kept, in order
      "\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\"",  // raw UTF-8 stays raw
  };
  for (const std::string& text : texts) EXPECT_EQ(text, write(parse_ok(text)));
}

TEST(JsonValue, ReadsWhatItParsed) {
  const JsonValue v = parse_ok(R"({"s":"x","n":-1.5,"b":true,"z":null,"a":[1,"2"],"o":{}})");
  ASSERT_TRUE(v.is_object());
  ASSERT_EQ(6u, v.members().size());
  EXPECT_EQ("s", v.members()[0].first);
  EXPECT_EQ("x", v.members()[0].second.as_string());
  EXPECT_EQ(-1.5, v.members()[1].second.as_number());
  EXPECT_TRUE(v.members()[2].second.as_bool());
  EXPECT_TRUE(v.members()[3].second.is_null());
  ASSERT_EQ(2u, v.members()[4].second.items().size());
  EXPECT_EQ(1.0, v.members()[4].second.items()[0].as_number());
  EXPECT_EQ("2", v.members()[4].second.items()[1].as_string());
  EXPECT_TRUE(v.members()[5].second.is_object());
  EXPECT_TRUE(v.members()[5].second.members().empty());
}

TEST(JsonValue, WhitespaceAroundTokensIsDropped) {
  EXPECT_EQ(R"({"a":[1,2],"b":null})",
            write(parse_ok(" \t\r\n{ \"a\" :\n[ 1 ,\t2 ] , \"b\":null }\r\n")));
}

TEST(JsonValue, EscapesDecodeToUtf8) {
  EXPECT_EQ("\"\\/\b\f\n\r\t", parse_ok(R"("\"\\\/\b\f\n\r\t")").as_string());
  EXPECT_EQ("caf\xC3\xA9", parse_ok(R"("caf\u00e9")").as_string());
  EXPECT_EQ("\xE2\x82\xAC", parse_ok(R"("\u20AC")").as_string());
  EXPECT_EQ("A", parse_ok(R"("\u0041")").as_string());
  EXPECT_EQ(std::string(1, '\0'), parse_ok(R"("\u0000")").as_string());
  // A surrogate pair is one code point: U+1F600 in four bytes, either case of hex.
  EXPECT_EQ("\xF0\x9F\x98\x80", parse_ok(R"("\ud83d\ude00")").as_string());
  EXPECT_EQ("x\xF0\x9F\x98\x80y", parse_ok(R"("x\uD83D\uDE00y")").as_string());
  // Lone surrogates become U+FFFD; what follows a lone high one is read on its own.
  EXPECT_EQ("\xEF\xBF\xBDx", parse_ok(R"("\ud800x")").as_string());
  EXPECT_EQ("\xEF\xBF\xBD", parse_ok(R"("\udc00")").as_string());
  EXPECT_EQ("\xEF\xBF\xBD\xF0\x9F\x98\x80", parse_ok(R"("\ud800\ud83d\ude00")").as_string());
  EXPECT_EQ("\xEF\xBF\xBD\n", parse_ok(R"("\ud800\n")").as_string());
  // Member names are strings like any other.
  EXPECT_NE(nullptr, parse_ok(R"({"\u0061b":1})").find("ab"));
}

TEST(JsonValue, EscapesAreWrittenTheWayAppendJsonStringWritesThem) {
  // Control characters come back as \u00XX: the writer's one form, so a text Chorus wrote
  // round-trips and other escapes normalize.
  EXPECT_EQ(R"("\"\\/\u0008\u000c\u000a\u000d\u0009\u0000")",
            write(parse_ok(R"("\"\\\/\b\f\n\r\t\u0000")")));
  EXPECT_EQ("\"\xC3\xA9\"", write(parse_ok(R"("\u00E9")")));
}

TEST(JsonValue, IntegersStayExact) {
  // 2^53 + 1 has no double: as_int reads the text, as_number rounds.
  const JsonValue big = parse_ok("9007199254740993");
  EXPECT_EQ(9007199254740993, big.as_int());
  EXPECT_EQ(9007199254740992.0, big.as_number());
  EXPECT_EQ("9007199254740993", write(big));

  EXPECT_EQ(std::numeric_limits<int64_t>::max(), parse_ok("9223372036854775807").as_int());
  EXPECT_EQ(std::numeric_limits<int64_t>::min(), parse_ok("-9223372036854775808").as_int());
  EXPECT_EQ(std::nullopt, parse_ok("9223372036854775808").as_int());
  EXPECT_EQ(std::nullopt, parse_ok("-9223372036854775809").as_int());
  EXPECT_EQ("-9223372036854775809", write(parse_ok("-9223372036854775809")));
  EXPECT_EQ(0, parse_ok("-0").as_int());
  EXPECT_EQ(-42, parse_ok("-42").as_int());

  // Only an integer's text counts, not its value.
  EXPECT_EQ(std::nullopt, parse_ok("1e3").as_int());
  EXPECT_EQ(1000.0, parse_ok("1e3").as_number());
  EXPECT_EQ(std::nullopt, parse_ok("1.5").as_int());
  EXPECT_EQ(std::nullopt, parse_ok("1.0").as_int());
  EXPECT_EQ(std::nullopt, parse_ok("\"7\"").as_int());
  EXPECT_EQ(std::nullopt, JsonValue().as_int());
}

TEST(JsonValue, NumberFactoriesKeepRoundTripText) {
  EXPECT_EQ("0.1", write(JsonValue::number(0.1)));
  EXPECT_EQ("1.5", write(JsonValue::number(1.5)));
  EXPECT_EQ("3", write(JsonValue::number(3.0)));
  EXPECT_EQ(3, JsonValue::number(3.0).as_int());
  EXPECT_EQ(std::nullopt, JsonValue::number(0.5).as_int());
  for (double d : {1e21, -2.5e-300, 5e-324, 123456789.125, 1.0 / 3}) {
    const JsonValue back = parse_ok(write(JsonValue::number(d)));
    EXPECT_EQ(d, back.as_number()) << write(JsonValue::number(d));
  }
  // JSON has no NaN: the value is kept, the text is null.
  const JsonValue nan = JsonValue::number(std::nan(""));
  EXPECT_TRUE(nan.is_number());
  EXPECT_TRUE(std::isnan(nan.as_number()));
  EXPECT_EQ(std::nullopt, nan.as_int());
  EXPECT_EQ("[null]", write(JsonValue::array({JsonValue::number(-HUGE_VAL)})));

  const int64_t min = std::numeric_limits<int64_t>::min();
  EXPECT_EQ("-9223372036854775808", write(JsonValue::integer(min)));
  EXPECT_EQ(min, JsonValue::integer(min).as_int());
  EXPECT_EQ(9007199254740993, JsonValue::integer(9007199254740993).as_int());
  EXPECT_EQ("9007199254740993", write(JsonValue::integer(9007199254740993)));
}

TEST(JsonValue, StringsAreWrittenEscaped) {
  EXPECT_EQ(R"(["a\"b\\c\u000a",{"k\"":"v"}])",
            write(JsonValue::array({JsonValue::string("a\"b\\c\n"),
                                    JsonValue::object({{"k\"", JsonValue::string("v")}})})));
}

TEST(JsonValue, MalformedTextNamesLineAndColumn) {
  struct Case {
    std::string text;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"", "t: line 1, column 1: expected a value"},
      {"  \n ", "t: line 2, column 2: expected a value"},
      {"[1,2", "t: line 1, column 5: expected ',' or ']'"},
      {"[1 2]", "t: line 1, column 4: expected ',' or ']'"},
      {"[\n1,\n2 3]", "t: line 3, column 3: expected ',' or ']'"},
      {"[1,]", "t: line 1, column 4: expected a value"},
      {R"({"a":1,})", "t: line 1, column 8: expected a member name (a string)"},
      {"{'a':1}", "t: line 1, column 2: expected a member name (a string)"},
      {"['a']", "t: line 1, column 2: expected a value"},
      {R"({"a" 1})", "t: line 1, column 6: expected ':'"},
      {R"({"a":1 "b":2})", "t: line 1, column 8: expected ',' or '}'"},
      {"[NaN]", "t: line 1, column 2: expected a value"},
      {"Infinity", "t: line 1, column 1: expected a value"},
      {"-Infinity", "t: line 1, column 2: invalid number: expected a digit"},
      {"tru", "t: line 1, column 1: expected a value"},
      {"nulls", "t: line 1, column 5: trailing characters after the value"},
      {"01", "t: line 1, column 1: invalid number: leading zero"},
      {"[-01]", "t: line 1, column 2: invalid number: leading zero"},
      {"1.", "t: line 1, column 3: invalid number: expected a digit after '.'"},
      {".5", "t: line 1, column 1: expected a value"},
      {"+1", "t: line 1, column 1: expected a value"},
      {"1e+", "t: line 1, column 4: invalid number: expected a digit in the exponent"},
      {"[1e400]", "t: line 1, column 2: number out of the range of a double"},
      {"[1] 2", "t: line 1, column 5: trailing characters after the value"},
      {"{}}", "t: line 1, column 3: trailing characters after the value"},
      {"[\"abc", "t: line 1, column 2: unterminated string"},
      {"[\"abc\\", "t: line 1, column 2: unterminated string"},
      {"\"\\q\"", "t: line 1, column 2: invalid escape \\q"},
      {"\"\\u12g4\"", "t: line 1, column 2: invalid escape: \\u needs 4 hex digits"},
      {"\"\\u12\"", "t: line 1, column 2: invalid escape: \\u needs 4 hex digits"},
      {"{\n  \"a\": \"x\ty\"}", "t: line 2, column 10: control character (byte 0x09) in string"},
      {"\"\xFF\"", "t: line 1, column 2: invalid UTF-8 in string"},
      {"\"\xC0\x80\"", "t: line 1, column 2: invalid UTF-8 in string"},      // overlong NUL
      {"\"\xED\xA0\x80\"", "t: line 1, column 2: invalid UTF-8 in string"},  // surrogate
      {"\"\xE2\x82\"", "t: line 1, column 2: invalid UTF-8 in string"},      // truncated
      {"\xEF\xBB\xBF{}", "t: line 1, column 1: expected a value"},           // BOM
  };
  for (const Case& c : cases) EXPECT_EQ(c.message, parse_error(c.text)) << "in: " << c.text;
}

TEST(JsonValue, ErrorsNameTheText) {
  const StatusOr<JsonValue> v = parse_json("[", "trace rank3.json");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ("INVALID_ARGUMENT: trace rank3.json: line 1, column 2: expected a value",
            v.status().to_string());
}

std::string nested(int depth, const std::string& open, const std::string& close) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += open;
  s += "0";
  for (int i = 0; i < depth; ++i) s += close;
  return s;
}

TEST(JsonValue, NestingIsLimitedTo512) {
  const std::string arrays = nested(kMaxJsonDepth, "[", "]");
  EXPECT_EQ(arrays, write(parse_ok(arrays)));
  const std::string objects = nested(kMaxJsonDepth, R"({"k":)", "}");
  EXPECT_EQ(objects, write(parse_ok(objects)));

  EXPECT_EQ("t: line 1, column 513: nesting deeper than 512",
            parse_error(nested(kMaxJsonDepth + 1, "[", "]")));
  EXPECT_EQ("t: line 1, column 2561: nesting deeper than 512",  // 5 bytes per level
            parse_error(nested(kMaxJsonDepth + 1, R"({"k":)", "}")));
  // Far deeper, unterminated: an error, not a stack overflow.
  EXPECT_EQ("t: line 1, column 513: nesting deeper than 512",
            parse_error(std::string(1000000, '[')));
}

// Where `actual` first differs from `expected`, with some text around; "" when equal. A
// megabyte-long EXPECT_EQ would bury the difference.
std::string first_difference(const std::string& expected, const std::string& actual) {
  if (expected == actual) return "";
  std::size_t i = 0;
  while (i < expected.size() && i < actual.size() && expected[i] == actual[i]) ++i;
  const std::size_t from = i < 40 ? 0 : i - 40;
  return "at byte " + std::to_string(i) + ": expected ..." + expected.substr(from, 80) +
         "\n  actual ..." + actual.substr(from, 80);
}

// One event in the form the timeline writes (compact, keys in its order).
std::string trace_event(int i) {
  const int64_t ts = 1'700'000'000'000'000 + int64_t{i} * 37;
  std::string e = R"({"name":"ALLREDUCE","ph":"X","pid":3,"tid":)" + std::to_string(i % 17 + 1) +
                  R"(,"ts":)" + std::to_string(ts) + R"(,"dur":)" + std::to_string(i % 1000);
  if (i % 5 == 0) {
    // Escaped the way append_json_string escapes: raw UTF-8, \u00XX for control characters.
    e += R"(,"args":{"detail":"grad.layer)" + std::to_string(i) +
         " \\\"q\\\" \\\\ caf\xC3\xA9 \\u000a\",\"bytes\":" + std::to_string(i * 4096) +
         R"(,"scale":0.125,"fused":true,"root":null})";
  }
  return e + "}";
}

TEST(JsonValue, ChromeTraceOf100000EventsRoundTrips) {
  constexpr int kEvents = 100000;
  std::string compact = "[";
  std::string lines = "[\n";  // one event per line, as the timeline writes them
  for (int i = 0; i < kEvents; ++i) {
    if (i > 0) {
      compact += ',';
      lines += ",\n";
    }
    compact += trace_event(i);
    lines += trace_event(i);
  }
  compact += ']';
  lines += "\n]\n";

  const JsonValue trace = parse_ok(lines);
  ASSERT_TRUE(trace.is_array());
  ASSERT_EQ(static_cast<std::size_t>(kEvents), trace.items().size());
  const JsonValue& e = trace.items()[99995];
  ASSERT_NE(nullptr, e.find("ts"));
  EXPECT_EQ(1'700'000'000'000'000 + int64_t{99995} * 37, e.find("ts")->as_int());
  EXPECT_EQ(995, e.find("dur")->as_int());
  ASSERT_NE(nullptr, e.find("args"));
  EXPECT_EQ("grad.layer99995 \"q\" \\ caf\xC3\xA9 \n", e.find("args")->find("detail")->as_string());
  EXPECT_EQ(nullptr, trace.items()[99996].find("args"));

  std::string out;
  out.reserve(compact.size());
  append_json(out, trace);
  EXPECT_EQ("", first_difference(compact, out));
  EXPECT_EQ("", first_difference(compact, write(parse_ok(compact))));
}

TEST(JsonValue, FindReturnsTheFirstMemberOfThatName) {
  JsonValue v = parse_ok(R"({"a":1,"b":2,"a":3})");
  ASSERT_NE(nullptr, v.find("a"));
  EXPECT_EQ(1, v.find("a")->as_int());
  EXPECT_EQ(2, v.find("b")->as_int());
  EXPECT_EQ(nullptr, v.find("c"));
  EXPECT_EQ(nullptr, v.find("A"));
  EXPECT_EQ(nullptr, parse_ok(R"(["a"])").find("a"));
  EXPECT_EQ(nullptr, JsonValue::string("a").find("a"));
  const JsonValue& cv = v;
  EXPECT_EQ(cv.find("b"), v.find("b"));

  *v.find("b") = JsonValue::string("two");
  EXPECT_EQ(R"({"a":1,"b":"two","a":3})", write(v));
}

TEST(JsonValue, SetReplacesTheFirstOrAppends) {
  JsonValue v = parse_ok(R"({"a":1,"b":2,"a":3})");
  v.set("a", JsonValue::boolean(false));
  v.set("c", JsonValue::array({JsonValue::integer(4)}));
  EXPECT_EQ(R"({"a":false,"b":2,"a":3,"c":[4]})", write(v));

  JsonValue empty = JsonValue::object();
  empty.set("", JsonValue());
  empty.set("", JsonValue::integer(1));
  EXPECT_EQ(R"({"":1})", write(empty));
}

TEST(JsonValue, CopiesAreDeep) {
  const JsonValue original = parse_ok(R"({"a":[1,{"b":2}]})");
  JsonValue copy = original;
  copy.find("a")->items()[1].set("b", JsonValue::string("changed"));
  copy.find("a")->items().push_back(JsonValue());
  EXPECT_EQ(R"({"a":[1,{"b":2}]})", write(original));
  EXPECT_EQ(R"({"a":[1,{"b":"changed"},null]})", write(copy));
}

}  // namespace
}  // namespace chorus
