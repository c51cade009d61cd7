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
namespace {

// Every rank's outcome of `step` (and its settings) to every rank: the same verdict everywhere.
Status agree(World& world, const Status& local, const std::string& step,
             const Settings& settings = {}) {
  StatusOr<std::vector<std::string>> reports = world.allgather(encode_init_report(local, settings));
  if (!reports.ok()) return reports.status();
  return decide_init(step, local, *reports);
}

// The rank map from every rank's host name, checked against the launcher's variables; the
// binding (CHORUS_BIND) of the process and of this, the background thread; and the local
// and cross groups when hierarchical collectives may use them.
Status setup_topology(World& world, const Config& config, const std::vector<std::string>& names,
                      RankMap* map_out, TopologyGroups* groups) {
  const int rank = world.rank();
  const int size = world.size();
  *map_out = compute_rank_map(names, rank);
  const RankMap& map = *map_out;
  log().debug("{}", describe_rank(map, rank, size));
  if (rank == 0) log().info("{}", format_host_table(map, size));
  LauncherCheck check = check_launcher_view(map, rank, size, process_env());
  for (const std::string& w : check.warnings) log().warn("{}", w);
  for (const std::string& n : check.notes) log().debug("launcher check: {}", n);
  StatusOr<BindingResult> bound = apply_binding(config.bind, map);
  // A binding failure is this rank's alone: returning here would leave the others waiting
  // in the world-wide collectives below (the groups, the global set). Run unbound instead.
  if (!bound.ok()) {
    log().warn("CHORUS_BIND: binding failed, running unbound: {}", bound.status().to_string());
  } else if (bound->warning) {
    log().warn("{}", bound->message);
  } else {
    log().log(config.bind == BindMode::kNone ? spdlog::level::debug : spdlog::level::info, "{}",
              bound->message);
  }
  // The hierarchical GPU allreduce needs them when asked for, and may choose itself on a
  // layout that allows it; the map is the same on every rank, so all build them or none.
  if (hierarchical_groups_needed(config.hierarchical_allreduce, map)) {
    StatusOr<TopologyGroups> made = create_topology_groups(world, map, config.shared_memory);
    if (!made.ok()) return made.status();
    *groups = std::move(made).value();
  }
  return {};
}

// The host's shared doorbells, on every host with more than one rank (the map is the same on
// every rank, so all take part in the split or none).
Status setup_doorbells(World& world, const RankMap& map, Doorbells* doorbells) {
  bool shared_hosts = false;
  for (const std::vector<int>& host : map.hosts) shared_hosts = shared_hosts || host.size() > 1;
  if (!shared_hosts) return {};
  StatusOr<std::unique_ptr<Group>> host = world.split(map.cross_rank, world.rank());
  if (!host.ok()) return host.status();
  return doorbells->join_host((*host)->control());
}

}  // namespace

// Each step's outcome is agreed (core/init_agreement.h), so that every rank fails together
// where one does, instead of the others waiting in the next collective call. The steps that
// only some ranks take (the timeline, on rank 0 or on every rank) come first, agreed with the
// settings. Every rank's clock is measured against rank 0's first, for the timelines.
Status Runtime::setup(const WorldFactory& make_world) {
  StatusOr<std::unique_ptr<World>> world =
      make_world(WorldOptions{config_.host_algorithm, config_.liveness_seconds});
  if (!world.ok()) return world.status();
  world_ = std::move(world).value();
  const int rank = world_->rank();
  configure_logging(rank, config_.log_level);
  log().debug("config: {}", config_.describe());
  // The HOROVOD_* variables of a job script that Chorus reads otherwise than by their value,
  // or not at all: once per job, at info level (none changes a result; the ranks share one
  // environment).
  if (rank == 0) {
    for (const std::string& note : config_.horovod_notes) log().info("{}", note);
  }
  if (nccl_compiled_version_code() != 0) log().debug("built with {}", nccl_version_string());
  if (rank == 0) {
    log().info("the job's world: {}, {} ranks (CHORUS_CONTROLLER)",
               kControllerWords.name(config_.controller), world_->size());
  }
  StatusOr<ClockOffset> clock = world_->clock_offset();
  observability_.start(rank, clock.ok() ? *clock : ClockOffset{});
  if (Status s = agree(*world_, clock.status(), "measuring the clocks"); !s.ok()) return s;
  const Status local =
      observability_.open_initial_timeline(config_.timeline_path, config_.timeline_mark_cycles);
  if (Status s = agree(*world_, local, "opening the timeline", config_.agreed()); !s.ok()) {
    return s;
  }
  StatusOr<std::vector<std::string>> names = world_->host_names();
  if (!names.ok()) return names.status();
  if (Status s = agree(*world_, setup_topology(*world_, config_, *names, &map_, &topology_groups_),
                       "the topology");
      !s.ok()) {
    return s;
  }
  if (Status s = agree(*world_, setup_doorbells(*world_, map_, &doorbells_), "the host's board");
      !s.ok()) {
    return s;
  }
  const SetBuilder::Rank made_of{world_.get(),      rank,        &config_, &map_, &doorbells_,
                                 &topology_groups_, &gpu_device_};
  if (Status s = agree(*world_, sets_.start(made_of), "the global process set"); !s.ok()) {
    return s;
  }
  return {};
}

}  // namespace chorus
