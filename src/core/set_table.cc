#include "core/set_table.h"

#include <string>
#include <vector>

#include "base/logging.h"
#include "collectives/hierarchical_allreduce.h"
#include "collectives/shm/shm_backend.h"
#include "core/host_rounds.h"

namespace chorus {

Status SetTable::start(const Rank& rank) {
  rank_ = rank;
  std::vector<int> all(rank_.world->size());
  for (int r = 0; r < rank_.world->size(); ++r) all[r] = r;
  StatusOr<std::unique_ptr<SetState>> global = make(0, all);
  if (!global.ok()) return global.status();
  sets_[0] = std::move(global).value();
  return {};
}

StatusOr<std::unique_ptr<SetState>> SetTable::make(int32_t id, const std::vector<int>& ranks) {
  const Config& config = *rank_.config;
  const RankMap& map = *rank_.map;
  StatusOr<std::unique_ptr<Group>> group = rank_.world->create_group(ranks);
  if (!group.ok()) return group.status();
  ProcessSets::Info info{static_cast<int>(ranks.size()), -1};
  for (int i = 0; i < static_cast<int>(ranks.size()); ++i) {
    if (ranks[i] == rank_.rank) info.rank = i;
  }
  info_->add(id, info);
  if (!*group) return std::unique_ptr<SetState>();
  auto set = std::make_unique<SetState>();
  set->id = id;
  set->ranks = ranks;
  set->group = std::move(group).value();
  NegotiatorOptions nopts{config.cache_capacity, config.stall_check_seconds,
                          config.stall_shutdown_seconds, config.liveness_seconds};
  set->control = &set->group->control();
  // A round finished on the transport's own thread ends the cycle's wait for it (Gloo's).
  set->control->on_round_done([doorbells = rank_.doorbells] { doorbells->ring_round(); });
  const std::string label = id == 0 ? "global" : "set " + std::to_string(id);
  // A set on one host reduces through shared memory unless CHORUS_SHARED_MEMORY=0. The map
  // and the setting are the same on every rank, so all its members join or none.
  if (ranks.size() > 1 && map.one_host(ranks)) {
    StatusOr<std::unique_ptr<Backend>> shared =
        shared_memory_provider(*set->group, config.shared_memory, label);
    if (!shared.ok()) return shared.status();
    set->shared_memory = std::move(shared).value();
  }
  // The global set of a job on one host runs its rounds on the host's board.
  if (id == 0 && map.cross_size == 1 && rank_.doorbells->shared()) {
    set->host_rounds = std::make_unique<HostRounds>(set->control, rank_.doorbells);
    set->control = set->host_rounds.get();
  }
  set->negotiator = std::make_unique<Negotiator>(set->control, nopts, label);
  Backend* own = &set->group->backend();
  BackendChoice host(label, own, "the set's own communicator");
  if (set->shared_memory) host.prefer(set->shared_memory.get(), "every member runs on this host");
  if (id == 0 && map.cross_size > 1) {
    std::string why;
    if (use_hierarchical_host_allreduce(config.hierarchical_allreduce, true, map, &why)) {
      // hierarchical_groups_needed() asked for the groups wherever this holds.
      if (!rank_.topology_groups->local) return internal_error("the hierarchy has no local group");
      StatusOr<std::unique_ptr<HierarchicalBackend>> h = HierarchicalBackend::create(
          own, rank_.topology_groups->local_host.get(), &rank_.topology_groups->cross->backend());
      if (!h.ok()) return h.status();
      set->hierarchical_host = std::move(h).value();
      host.prefer(set->hierarchical_host.get(), why);
    } else {
      log().debug("{}: flat host-memory allreduce across hosts: {}", label, why);
    }
  }
  set->executor = std::make_unique<Executor>(
      std::move(host), static_cast<std::size_t>(config.fusion_threshold_for(!map.one_host(ranks))),
      observability_->timeline());
  GpuContextSetup gpu;
  gpu.label = label;
  gpu.global_set = id == 0;
  gpu.hierarchical_requested = config.hierarchical_allreduce;
  gpu.requested_backend = config.gpu_backend;
  if (id == 0) gpu.groups = rank_.topology_groups;
  gpu.map = &map;
  gpu.device = rank_.gpu_device;
  gpu.local_rank = map.local_rank;
  gpu.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::duration<double>(config.gpu_timeout_seconds));
  gpu.shared_gpu_nccl = config.test_shared_gpu;
  gpu.ranks = ranks;
  set->executor->set_gpu_setup(gpu);
  set->executor->set_injected_failure(config.test_fail_collective, config.test_fail_part);
  set->executor->set_verdicts(set->control, set->host_rounds.get(), config.liveness_seconds,
                              config.gpu_timeout_seconds, label, ranks);
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
              internal_error(duplicate_name(fresh[i].request, rank_.rank).message()));
          continue;
        }
        it->second->negotiator->submit(placed->request, now);
      }
    }
    begin = end;
  }
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
