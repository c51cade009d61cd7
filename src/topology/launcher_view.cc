#include "topology/launcher_view.h"

#include <cstdlib>
#include <sstream>

namespace chorus {
namespace {

enum class Field { kRank, kSize, kLocalRank, kLocalSize };

struct Variable {
  const char* name;
  Field field;
};

struct Launcher {
  const char* name;
  /// The variable holding the number of tasks the variables below describe; empty when
  /// the launcher has none (then they are always compared).
  const char* size_variable;
  std::vector<Variable> variables;
};

// Slurm: SLURM_STEP_NUM_TASKS is set by srun for the tasks of its step. A batch script's
// environment (and, through it, mpirun's ranks) lacks it or has the daemons' step, so the
// stale SLURM_PROCID/SLURM_LOCALID seen there are skipped rather than reported.
const std::vector<Launcher>& launchers() {
  static const std::vector<Launcher> kLaunchers = {
      {"Open MPI",
       "OMPI_COMM_WORLD_SIZE",
       {{"OMPI_COMM_WORLD_RANK", Field::kRank},
        {"OMPI_COMM_WORLD_LOCAL_RANK", Field::kLocalRank},
        {"OMPI_COMM_WORLD_LOCAL_SIZE", Field::kLocalSize}}},
      {"PMIx", "", {{"PMIX_RANK", Field::kRank}}},
      {"Slurm",
       "SLURM_STEP_NUM_TASKS",
       {{"SLURM_PROCID", Field::kRank}, {"SLURM_LOCALID", Field::kLocalRank}}},
      {"MPICH (Hydra)",
       "PMI_SIZE",
       {{"PMI_RANK", Field::kRank},
        {"MPI_LOCALRANKID", Field::kLocalRank},
        {"MPI_LOCALNRANKS", Field::kLocalSize}}},
      {"MVAPICH",
       "MV2_COMM_WORLD_SIZE",
       {{"MV2_COMM_WORLD_RANK", Field::kRank},
        {"MV2_COMM_WORLD_LOCAL_RANK", Field::kLocalRank},
        {"MV2_COMM_WORLD_LOCAL_SIZE", Field::kLocalSize}}},
  };
  return kLaunchers;
}

std::optional<long> parse_int(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  if (*end != '\0' || v < 0) return std::nullopt;
  return v;
}

const char* field_name(Field f) {
  switch (f) {
    case Field::kRank: return "rank";
    case Field::kSize: return "size";
    case Field::kLocalRank: return "local_rank";
    case Field::kLocalSize: return "local_size";
  }
  return "?";
}

int field_value(Field f, const RankMap& map, int rank, int size) {
  switch (f) {
    case Field::kRank: return rank;
    case Field::kSize: return size;
    case Field::kLocalRank: return map.local_rank;
    case Field::kLocalSize: return map.local_size;
  }
  return -1;
}

}  // namespace

LauncherCheck check_launcher_view(const RankMap& map, int rank, int size, const EnvLookup& env) {
  LauncherCheck check;
  const std::string where =
      "rank " + std::to_string(rank) + " is local rank " + std::to_string(map.local_rank) + " of " +
      std::to_string(map.local_size) + " on host '" + map.host_names.at(map.cross_rank) + "'";
  for (const Launcher& l : launchers()) {
    std::vector<Variable> vars = l.variables;
    if (*l.size_variable) {
      std::optional<std::string> sv = env(l.size_variable);
      if (!sv) {
        bool any = false;
        for (const Variable& v : vars) any = any || env(v.name).has_value();
        if (any) {
          check.notes.push_back(std::string(l.name) + ": " + l.size_variable +
                                " is not set, so its other variables are not compared");
        }
        continue;
      }
      std::optional<long> n = parse_int(*sv);
      if (n && *n != size) {
        check.notes.push_back(std::string(l.name) + ": " + l.size_variable + "=" + *sv +
                              " describes another job than these " + std::to_string(size) +
                              " ranks; its variables are not compared");
        continue;
      }
      vars.insert(vars.begin(), {l.size_variable, Field::kSize});
    }
    int agreeing = 0;
    for (const Variable& v : vars) {
      std::optional<std::string> value = env(v.name);
      if (!value) continue;
      std::optional<long> n = parse_int(*value);
      const int ours = field_value(v.field, map, rank, size);
      if (!n) {
        check.warnings.push_back(std::string("launcher variable ") + v.name + "='" + *value +
                                 "' is not a non-negative integer (" + l.name + ")");
      } else if (*n != ours) {
        std::ostringstream w;
        w << "launcher variable " << v.name << "=" << *value << " disagrees with "
          << field_name(v.field) << " " << ours << " computed from host names (" << where
          << "); Chorus uses " << ours << ", but anything reading " << v.name
          << " gets the wrong value";
        check.warnings.push_back(w.str());
      } else {
        ++agreeing;
      }
    }
    if (agreeing > 0) {
      check.notes.push_back(std::string(l.name) + ": " + std::to_string(agreeing) +
                            " variable(s) agree with the map");
    }
  }
  return check;
}

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

}  // namespace chorus
