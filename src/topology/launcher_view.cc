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
      {"torchrun",
       "WORLD_SIZE",
       {{"RANK", Field::kRank},
        {"LOCAL_RANK", Field::kLocalRank},
        {"LOCAL_WORLD_SIZE", Field::kLocalSize}}},
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

bool started_by_mpi_launcher(const EnvLookup& env) {
  // torchrun's workers inherit the variables of an MPI launcher that started torchrun itself
  // (srun --mpi=pmix torchrun ...), but torchrun started them.
  if (env("TORCHELASTIC_RUN_ID")) return false;
  for (const char* name :
       {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"}) {
    if (env(name)) return true;
  }
  return false;
}

StatusOr<std::optional<StoreAddress>> torchrun_store(const EnvLookup& env) {
  // RANK alone is some other program's: torchrun always sets WORLD_SIZE.
  if (!env("WORLD_SIZE")) return std::optional<StoreAddress>();
  StoreAddress out;
  auto number = [&](const char* name, long least, long* into) -> Status {
    const std::optional<std::string> v = env(name);
    const std::optional<long> n = v ? parse_int(*v) : std::nullopt;
    if (!n || *n < least) {
      return invalid_argument(std::string(name) + (v ? "='" + *v + "' is not" : " is unset, not") +
                              " an integer >= " + std::to_string(least) +
                              ": a job without an MPI launcher takes its ranks from RANK, "
                              "WORLD_SIZE, MASTER_ADDR and MASTER_PORT, as torchrun sets them");
    }
    *into = *n;
    return {};
  };
  long r = 0, n = 0, port = 0;
  if (Status s = number("RANK", 0, &r); !s.ok()) return s;
  if (Status s = number("WORLD_SIZE", 1, &n); !s.ok()) return s;
  if (Status s = number("MASTER_PORT", 1, &port); !s.ok()) return s;
  if (r >= n) {
    return invalid_argument("RANK=" + std::to_string(r) +
                            " is not below WORLD_SIZE=" + std::to_string(n));
  }
  const std::optional<std::string> host = env("MASTER_ADDR");
  if (!host || host->empty()) {
    return invalid_argument(
        "MASTER_ADDR is unset: a job without an MPI launcher meets at MASTER_ADDR, the host of "
        "its rank 0, as torchrun sets it");
  }
  out.rank = static_cast<int>(r);
  out.size = static_cast<int>(n);
  out.host = *host;
  out.port = static_cast<int>(port);
  return std::optional<StoreAddress>(out);
}

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
