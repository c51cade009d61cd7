// The runtime's set-up on the background thread: the world, the clocks and the timeline, the
// rank map and binding, the host's board, and the global process set (core/set_table.h
// makes it, and the others as responses create them). Collective over every rank, in the
// same order everywhere.

#include <string>
#include <vector>

#include "base/logging.h"
#include "collectives/gpu_build.h"
#include "collectives/hierarchical_allreduce.h"
#include "core/init_agreement.h"
#include "core/runtime.h"
#include "topology/binding.h"
#include "topology/launcher_view.h"

namespace chorus {

// Each step's outcome is agreed (core/init_agreement.h), so that every rank fails together
// where one does, instead of the others waiting in the next collective call. The steps that
// only some ranks take (the timeline, on rank 0 or on every rank) come first, agreed with the
// settings. Every rank's clock is measured against rank 0's first, for the timelines.
Status Runtime::setup(const WorldFactory& make_world) {
  StatusOr<std::unique_ptr<World>> world = make_world(WorldOptions{config_.host_algorithm});
  if (!world.ok()) return world.status();
  world_ = std::move(world).value();
  rank_ = world_->rank();
  size_ = world_->size();
  configure_logging(rank_, config_.log_level);
  log().debug("config: {}", config_.describe());
  // The HOROVOD_* variables of a job script that Chorus reads otherwise than by their value,
  // or not at all: once per job, at info level (none changes a result; the ranks share one
  // environment).
  if (rank_ == 0) {
    for (const std::string& note : config_.horovod_notes) log().info("{}", note);
  }
  if (nccl_compiled_version_code() != 0) log().debug("built with {}", nccl_version_string());
  StatusOr<ClockOffset> clock = world_->clock_offset();
  observability_.start(rank_, clock.ok() ? *clock : ClockOffset{});
  if (Status s = agree(clock.status(), "measuring the clocks", {}); !s.ok()) return s;
  const Status local =
      observability_.open_initial_timeline(config_.timeline_path, config_.timeline_mark_cycles);
  if (Status s = agree(local, "opening the timeline", config_.agreed()); !s.ok()) return s;
  StatusOr<std::vector<std::string>> names = world_->host_names();
  if (!names.ok()) return names.status();
  if (Status s = agree(setup_topology(*names), "the topology", {}); !s.ok()) return s;
  if (Status s = agree(setup_doorbells(), "the host's board", {}); !s.ok()) return s;
  const SetTable::Rank made_of{world_.get(),      rank_,       &config_, &map_, &doorbells_,
                               &topology_groups_, &gpu_device_};
  if (Status s = agree(sets_.start(made_of), "the global process set", {}); !s.ok()) return s;
  return {};
}

// Every rank's outcome of `step` (and its settings) to every rank: the same verdict everywhere.
Status Runtime::agree(const Status& local, const std::string& step, const Settings& settings) {
  StatusOr<std::vector<std::string>> reports =
      world_->allgather(encode_init_report(local, settings));
  if (!reports.ok()) return reports.status();
  return decide_init(step, local, *reports);
}

// The rank map from every rank's host name, checked against the launcher's variables; the
// binding (CHORUS_BIND) of the process and of this, the background thread; and the local
// and cross groups when hierarchical collectives may use them.
Status Runtime::setup_topology(const std::vector<std::string>& names) {
  map_ = compute_rank_map(names, rank_);
  log().debug("{}", describe_rank(map_, rank_, size_));
  if (rank_ == 0) log().info("{}", format_host_table(map_, size_));
  LauncherCheck check = check_launcher_view(map_, rank_, size_, process_env());
  for (const std::string& w : check.warnings) log().warn("{}", w);
  for (const std::string& n : check.notes) log().debug("launcher check: {}", n);
  StatusOr<BindingResult> bound = apply_binding(config_.bind, map_);
  // A binding failure is this rank's alone: returning here would leave the others waiting
  // in the world-wide collectives below (the groups, the global set). Run unbound instead.
  if (!bound.ok()) {
    log().warn("CHORUS_BIND: binding failed, running unbound: {}", bound.status().to_string());
  } else if (bound->warning) {
    log().warn("{}", bound->message);
  } else {
    log().log(config_.bind == BindMode::kNone ? spdlog::level::debug : spdlog::level::info, "{}",
              bound->message);
  }
  // The hierarchical GPU allreduce needs them when asked for, and may choose itself on a
  // layout that allows it; the map is the same on every rank, so all build them or none.
  if (hierarchical_groups_needed(config_.hierarchical_allreduce, map_)) {
    StatusOr<TopologyGroups> groups = create_topology_groups(*world_, map_);
    if (!groups.ok()) return groups.status();
    topology_groups_ = std::move(groups).value();
  }
  return {};
}

// The host's shared doorbells, on every host with more than one rank (the map is the same on
// every rank, so all take part in the split or none).
Status Runtime::setup_doorbells() {
  bool shared_hosts = false;
  for (const std::vector<int>& host : map_.hosts) shared_hosts = shared_hosts || host.size() > 1;
  if (!shared_hosts) return {};
  StatusOr<std::unique_ptr<Group>> host = world_->split(map_.cross_rank, rank_);
  if (!host.ok()) return host.status();
  if (Status s = doorbells_.join_host((*host)->control()); !s.ok()) return s;
  return {};
}

}  // namespace chorus
