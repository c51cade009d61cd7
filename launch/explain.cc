#include "explain.h"

#include <algorithm>
#include <sstream>
#include <vector>

namespace chorus::launch {

std::string format_explain(const Plan& plan, BindMode mode, const std::optional<CpuLayout>& host,
                           const std::string& source,
                           const std::optional<std::string>& cuda_visible_devices) {
  std::optional<CpuLayout> cores;
  VisibleGpus visible;
  if (host) {
    visible = visible_gpus(cuda_visible_devices, static_cast<int>(host->gpus.size()));
    cores = select_gpus(*host, visible.order);
  }
  const bool gpus = cores && !cores->gpus.empty();
  std::ostringstream out;
  out << plan.np << " rank(s) on " << plan.hosts.size() << " host(s) from " << source << ", "
      << (plan.ppr ? "ppr:" + std::to_string(plan.ppr) + ":node" : std::string("uneven"))
      << ", CHORUS_BIND=" << kBindWords.name(mode);
  if (mode != BindMode::kNone && cores) {
    out << " (CPUs planned on this host's " << cores->cores.size() << " core(s), "
        << cores->numa_count() << " NUMA node(s)" << (gpus ? ", next to each rank's GPU" : "")
        << ")";
  }
  if (gpus) {
    out << "; " << cores->gpus.size() << " GPU(s) on this host, local rank r uses cuda:(r mod "
        << cores->gpus.size() << ")";
  }
  out << "\n";
  if (host && !host->gpus.empty() && !visible.note.empty()) out << "note: " << visible.note << "\n";

  struct Row {
    std::string host, rank, local, cpus, gpu;
  };
  std::vector<Row> rows;
  for (const Placement& p : plan.hosts) {
    for (int l = 0; l < p.ranks; ++l) {
      Row row{p.host, std::to_string(p.first_rank + l), std::to_string(l), "(not bound by Chorus)",
              ""};
      if (mode != BindMode::kNone && !cores) {
        row.cpus = "(unknown: hwloc could not read this host)";
      }
      if (mode != BindMode::kNone && cores) {
        StatusOr<CpuPlan> c = plan_cpus(*cores, mode, l, p.ranks);
        row.cpus = c.ok() ? c->describe : "(not bound: " + c.status().message() + ")";
      }
      if (gpus) row.gpu = describe_gpu(*cores, gpu_of(*cores, l));
      rows.push_back(row);
    }
  }
  std::size_t width = 4, cpus_width = 4;
  for (const Row& r : rows) {
    width = std::max(width, r.host.size());
    cpus_width = std::max(cpus_width, r.cpus.size());
  }
  auto pad = [](const std::string& s, std::size_t to) {
    return s + std::string(s.size() < to ? to - s.size() : 1, ' ');
  };
  std::string header = pad("host", width + 2) + "rank  local_rank  cpus";
  if (gpus) header = pad(header, width + 2 + 18 + cpus_width + 2) + "gpu";
  out << header << "\n";
  for (const Row& r : rows) {
    std::string line = pad(r.host, width + 2) + pad(r.rank, 6) + pad(r.local, 12) + r.cpus;
    if (gpus) line = pad(line, width + 2 + 18 + cpus_width + 2) + r.gpu;
    out << line << "\n";
  }
  return out.str();
}

}  // namespace chorus::launch
