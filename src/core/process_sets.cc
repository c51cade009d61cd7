#include "core/process_sets.h"

namespace chorus {

std::optional<ProcessSets::Info> ProcessSets::info(int32_t id) const {
  MutexLock lock(mu_);
  auto it = info_.find(id);
  if (it == info_.end()) return std::nullopt;
  return it->second;
}

void ProcessSets::add(int32_t id, Info info) {
  MutexLock lock(mu_);
  info_[id] = info;
}

void ProcessSets::remove(int32_t id) {
  MutexLock lock(mu_);
  info_.erase(id);
  in_flight_.erase(id);
}

Status ProcessSets::claim(std::span<const Entry> entries, int rank) {
  const int32_t set = entries.front().set_id;
  MutexLock lock(mu_);
  if (!info_.count(set)) {
    return invalid_argument("process set " + std::to_string(set) + " does not exist");
  }
  NameSet& names = in_flight_[set];
  if (entries.size() == 1) {
    if (!names.insert(entries[0].request.name)) return duplicate_name(entries[0].request, rank);
    return {};
  }
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Request& q = entries[i].request;
    bool twice = names.contains(q.name);
    for (std::size_t j = 0; j < i && !twice; ++j) twice = entries[j].request.name == q.name;
    if (twice) return duplicate_name(q, rank);
  }
  for (const Entry& e : entries) names.insert(e.request.name);
  return {};
}

void ProcessSets::release(const Entry& entry) {
  MutexLock lock(mu_);
  auto it = in_flight_.find(entry.set_id);
  if (it != in_flight_.end()) it->second.erase(entry.request.name);
}

std::string ProcessSets::generate_name(OpType op, int32_t set_id) {
  if (set_id == 0) {
    const uint64_t n = global_counters_[static_cast<int>(op)].fetch_add(1);
    return std::string("chorus.") + op_type_name(op) + "." + std::to_string(n);
  }
  uint64_t n;
  {
    MutexLock lock(mu_);
    n = set_counters_[set_id][static_cast<int>(op)]++;
  }
  return "chorus.set" + std::to_string(set_id) + "." + op_type_name(op) + "." + std::to_string(n);
}

std::string ProcessSets::members_set_name(const std::vector<int>& sorted_ranks,
                                          const std::string& purpose) {
  uint64_t n;
  {
    MutexLock lock(mu_);
    n = members_counters_[{purpose, sorted_ranks}]++;
  }
  return std::string("chorus.") + op_type_name(OpType::kAddProcessSetOfMembers) + "." +
         (purpose.empty() ? "" : purpose + ".") + ranks_string(sorted_ranks) + "." +
         std::to_string(n);
}

Status duplicate_name(const Request& q, int rank) {
  return invalid_argument(std::string(op_type_name(q.op)) + " '" + q.name +
                          "': a collective with this name is already in flight on rank " +
                          std::to_string(rank) +
                          "; names must be unique among in-flight collectives");
}

}  // namespace chorus
