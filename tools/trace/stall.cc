#include "stall.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "base/json_value.h"
#include "protocol/stall_classes.h"
#include "trace_events.h"

namespace chorus::trace {
namespace {

struct Outstanding {
  std::string name;
  OpType op = OpType::kAllreduce;
  int64_t submitted_us = 0;
};

// What one rank's record says.
struct RankRecord {
  int rank = -1;
  int64_t time_us = 0;
  int64_t last_submit_us = 0;  // 0: none in the record
  std::map<int32_t, std::vector<int>> sets;
  std::map<int32_t, std::vector<Outstanding>> outstanding;  // by set
};

OpType op_named(const std::string& name) {
  for (int i = 0; i < kNumOpTypes; ++i) {
    const auto op = static_cast<OpType>(i);
    if (name == op_type_name(op)) return op;
  }
  return OpType::kAllreduce;
}

StatusOr<RankRecord> read_record(const std::string& path) {
  StatusOr<std::string> text = read_text(path);
  if (!text.ok()) return text.status();
  StatusOr<JsonValue> doc = parse_json(*text, path);
  if (!doc.ok()) return doc.status();
  const JsonValue* rank = doc->find("rank");
  const JsonValue* sets = doc->find("sets");
  const JsonValue* records = doc->find("records");
  const JsonValue* outstanding = doc->find("outstanding");
  if (rank == nullptr || !rank->as_int() || sets == nullptr || !sets->is_array() ||
      records == nullptr || !records->is_array() || outstanding == nullptr ||
      !outstanding->is_array()) {
    return invalid_argument(path +
                            ": not a Chorus flight record (rank, sets, records, outstanding)");
  }
  RankRecord r;
  r.rank = static_cast<int>(*rank->as_int());
  r.time_us = integer_member(*doc, "time_us");
  for (const JsonValue& s : sets->items()) {
    std::vector<int>& members = r.sets[static_cast<int32_t>(integer_member(s, "id"))];
    if (const JsonValue* ranks = s.find("ranks"); ranks != nullptr && ranks->is_array()) {
      for (const JsonValue& m : ranks->items())
        members.push_back(static_cast<int>(m.as_int().value_or(-1)));
    }
  }
  for (const JsonValue& rec : records->items()) {
    r.last_submit_us = std::max(r.last_submit_us, integer_member(rec, "submitted_us"));
  }
  for (const JsonValue& o : outstanding->items()) {
    Outstanding out{string_member(o, "name"), op_named(string_member(o, "op")),
                    integer_member(o, "submitted_us")};
    r.last_submit_us = std::max(r.last_submit_us, out.submitted_us);
    r.outstanding[static_cast<int32_t>(integer_member(o, "set"))].push_back(std::move(out));
  }
  return r;
}

// The view of one set from its members' records, as the coordinator would have it.
StallView view_of(const std::vector<int>& members, const std::map<int, RankRecord>& records,
                  int32_t set) {
  StallView v;
  v.size = static_cast<int>(members.size());
  v.outstanding.resize(members.size());
  v.idle_seconds.assign(members.size(), -1);
  std::map<std::string, StallView::Stuck> by_name;
  int64_t now_us = 0;
  for (const auto& [rank, r] : records) now_us = std::max(now_us, r.time_us);
  for (std::size_t i = 0; i < members.size(); ++i) {
    auto it = records.find(members[i]);
    if (it == records.end()) continue;
    const RankRecord& r = it->second;
    if (r.last_submit_us > 0) v.idle_seconds[i] = (r.time_us - r.last_submit_us) / 1e6;
    auto mine = r.outstanding.find(set);
    if (mine == r.outstanding.end()) continue;
    for (const Outstanding& o : mine->second) {
      v.outstanding[i].push_back(o.name);
      StallView::Stuck& s = by_name[o.name];
      if (s.submitted.empty()) {
        s.name = o.name;
        s.op = o.op;
        s.submitted.assign(members.size(), false);
      }
      s.submitted[i] = true;
      s.waited_seconds = std::max(s.waited_seconds, (now_us - o.submitted_us) / 1e6);
    }
  }
  for (auto& [name, s] : by_name) {
    if (std::count(s.submitted.begin(), s.submitted.end(), false) > 0)
      v.stuck.push_back(std::move(s));
  }
  return v;
}

}  // namespace

StatusOr<StallReport> stall_report(const std::string& dir) {
  std::map<int, RankRecord> records;
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string file = it->path().filename().string();
    if (!file.starts_with("chorus-flight.rank") || !file.ends_with(".json")) continue;
    StatusOr<RankRecord> r = read_record(it->path().string());
    if (!r.ok()) return r.status();
    records[r->rank] = std::move(r).value();
  }
  if (ec) return invalid_argument(dir + ": cannot list: " + ec.message());
  if (records.empty()) {
    return invalid_argument(dir +
                            ": no flight records (chorus-flight.rank<R>.json); Chorus writes "
                            "them to CHORUS_DEBUG_DIR on a stall, a failure, SIGUSR1 or an "
                            "aborting shutdown");
  }
  StallReport report;
  std::map<int32_t, std::vector<int>> sets;
  for (const auto& [rank, r] : records) {
    report.ranks_with_records.push_back(rank);
    for (const auto& [id, members] : r.sets) sets.emplace(id, members);
  }
  std::set<int> missing;
  for (const auto& [id, members] : sets) {
    for (int m : members) {
      if (!records.count(m)) missing.insert(m);
    }
    for (const StallFinding& f : classify_stalls(view_of(members, records, id))) {
      report.lines.push_back(
          (id == 0 ? std::string() : "process set " + std::to_string(id) + ": ") + f.line);
      if (report.exit_status == 0) report.exit_status = stall_exit_status(f.cls);
    }
  }
  report.ranks_without_records.assign(missing.begin(), missing.end());
  return report;
}

std::string stall_text(const StallReport& report) {
  std::string out =
      "flight records of " + std::to_string(report.ranks_with_records.size()) + " rank(s)";
  if (!report.ranks_without_records.empty()) {
    out += "; none from rank(s)";
    for (int r : report.ranks_without_records) out += " " + std::to_string(r);
  }
  out += "\n";
  if (report.lines.empty()) return out + "no stuck collectives in them\n";
  for (const std::string& line : report.lines) out += line + "\n";
  out += "(a job that CHORUS_STALL_SHUTDOWN_SECONDS ends for this exits with status " +
         std::to_string(report.exit_status) + ")\n";
  return out;
}

}  // namespace chorus::trace
