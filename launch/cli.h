#pragma once
// chorusrun's command line. Options come first; the first word that is not an option (or
// everything after "--") is the program and its arguments, passed on untouched.

#include <optional>
#include <string>
#include <vector>

#include "chorus/status.h"

namespace chorus::launch {

struct Cli {
  std::optional<int> np;
  std::optional<int> ppr;
  std::string host_list;
  std::string hostfile;
  std::string launcher = "auto";  ///< mpirun, srun or auto
  std::vector<std::string> launcher_args;
  std::string bind;  ///< --bind, empty when not given
  bool oversubscribe = false;
  bool gloo = false;  ///< start the ranks without MPI (launch/gloo_launch.h)
  bool dry_run = false;
  bool explain = false;
  bool help = false;
  bool version = false;
  bool check_build = false;
  bool check_job = false;  ///< run chorus-check-job on the layout instead of a program
  // Elastic supervision (launch/supervisor.h), on when any of these is given.
  std::optional<int> max_restarts;
  std::optional<int> min_np;
  std::optional<int> max_np;
  std::string host_discovery_script;
  bool elastic() const {
    return max_restarts || min_np || max_np || !host_discovery_script.empty();
  }
  std::vector<std::string> program;
};

StatusOr<Cli> parse_cli(const std::vector<std::string>& args);
const char* usage();

}  // namespace chorus::launch
