#include "allocation.h"

#include "slurm_lists.h"

namespace chorus::launch {
namespace {

const std::string* lookup(const Env& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

StatusOr<Allocation> slurm_allocation(const Env& env, const std::string& list_var) {
  Allocation a;
  a.slurm = true;
  a.source = "Slurm (" + list_var + ")";
  StatusOr<std::vector<std::string>> names = expand_nodelist(env.at(list_var), list_var);
  if (!names.ok()) return names.status();
  std::vector<int> slots(names->size(), 1);
  for (const char* var : {"SLURM_TASKS_PER_NODE", "SLURM_JOB_CPUS_PER_NODE"}) {
    const std::string* v = lookup(env, var);
    if (!v) continue;
    StatusOr<std::vector<int>> counts = expand_counts(*v, var);
    if (!counts.ok()) return counts.status();
    if (counts->size() != names->size()) {
      return invalid_argument(std::string(var) + "='" + *v + "' gives " +
                              std::to_string(counts->size()) + " nodes but " + list_var + "='" +
                              env.at(list_var) + "' lists " + std::to_string(names->size()));
    }
    slots = *counts;
    a.slurm_tasks = std::string(var) == "SLURM_TASKS_PER_NODE";
    break;
  }
  for (std::size_t i = 0; i < names->size(); ++i) {
    if (Status s = check_host_name((*names)[i], list_var); !s.ok()) return s;
    a.hosts.push_back({(*names)[i], slots[i]});
  }
  return a;
}

using Parser = StatusOr<std::vector<Host>> (*)(const std::string&, const std::string&);

StatusOr<Allocation> file_allocation(const std::string& path, const std::string& source,
                                     Parser parse, const ReadFile& read) {
  StatusOr<std::string> text = read(path);
  if (!text.ok()) return Status(text.status().code(), source + ": " + text.status().message());
  StatusOr<std::vector<Host>> hosts = parse(*text, source);
  if (!hosts.ok()) return hosts.status();
  return Allocation{source, std::move(hosts).value(), false, false};
}

}  // namespace

StatusOr<Allocation> find_allocation(const AllocationQuery& query, const Env& env,
                                     const ReadFile& read) {
  const bool in_slurm = lookup(env, "SLURM_JOB_ID") || lookup(env, "SLURM_JOB_NODELIST");
  if (!query.host_list.empty()) {
    StatusOr<std::vector<Host>> hosts = parse_host_list(query.host_list);
    if (!hosts.ok()) return hosts.status();
    return Allocation{"-H", std::move(hosts).value(), in_slurm, false};
  }
  if (!query.hostfile.empty()) {
    StatusOr<Allocation> a =
        file_allocation(query.hostfile, "--hostfile " + query.hostfile, parse_hostfile, read);
    if (a.ok()) a->slurm = in_slurm;
    return a;
  }
  for (const char* var : {"SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    if (lookup(env, var)) return slurm_allocation(env, var);
  }
  if (const std::string* pe = lookup(env, "PE_HOSTFILE")) {
    return file_allocation(*pe, "SGE (PE_HOSTFILE=" + *pe + ")", parse_pe_hostfile, read);
  }
  if (const std::string* pbs = lookup(env, "PBS_NODEFILE")) {
    return file_allocation(*pbs, "PBS (PBS_NODEFILE=" + *pbs + ")", parse_pbs_nodefile, read);
  }
  return Allocation{"this host", {{query.local_host, query.local_slots}}, false, false};
}

}  // namespace chorus::launch
