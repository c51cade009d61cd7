#pragma once
// Host lists as users and schedulers write them, parsed into (host, slots) pairs in order:
//   -H a:4,b:4            hosts with slot counts (a bare name has one slot)
//   --hostfile FILE       "name slots=N", "name:N" or "name" lines (a repeated name adds up)
//   $PE_HOSTFILE (SGE, ABCI)   "name slots queue processors" lines
//   $PBS_NODEFILE (PBS)        one name per line, repeated once per slot
// Errors say which source and which entry are wrong.

#include <string>
#include <vector>

#include "chorus/status.h"

namespace chorus::launch {

struct Host {
  std::string name;
  int slots = 1;
  bool operator==(const Host&) const = default;
};

/// A host name as it may reach mpirun or srun: not empty, no whitespace or list syntax.
Status check_host_name(const std::string& name, const std::string& where);

StatusOr<std::vector<Host>> parse_host_list(const std::string& list);
StatusOr<std::vector<Host>> parse_hostfile(const std::string& text, const std::string& source);
StatusOr<std::vector<Host>> parse_pe_hostfile(const std::string& text, const std::string& source);
StatusOr<std::vector<Host>> parse_pbs_nodefile(const std::string& text, const std::string& source);

/// "a:4,b:4", the form mpirun's -H takes.
std::string format_host_list(const std::vector<Host>& hosts);

}  // namespace chorus::launch
