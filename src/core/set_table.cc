#include "core/set_table.h"

#include <string>
#include <vector>

#include "base/logging.h"

namespace chorus {

Status SetTable::start(const SetBuilder::Rank& rank) {
  rank_ = rank.rank;
  builder_.emplace(rank, observability_);
  std::vector<int> all(rank.world->size());
  for (int r = 0; r < rank.world->size(); ++r) all[r] = r;
  StatusOr<std::unique_ptr<SetState>> global = make(0, all);
  if (!global.ok()) return global.status();
  sets_[0] = std::move(global).value();
  return {};
}

StatusOr<std::unique_ptr<SetState>> SetTable::make(int32_t id, const std::vector<int>& ranks) {
  StatusOr<std::unique_ptr<SetState>> set = builder_->build(id, ranks);
  if (!set.ok()) return set;
  ProcessSets::Info info{static_cast<int>(ranks.size()), -1};
  for (int i = 0; i < static_cast<int>(ranks.size()); ++i) {
    if (ranks[i] == rank_) info.rank = i;
  }
  info_->add(id, info);
  return set;
}

// Process sets change at the end of a cycle, in response order, on every rank: creating
// one is a collective over the global communicator.
Status SetTable::apply_changes(const std::vector<Response>& changes) {
  SetState& global = *sets_.at(0);
  for (const Response& r : changes) {
    if (creates_process_set(r.op)) {
      std::vector<int> ranks(r.ranks.begin(), r.ranks.end());
      StatusOr<std::unique_ptr<SetState>> set = make(r.new_set_id, ranks);
      if (!set.ok()) return set.status();
      if (*set) sets_[r.new_set_id] = std::move(set).value();
      log().debug("process set {} created with {} ranks", r.new_set_id, ranks.size());
    } else {
      const int32_t id = r.target_set;
      auto it = sets_.find(id);
      if (it != sets_.end()) {
        SetState& gone = *it->second;
        while (!gone.entries.empty()) {
          finish(
              gone, gone.entries.any(),
              Status(StatusCode::kAborted, "process set " + std::to_string(id) + " was removed"));
        }
        sets_.erase(it);
      }
      info_->remove(id);
    }
    if (Entry* e = global.entries.find(r.name)) {
      // add_process_set's handle carries the new id; remove's, none.
      if (creates_process_set(r.op)) e->handle->value = r.new_set_id;
      finish(global, *e, Status());
    }
  }
  return {};
}

bool SetTable::pending() const {
  for (const auto& [id, set] : sets_) {
    if (set->negotiator->pending() > 0) return true;
  }
  return false;
}

// Takes the queue's entries into their sets. The entries of one submit (a grouped
// allreduce's members share a handle) are taken all or nothing. Their names were checked
// against those in flight at submit. The table owns each entry from here on; the negotiator
// reads the entry's request in place.
void SetTable::accept(std::vector<Entry>& fresh) {
  const Clock::time_point now = Clock::now();
  for (std::size_t begin = 0; begin < fresh.size();) {
    std::size_t end = begin + 1;
    while (end < fresh.size() && fresh[end].handle == fresh[begin].handle) ++end;
    auto it = sets_.find(fresh[begin].set_id);
    if (it == sets_.end() || !it->second) {
      const Status refused = invalid_argument("process set " + std::to_string(fresh[begin].set_id) +
                                              " was removed before the collective ran");
      for (std::size_t i = begin; i < end; ++i) release(fresh[i], refused);
    } else {
      for (std::size_t i = begin; i < end; ++i) {
        Entry* placed = it->second->entries.insert(fresh[i]);
        // submit() refused names in flight, so the table cannot hold this one; the name in
        // flight is the other entry's, and stays.
        if (!placed) {
          fresh[i].handle->finish(
              internal_error(duplicate_name(fresh[i].request, rank_).message()));
          continue;
        }
        it->second->negotiator->submit(placed->request, now);
      }
    }
    begin = end;
  }
}

Status SetTable::admit(Entry entry) {
  if (Status s = info_->claim({&entry, 1}, rank_); !s.ok()) return s;
  std::vector<Entry> one;
  one.push_back(std::move(entry));
  accept(one);
  return {};
}

void SetTable::finish(SetState& set, Entry& entry, const Status& status, Clock::time_point agreed) {
  observability_->finished(set.id, entry, agreed, status);
  release(entry, status);
  set.entries.erase(entry);
}

// The name leaves the names in flight before the handle completes: a thread that sees it
// done may submit the name again at once.
void SetTable::release(Entry& entry, const Status& status) {
  info_->release(entry);
  entry.handle->finish(status);
}

void SetTable::close(const Status& status, bool abandon) {
  for (auto& [id, set] : sets_) {
    while (!set->entries.empty()) finish(*set, set->entries.any(), status);
  }
  if (abandon) {
    for (auto& [id, set] : sets_) set->executor->abandon_device(status);
  }
  sets_.clear();
}

}  // namespace chorus
