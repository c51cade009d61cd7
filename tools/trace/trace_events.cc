#include "trace_events.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "base/file_io.h"

namespace chorus::trace {
namespace {

std::string arg_of(const JsonValue& event, std::string_view key) {
  const JsonValue* args = event.find("args");
  return args != nullptr ? string_member(*args, key) : std::string();
}

}  // namespace

StatusOr<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return invalid_argument(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return invalid_argument(path + ": cannot read");
  return text.str();
}

Status write_text(const std::string& path, const std::string& text) {
  if (int err = replace_file(path, text); err != 0) {
    return invalid_argument(path + ": cannot write: " + std::strerror(err));
  }
  return {};
}

std::string string_member(const JsonValue& object, std::string_view key) {
  const JsonValue* v = object.find(key);
  return v != nullptr && v->is_string() ? v->as_string() : std::string();
}

int64_t integer_member(const JsonValue& object, std::string_view key) {
  const JsonValue* v = object.find(key);
  if (v == nullptr || !v->is_number()) return 0;
  return v->as_int().value_or(static_cast<int64_t>(v->as_number()));
}

int pid_of(const JsonValue& event) {
  const JsonValue* pid = event.find("pid");
  if (pid == nullptr || !pid->is_number()) return -1;
  return static_cast<int>(pid->as_int().value_or(-1));
}

StatusOr<std::vector<JsonValue>> load_events(const std::vector<std::string>& paths) {
  std::vector<JsonValue> all;
  std::map<int, std::string> file_of_rank;
  for (const std::string& path : paths) {
    StatusOr<std::string> text = read_text(path);
    if (!text.ok()) return text.status();
    StatusOr<JsonValue> doc = parse_json(*text, path);
    if (!doc.ok()) return doc.status();
    if (!doc->is_array())
      return invalid_argument(path + ": not a timeline (a JSON array of events)");
    std::map<int, bool> here;
    for (JsonValue& event : doc->items()) {
      if (!event.is_object()) return invalid_argument(path + ": an event that is not an object");
      const int pid = pid_of(event);
      if (pid >= 0 && !here.count(pid)) {
        here[pid] = true;
        auto [it, fresh] = file_of_rank.emplace(pid, path);
        if (!fresh) {
          return invalid_argument("rank " + std::to_string(pid) + " is in both " + it->second +
                                  " and " + path + ": give each rank's timeline once");
        }
      }
      all.push_back(std::move(event));
    }
  }
  return all;
}

std::vector<Span> spans_of(const std::vector<JsonValue>& events) {
  std::map<std::pair<int, int64_t>, std::string> row_names;  // (pid, tid) -> tensor
  for (const JsonValue& e : events) {
    if (string_member(e, "ph") == "M" && string_member(e, "name") == "thread_name") {
      row_names[{pid_of(e), integer_member(e, "tid")}] = arg_of(e, "name");
    }
  }
  std::vector<Span> out;
  for (const JsonValue& e : events) {
    if (string_member(e, "ph") != "X") continue;
    Span s;
    s.rank = pid_of(e);
    const int64_t tid = integer_member(e, "tid");
    if (tid != 0) s.row = row_names[{s.rank, tid}];
    s.phase = string_member(e, "name");
    s.begin_us = integer_member(e, "ts");
    s.end_us = s.begin_us + integer_member(e, "dur");
    s.detail = arg_of(e, "detail");
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::vector<std::size_t>> negotiations(const std::vector<Span>& spans) {
  std::map<std::pair<std::string, long long>, std::size_t> group_of;  // (tensor, k) -> group
  std::vector<std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    long long k = 0;
    if (spans[i].phase != "NEGOTIATE" ||
        std::sscanf(spans[i].detail.c_str(), "collective %lld", &k) != 1) {
      continue;
    }
    auto [it, fresh] = group_of.emplace(std::make_pair(spans[i].row, k), groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  return groups;
}

std::size_t last_submitted(const std::vector<Span>& spans, const std::vector<std::size_t>& group) {
  std::size_t last = group.front();
  for (std::size_t i : group) {
    if (spans[i].begin_us > spans[last].begin_us) last = i;
  }
  return last;
}

}  // namespace chorus::trace
