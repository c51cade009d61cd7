#include "core/set_builder.h"

#include <chrono>
#include <string>
#include <utility>

#include "collectives/providers.h"

namespace chorus {

StatusOr<std::unique_ptr<SetState>> SetBuilder::build(int32_t id,
                                                      const std::vector<int>& ranks) const {
  const Config& config = *rank_.config;
  const RankMap& map = *rank_.map;
  StatusOr<std::unique_ptr<Group>> group = rank_.world->create_group(ranks);
  if (!group.ok()) return group.status();
  if (!*group) return std::unique_ptr<SetState>();
  auto set = std::make_unique<SetState>();
  set->id = id;
  set->ranks = ranks;
  set->group = std::move(group).value();
  const std::string label = id == 0 ? "global" : "set " + std::to_string(id);
  set->control = &set->group->control();
  // A round finished on the transport's own thread ends the cycle's wait for it (Gloo's).
  set->control->on_round_done([doorbells = rank_.doorbells] { doorbells->ring_round(); });
  // The global set of a job on one host runs its rounds on the host's board.
  if (id == 0 && map.cross_size == 1 && rank_.doorbells->shared()) {
    set->host_rounds = std::make_unique<HostRounds>(set->control, rank_.doorbells);
    set->control = set->host_rounds.get();
  }
  set->negotiator = std::make_unique<Negotiator>(
      set->control,
      NegotiatorOptions{config.cache_capacity, config.stall_check_seconds,
                        config.stall_shutdown_seconds, config.liveness_seconds},
      label);
  ProviderSet providers;
  providers.label = label;
  providers.ranks = ranks;
  providers.global_set = id == 0;
  providers.map = &map;
  providers.shared_memory = config.shared_memory;
  providers.hierarchical = config.hierarchical_allreduce;
  // hierarchical_groups_needed() asked for the groups wherever the hierarchy may run.
  if (id == 0) providers.groups = rank_.topology_groups;
  providers.group = set->group.get();
  StatusOr<BackendChoice> host = assemble(Memory::kHost, providers);
  if (!host.ok()) return host.status();
  // The autotuner (core/autotuner.h) may raise the global set's fusion limit up to its
  // largest candidate: the buffers are made that large, and the limit starts at the threshold.
  const int64_t threshold = config.fusion_threshold_for(!map.one_host(ranks));
  const int64_t capacity = config.autotune && id == 0
                               ? TuningCandidates::standard().largest_fusion({threshold})
                               : threshold;
  set->executor = std::make_unique<Executor>(
      std::move(host).value(), static_cast<std::size_t>(capacity), observability_->timeline());
  set->executor->set_fusion_limit(static_cast<std::size_t>(threshold));
  GpuContextSetup gpu;
  gpu.label = label;
  gpu.global_set = id == 0;
  gpu.hierarchical_requested = config.hierarchical_allreduce;
  gpu.requested_backend = config.gpu_backend;
  gpu.groups = providers.groups;
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

}  // namespace chorus
