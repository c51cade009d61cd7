#include "explain.h"

#include <algorithm>
#include <sstream>

namespace chorus::launch {

std::string format_explain(const Plan& plan, BindMode mode, const std::optional<CpuLayout>& cores,
                           const std::string& source) {
  std::ostringstream out;
  out << plan.np << " rank(s) on " << plan.hosts.size() << " host(s) from " << source << ", "
      << (plan.ppr ? "ppr:" + std::to_string(plan.ppr) + ":node" : std::string("uneven"))
      << ", CHORUS_BIND=" << bind_mode_name(mode);
  if (mode != BindMode::kNone && cores) {
    out << " (CPUs planned on this host's " << cores->cores.size() << " core(s), "
        << cores->numa_count() << " NUMA node(s))";
  }
  out << "\n";
  std::size_t width = 4;
  for (const Placement& p : plan.hosts) width = std::max(width, p.host.size());
  out << "host" << std::string(width - 4 + 2, ' ') << "rank  local_rank  cpus\n";
  for (const Placement& p : plan.hosts) {
    for (int l = 0; l < p.ranks; ++l) {
      std::string cpus = "(not bound by Chorus)";
      if (mode != BindMode::kNone && !cores) cpus = "(unknown: hwloc could not read this host)";
      if (mode != BindMode::kNone && cores) {
        StatusOr<CpuPlan> c = plan_cpus(*cores, mode, l, p.ranks);
        cpus = c.ok() ? c->describe : "(not bound: " + c.status().message() + ")";
      }
      std::string rank = std::to_string(p.first_rank + l);
      std::string local = std::to_string(l);
      out << p.host << std::string(width - p.host.size() + 2, ' ') << rank
          << std::string(rank.size() < 6 ? 6 - rank.size() : 1, ' ') << local
          << std::string(local.size() < 12 ? 12 - local.size() : 1, ' ') << cpus << "\n";
    }
  }
  return out.str();
}

}  // namespace chorus::launch
