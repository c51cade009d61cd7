#include "plan.h"

namespace chorus::launch {
namespace {

std::string describe(const Allocation& a) {
  return a.source + " (" + format_host_list(a.hosts) + ")";
}

int total_slots(const Allocation& a) {
  int n = 0;
  for (const Host& h : a.hosts) n += h.slots;
  return n;
}

}  // namespace

StatusOr<Plan> make_plan(const Allocation& a, const PlanRequest& req) {
  if (req.np && *req.np < 1) return invalid_argument("-np must be at least 1");
  if (req.ppr && *req.ppr < 1) return invalid_argument("--ppr must be at least 1");
  Plan plan;
  std::vector<int> counts(a.hosts.size(), 0);
  if (req.ppr) {
    const int k = *req.ppr;
    plan.np = req.np ? *req.np : k * static_cast<int>(a.hosts.size());
    if (plan.np % k != 0) {
      return invalid_argument("-np " + std::to_string(plan.np) + " is not a multiple of --ppr " +
                              std::to_string(k) + " (ranks per node)");
    }
    const int nodes = plan.np / k;
    if (nodes > static_cast<int>(a.hosts.size())) {
      return invalid_argument("-np " + std::to_string(plan.np) + " with --ppr " +
                              std::to_string(k) + " needs " + std::to_string(nodes) +
                              " hosts, but " + describe(a) + " has " +
                              std::to_string(a.hosts.size()));
    }
    for (int h = 0; h < nodes; ++h) {
      if (a.hosts[h].slots < k && !req.oversubscribe) {
        return invalid_argument("--ppr " + std::to_string(k) + " needs " + std::to_string(k) +
                                " slots on each host, but host '" + a.hosts[h].name + "' has " +
                                std::to_string(a.hosts[h].slots) + " in " + describe(a) +
                                "; pass --oversubscribe to run more ranks than slots");
      }
      counts[h] = k;
    }
  } else {
    const int slots = total_slots(a);
    plan.np = req.np ? *req.np : slots;
    if (plan.np > slots && !req.oversubscribe) {
      return invalid_argument("-np " + std::to_string(plan.np) + " is more than the " +
                              std::to_string(slots) + " slots of " + describe(a) +
                              "; pass --oversubscribe to run more ranks than slots");
    }
    // Fill the slots in host order (mpirun's default by-slot mapping); ranks beyond the
    // slots (--oversubscribe) go round-robin over the hosts.
    int left = plan.np;
    for (std::size_t h = 0; h < a.hosts.size() && left > 0; ++h) {
      counts[h] = std::min(left, a.hosts[h].slots);
      left -= counts[h];
    }
    for (std::size_t h = 0; left > 0; h = (h + 1) % a.hosts.size(), --left) ++counts[h];
    plan.fills_allocation = plan.np == slots;
  }
  int next = 0;
  for (std::size_t h = 0; h < a.hosts.size(); ++h) {
    if (counts[h] == 0) continue;
    plan.hosts.push_back({a.hosts[h].name, counts[h], next});
    next += counts[h];
  }
  plan.ppr = plan.hosts.front().ranks;
  for (const Placement& p : plan.hosts) {
    if (p.ranks != plan.ppr) plan.ppr = 0;
  }
  return plan;
}

}  // namespace chorus::launch
