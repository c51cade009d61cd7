#pragma once
// The launcher's idea of the layout, checked against the map computed from host names.
// Launchers export rank variables (Open MPI's OMPI_COMM_WORLD_*, PMIx's PMIX_RANK, Slurm's
// SLURM_*, MPICH's PMI_*/MPI_LOCAL*, MVAPICH's MV2_*); code that trusts them picks the
// wrong GPU or core when they are stale (SLURM_* of the batch step seen under mpirun) or
// describe another layout. Chorus never uses them for its map; it only warns, naming the
// variable, when one that applies to this job disagrees.
//
// Pure: the environment comes in through a lookup function, so it is tested without a
// launcher.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "chorus/status.h"
#include "topology/rank_map.h"

namespace chorus {

using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

struct LauncherCheck {
  /// One line per variable that disagrees or cannot be read; log them as warnings.
  std::vector<std::string> warnings;
  /// Launchers whose variables were compared, or skipped because they describe another
  /// job (debug information): "Open MPI: 4 variables agree".
  std::vector<std::string> notes;
};

/// Compares every known launcher variable present in `env` with `map` (rank `rank` of
/// `size`). A launcher's variables are compared only when its job-size variable (when it
/// has one) equals `size`: otherwise they belong to another job or step, such as the
/// daemons through which mpirun started this rank inside a Slurm allocation.
LauncherCheck check_launcher_view(const RankMap& map, int rank, int size, const EnvLookup& env);

/// True where an MPI launcher started this process: mpirun (Open MPI, MPICH's Hydra,
/// MVAPICH) or srun with a PMI plugin (PMIx); not where torchrun did (TORCHELASTIC_RUN_ID),
/// even under one.
bool started_by_mpi_launcher(const EnvLookup& env);

/// Where a job without an MPI launcher meets: its rank 0's host, the port torchrun (or the
/// job script) gave, and this rank's place.
struct StoreAddress {
  int rank = 0;
  int size = 1;
  std::string host;  ///< MASTER_ADDR
  int port = 0;      ///< MASTER_PORT
};

/// torchrun's variables: nothing where WORLD_SIZE is unset; an error naming the variable where
/// one of RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT is missing or malformed.
StatusOr<std::optional<StoreAddress>> torchrun_store(const EnvLookup& env);

/// The process environment, for check_launcher_view.
EnvLookup process_env();

}  // namespace chorus
