#pragma once
// A strict JSON reader and the value tree it builds, for the files Chorus writes and reads
// back (chorus-trace: the timeline, a JSON array of up to ~100 MB with one event per line,
// and the flight records, one JSON object per rank).
//
// Strict means RFC 8259 and nothing more: no trailing commas, comments, single quotes,
// NaN/Infinity, leading zeros or unescaped control characters; strings must be UTF-8. A
// damaged file (a truncated write, a hand edit) fails with the line and column of its
// first fault instead of being read by guesswork.
//
// Numbers keep their source text next to their double: as_int() is exact for integers
// beyond 2^53 (byte counts, clocks in nanoseconds), and append_json() writes a number
// back exactly as it was read. Strings are written back through append_json_string, so a
// text that Chorus itself wrote (compact, with its escapes) comes back byte for byte.
//
// Parsing is one pass over the text, recursive to at most kMaxJsonDepth containers, so a
// hostile file cannot overflow the stack. No shared state: parse on any thread; a const
// JsonValue may be read from several threads at once.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "chorus/status.h"

namespace chorus {

/// Arrays and objects nested deeper than this are an error (not a stack overflow).
inline constexpr int kMaxJsonDepth = 512;

/// One JSON value: null, a boolean, a number, a string, an array or an object. A value
/// owns its children; copies are deep.
class JsonValue {
 public:
  enum class Kind : uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };
  using Member = std::pair<std::string, JsonValue>;

  /// null.
  JsonValue() = default;
  static JsonValue boolean(bool b);
  /// Keeps the shortest text that reads back as `d`. NaN and infinities, which JSON cannot
  /// write, keep the text "null": as_number() still returns them, append_json() writes null.
  static JsonValue number(double d);
  /// Exact at any magnitude: the text is the decimal integer, as_int() returns `i`.
  static JsonValue integer(int64_t i);
  static JsonValue string(std::string s);
  static JsonValue array(std::vector<JsonValue> items = {});
  static JsonValue object(std::vector<Member> members = {});

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_null() const { return kind() == Kind::kNull; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_number() const { return kind() == Kind::kNumber; }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_array() const { return kind() == Kind::kArray; }
  bool is_object() const { return kind() == Kind::kObject; }

  // The accessors below require the matching kind (asserted in debug builds; a mismatch
  // throws std::bad_variant_access in release builds).
  bool as_bool() const;
  /// The nearest double to the number's text.
  double as_number() const;
  /// The number as int64 when its text is an integer that fits (exact, no double rounding):
  /// "-0" gives 0; "1e3", "1.0" and "9223372036854775808" give std::nullopt, as does a value
  /// that is not a number.
  std::optional<int64_t> as_int() const;
  const std::string& as_string() const;
  /// An array's elements.
  const std::vector<JsonValue>& items() const;
  std::vector<JsonValue>& items();
  /// An object's members in file order; a key that appears twice is kept twice.
  const std::vector<Member>& members() const;
  std::vector<Member>& members();

  /// The first member named `key` of an object; nullptr when absent or not an object.
  /// Linear in the number of members (events and records have a handful).
  const JsonValue* find(std::string_view key) const;
  JsonValue* find(std::string_view key);
  /// Sets member `key` of an object: replaces the first member of that name, else appends.
  void set(std::string key, JsonValue value);

 private:
  friend class JsonParser;
  friend void append_json(std::string& out, const JsonValue& v);

  struct Number {
    double value = 0;
    std::string text;  ///< valid JSON number text (or "null"); short enough for SSO usually
  };
  // Alternatives in the order of Kind, so that kind() is the index.
  using Storage = std::variant<std::monostate, bool, Number, std::string, std::vector<JsonValue>,
                               std::vector<Member>>;
  Storage v_;
};

/// Parses one JSON text (RFC 8259: whitespace around one value, nothing after it). `what`
/// names the text in errors, which are kInvalidArgument:
/// "<what>: line L, column C: <problem>", with L and C counted from 1 and C in bytes,
/// pointing at the offending character (the opening quote of an unterminated string; the
/// end of the text when it ends too soon). Problems include "expected ',' or ']'",
/// "unterminated string", "invalid escape \q", "nesting deeper than 512" and "trailing
/// characters after the value". A \u escape of a lone surrogate becomes U+FFFD; a number
/// beyond the range of a double (1e400, 1e-400) is an error.
StatusOr<JsonValue> parse_json(std::string_view text, const std::string& what);

/// Appends `v` as compact JSON (no spaces): strings through append_json_string, numbers as
/// their kept text, members in order (duplicates included).
void append_json(std::string& out, const JsonValue& v);

}  // namespace chorus
