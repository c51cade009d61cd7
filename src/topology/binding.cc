#include "topology/binding.h"

#include <cstdlib>

#include "base/logging.h"
#include "topology/hwloc_binding.h"

namespace chorus {

StatusOr<BindingResult> apply_binding(BindMode mode, const RankMap& map) {
  // CUDA's own variable, read where it is used, like the launcher variables of
  // launcher_view.cc: it is not a Chorus setting, so it is not in Config.
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  return apply_binding(mode, map, visible ? std::optional<std::string>(visible) : std::nullopt);
}

StatusOr<BindingResult> apply_binding(BindMode mode, const RankMap& map,
                                      const std::optional<std::string>& cuda_visible_devices) {
  BindingResult result;
  const std::string who =
      "local rank " + std::to_string(map.local_rank) + "/" + std::to_string(map.local_size);
  if (mode == BindMode::kNone) {
    // The launcher's binding is only reported, at debug level; loading the topology to read
    // it walks sysfs, which every init would pay for a line nobody sees.
    if (!log().should_log(spdlog::level::debug)) return result;
    StatusOr<HwlocTopology> topo = HwlocTopology::load();
    StatusOr<std::vector<int>> now =
        topo.ok() ? topo->this_thread_binding() : StatusOr<std::vector<int>>(topo.status());
    result.message = "binding: none (CHORUS_BIND=none), " + who + " runs on PUs " +
                     (now.ok() ? format_cpu_list(*now) : "? (" + now.status().message() + ")") +
                     " as the launcher left it";
    return result;
  }
  StatusOr<HwlocTopology> topo = HwlocTopology::load();
  if (!topo.ok()) return topo.status();
  StatusOr<CpuLayout> host = topo->cpu_layout();
  if (!host.ok()) return host.status();
  const VisibleGpus visible =
      visible_gpus(cuda_visible_devices, static_cast<int>(host->gpus.size()));
  if (!visible.note.empty() && !host->gpus.empty()) log().warn("binding: {}", visible.note);
  const CpuLayout layout = select_gpus(*host, visible.order);
  StatusOr<CpuPlan> plan = plan_cpus(layout, mode, map.local_rank, map.local_size);
  if (!plan.ok()) {
    if (plan.status().code() != StatusCode::kFailedPrecondition) return plan.status();
    result.warning = true;
    result.message = plan.status().message() + "; not binding " + who;
    return result;
  }
  const std::string gpu = plan->gpu >= 0 ? ", GPU " + describe_gpu(layout, plan->gpu) : "";
  if (Status s = topo->bind_process(plan->pus); !s.ok()) return s;
  if (Status s = topo->bind_this_thread(plan->thread_pus); !s.ok()) return s;
  result.bound = true;
  result.message = std::string("binding: CHORUS_BIND=") + kBindWords.name(mode) + ", " + who +
                   " -> " + plan->describe + gpu + ", background thread chorus-bg -> PUs " +
                   format_cpu_list(plan->thread_pus);
  return result;
}

}  // namespace chorus
