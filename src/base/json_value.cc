#include "base/json_value.h"

#include <cassert>
#include <charconv>
#include <cmath>
#include <cstring>
#include <iterator>
#include <system_error>

#include "base/json.h"

namespace chorus {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Value of a hex digit, or -1.
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::string& out, uint32_t cp) {
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

// How an unexpected byte reads in an error: 'q' when printable, else its hex value.
std::string describe_byte(char c) {
  const auto b = static_cast<unsigned char>(c);
  if (b >= 0x20 && b < 0x7F) return std::string(1, c);
  static constexpr char kHex[] = "0123456789abcdef";
  return std::string("(byte 0x") + kHex[b >> 4] + kHex[b & 0xF] + ")";
}

}  // namespace

// Recursive descent over [p_, end_). Each parse_* function starts at the first byte of its
// token, leaves p_ just past it, and returns false after fail() on the first error; the
// partly built value is then thrown away by parse_json.
class JsonParser {
 public:
  JsonParser(std::string_view text, const std::string& what)
      : begin_(text.data()), p_(text.data()), end_(text.data() + text.size()), what_(what) {}

  StatusOr<JsonValue> parse() {
    JsonValue root;
    skip_space();
    if (!parse_value(root, 0)) return error();
    skip_space();
    if (p_ != end_) {
      fail(p_, "trailing characters after the value");
      return error();
    }
    return root;
  }

 private:
  bool fail(const char* at, std::string problem) {
    error_at_ = at;
    problem_ = std::move(problem);
    return false;
  }

  // Lines and columns are counted only here, so the common path never tracks them.
  Status error() const {
    int64_t line = 1;
    const char* line_start = begin_;
    for (const char* q = begin_; q < error_at_; ++q) {
      if (*q == '\n') {
        ++line;
        line_start = q + 1;
      }
    }
    return invalid_argument(what_ + ": line " + std::to_string(line) + ", column " +
                            std::to_string(error_at_ - line_start + 1) + ": " + problem_);
  }

  void skip_space() {
    while (p_ < end_ && is_space(*p_)) ++p_;
  }

  bool parse_value(JsonValue& out, int depth) {
    if (p_ == end_) return fail(p_, "expected a value");
    switch (*p_) {
      case '{': return parse_object(out, depth + 1);
      case '[': return parse_array(out, depth + 1);
      case '"': {
        std::string s;
        if (!parse_string(s)) return false;
        out.v_ = std::move(s);
        return true;
      }
      case 't': return parse_literal("true", out, JsonValue::boolean(true));
      case 'f': return parse_literal("false", out, JsonValue::boolean(false));
      case 'n': return parse_literal("null", out, JsonValue());
      default:
        if (*p_ == '-' || is_digit(*p_)) return parse_number(out);
        return fail(p_, "expected a value");
    }
  }

  bool parse_literal(std::string_view word, JsonValue& out, JsonValue value) {
    if (static_cast<std::size_t>(end_ - p_) < word.size() ||
        std::memcmp(p_, word.data(), word.size()) != 0) {
      return fail(p_, "expected a value");
    }
    p_ += word.size();
    out = std::move(value);
    return true;
  }

  // depth: the containers open once this one is, counting it. Elements are parsed into the
  // scratch vector of their depth and then moved into a vector of the exact size: one
  // allocation per container instead of one per doubling, and no spare capacity in a tree
  // that is several times the size of its text.
  bool parse_array(JsonValue& out, int depth) {
    if (depth > kMaxJsonDepth) {
      return fail(p_, "nesting deeper than " + std::to_string(kMaxJsonDepth));
    }
    ++p_;  // '['
    std::vector<JsonValue>& items = item_scratch_[depth];
    skip_space();
    if (p_ < end_ && *p_ == ']') {
      ++p_;
      out.v_ = std::vector<JsonValue>();
      return true;
    }
    while (true) {
      skip_space();
      if (!parse_value(items.emplace_back(), depth)) return false;
      skip_space();
      if (p_ < end_ && *p_ == ',') {
        ++p_;
      } else if (p_ < end_ && *p_ == ']') {
        ++p_;
        out.v_ = take(items);
        return true;
      } else {
        return fail(p_, "expected ',' or ']'");
      }
    }
  }

  bool parse_object(JsonValue& out, int depth) {
    if (depth > kMaxJsonDepth) {
      return fail(p_, "nesting deeper than " + std::to_string(kMaxJsonDepth));
    }
    ++p_;  // '{'
    std::vector<JsonValue::Member>& members = member_scratch_[depth];
    skip_space();
    if (p_ < end_ && *p_ == '}') {
      ++p_;
      out.v_ = std::vector<JsonValue::Member>();
      return true;
    }
    while (true) {
      skip_space();
      if (p_ == end_ || *p_ != '"') return fail(p_, "expected a member name (a string)");
      JsonValue::Member& m = members.emplace_back();
      if (!parse_string(m.first)) return false;
      skip_space();
      if (p_ == end_ || *p_ != ':') return fail(p_, "expected ':'");
      ++p_;
      skip_space();
      if (!parse_value(m.second, depth)) return false;
      skip_space();
      if (p_ < end_ && *p_ == ',') {
        ++p_;
      } else if (p_ < end_ && *p_ == '}') {
        ++p_;
        out.v_ = take(members);
        return true;
      } else {
        return fail(p_, "expected ',' or '}'");
      }
    }
  }

  // The contents of `scratch`, in a vector of their size; `scratch` is left empty with its
  // capacity, for the next container at the same depth.
  template <class T>
  static std::vector<T> take(std::vector<T>& scratch) {
    std::vector<T> exact(std::make_move_iterator(scratch.begin()),
                         std::make_move_iterator(scratch.end()));
    scratch.clear();
    return exact;
  }

  // Starts at the opening quote. A string without escapes, the common case, is copied once;
  // with escapes, runs of plain bytes are appended between them.
  bool parse_string(std::string& out) {
    const char* const open = p_;
    ++p_;
    const char* run = p_;  // start of the plain bytes not yet in `out`
    out.clear();
    while (p_ < end_) {
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        out.append(run, p_);
        ++p_;
        return true;
      }
      if (c == '\\') {
        if (end_ - p_ < 2) break;
        out.append(run, p_);
        if (!parse_escape(out)) return false;
        run = p_;
      } else if (c < 0x20) {
        return fail(p_, "control character " + describe_byte(*p_) + " in string");
      } else if (c < 0x80) {
        ++p_;
      } else if (std::size_t n = utf8_sequence_length(
                     std::string_view(p_, static_cast<std::size_t>(end_ - p_)), 0);
                 n > 0) {
        p_ += n;
      } else {
        return fail(p_, "invalid UTF-8 in string");
      }
    }
    return fail(open, "unterminated string");
  }

  // Starts at a backslash that has a byte after it; appends what the escape stands for.
  bool parse_escape(std::string& out) {
    const char* const backslash = p_;
    const char e = p_[1];
    p_ += 2;
    switch (e) {
      case '"': out += '"'; return true;
      case '\\': out += '\\'; return true;
      case '/': out += '/'; return true;
      case 'b': out += '\b'; return true;
      case 'f': out += '\f'; return true;
      case 'n': out += '\n'; return true;
      case 'r': out += '\r'; return true;
      case 't': out += '\t'; return true;
      case 'u': break;
      default: return fail(backslash, "invalid escape \\" + describe_byte(e));
    }
    uint32_t cp;
    if (!read_hex4(backslash, cp)) return false;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      // A high surrogate pairs with a low one in the next escape; alone it is U+FFFD, and
      // whatever follows is read on its own.
      uint32_t low;
      if (end_ - p_ >= 6 && p_[0] == '\\' && p_[1] == 'u' && peek_hex4(p_ + 2, low) &&
          low >= 0xDC00 && low <= 0xDFFF) {
        p_ += 6;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
      } else {
        cp = 0xFFFD;
      }
    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
      cp = 0xFFFD;
    }
    append_utf8(out, cp);
    return true;
  }

  // The four hex digits at p_, after "\u" at `backslash`.
  bool read_hex4(const char* backslash, uint32_t& cp) {
    if (!peek_hex4(p_, cp)) return fail(backslash, "invalid escape: \\u needs 4 hex digits");
    p_ += 4;
    return true;
  }

  bool peek_hex4(const char* at, uint32_t& cp) const {
    if (end_ - at < 4) return false;
    cp = 0;
    for (int k = 0; k < 4; ++k) {
      const int h = hex_value(at[k]);
      if (h < 0) return false;
      cp = cp << 4 | static_cast<uint32_t>(h);
    }
    return true;
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, checked here: from_chars also accepts
  // forms that JSON does not (inf, nan, 01, 1.).
  bool parse_number(JsonValue& out) {
    const char* const start = p_;
    if (*p_ == '-') ++p_;
    if (p_ == end_ || !is_digit(*p_)) return fail(p_, "invalid number: expected a digit");
    if (*p_ == '0') {
      ++p_;
      if (p_ < end_ && is_digit(*p_)) return fail(start, "invalid number: leading zero");
    } else {
      while (p_ < end_ && is_digit(*p_)) ++p_;
    }
    if (p_ < end_ && *p_ == '.') {
      ++p_;
      if (p_ == end_ || !is_digit(*p_)) {
        return fail(p_, "invalid number: expected a digit after '.'");
      }
      while (p_ < end_ && is_digit(*p_)) ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || !is_digit(*p_)) {
        return fail(p_, "invalid number: expected a digit in the exponent");
      }
      while (p_ < end_ && is_digit(*p_)) ++p_;
    }
    JsonValue::Number n;
    // from_chars, unlike strtod, ignores the locale and needs no terminated copy.
    const auto [end, ec] = std::from_chars(start, p_, n.value);
    if (ec == std::errc::result_out_of_range) {
      return fail(start, "number out of the range of a double");
    }
    if (ec != std::errc() || end != p_) return fail(start, "invalid number");
    n.text.assign(start, p_);
    out.v_ = std::move(n);
    return true;
  }

  const char* const begin_;
  const char* p_;
  const char* const end_;
  const std::string& what_;
  const char* error_at_ = nullptr;
  std::string problem_;
  // Per depth (1 to kMaxJsonDepth): the elements or members of the container open there.
  // Sized up front, so that a reference to one stays valid while deeper ones are used.
  std::vector<std::vector<JsonValue>> item_scratch_ =
      std::vector<std::vector<JsonValue>>(kMaxJsonDepth + 1);
  std::vector<std::vector<JsonValue::Member>> member_scratch_ =
      std::vector<std::vector<JsonValue::Member>>(kMaxJsonDepth + 1);
};

JsonValue JsonValue::boolean(bool b) {
  JsonValue v;
  v.v_ = b;
  return v;
}

JsonValue JsonValue::number(double d) {
  Number n;
  n.value = d;
  if (std::isfinite(d)) {
    char buf[32];  // the shortest round-trip form of a double needs at most 24
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
    assert(ec == std::errc());
    n.text.assign(buf, end);
  } else {
    n.text = "null";
  }
  JsonValue v;
  v.v_ = std::move(n);
  return v;
}

JsonValue JsonValue::integer(int64_t i) {
  Number n;
  n.value = static_cast<double>(i);
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, i);
  assert(ec == std::errc());
  n.text.assign(buf, end);
  JsonValue v;
  v.v_ = std::move(n);
  return v;
}

JsonValue JsonValue::string(std::string s) {
  JsonValue v;
  v.v_ = std::move(s);
  return v;
}

JsonValue JsonValue::array(std::vector<JsonValue> items) {
  JsonValue v;
  v.v_ = std::move(items);
  return v;
}

JsonValue JsonValue::object(std::vector<Member> members) {
  JsonValue v;
  v.v_ = std::move(members);
  return v;
}

bool JsonValue::as_bool() const {
  assert(is_bool());
  return std::get<bool>(v_);
}

double JsonValue::as_number() const {
  assert(is_number());
  return std::get<Number>(v_).value;
}

std::optional<int64_t> JsonValue::as_int() const {
  const Number* n = std::get_if<Number>(&v_);
  if (n == nullptr) return std::nullopt;
  // from_chars stops at '.', 'e' or "null", which the end check rejects.
  const char* const first = n->text.data();
  const char* const last = first + n->text.size();
  int64_t i = 0;
  const auto [end, ec] = std::from_chars(first, last, i);
  if (ec != std::errc() || end != last) return std::nullopt;
  return i;
}

const std::string& JsonValue::as_string() const {
  assert(is_string());
  return std::get<std::string>(v_);
}

const std::vector<JsonValue>& JsonValue::items() const {
  assert(is_array());
  return std::get<std::vector<JsonValue>>(v_);
}

std::vector<JsonValue>& JsonValue::items() {
  assert(is_array());
  return std::get<std::vector<JsonValue>>(v_);
}

const std::vector<JsonValue::Member>& JsonValue::members() const {
  assert(is_object());
  return std::get<std::vector<Member>>(v_);
}

std::vector<JsonValue::Member>& JsonValue::members() {
  assert(is_object());
  return std::get<std::vector<Member>>(v_);
}

const JsonValue* JsonValue::find(std::string_view key) const {
  const auto* members = std::get_if<std::vector<Member>>(&v_);
  if (members == nullptr) return nullptr;
  for (const Member& m : *members) {
    if (m.first == key) return &m.second;
  }
  return nullptr;
}

JsonValue* JsonValue::find(std::string_view key) {
  return const_cast<JsonValue*>(std::as_const(*this).find(key));
}

void JsonValue::set(std::string key, JsonValue value) {
  if (JsonValue* existing = find(key)) {
    *existing = std::move(value);
    return;
  }
  members().emplace_back(std::move(key), std::move(value));
}

StatusOr<JsonValue> parse_json(std::string_view text, const std::string& what) {
  return JsonParser(text, what).parse();
}

void append_json(std::string& out, const JsonValue& v) {
  switch (v.kind()) {
    case JsonValue::Kind::kNull: out += "null"; return;
    case JsonValue::Kind::kBool: out += v.as_bool() ? "true" : "false"; return;
    case JsonValue::Kind::kNumber: out += std::get<JsonValue::Number>(v.v_).text; return;
    case JsonValue::Kind::kString: append_json_string(out, v.as_string()); return;
    case JsonValue::Kind::kArray: {
      out += '[';
      bool first = true;
      for (const JsonValue& item : v.items()) {
        if (!first) out += ',';
        first = false;
        append_json(out, item);
      }
      out += ']';
      return;
    }
    case JsonValue::Kind::kObject: {
      out += '{';
      bool first = true;
      for (const auto& [key, value] : v.members()) {
        if (!first) out += ',';
        first = false;
        append_json_string(out, key);
        out += ':';
        append_json(out, value);
      }
      out += '}';
      return;
    }
  }
}

}  // namespace chorus
