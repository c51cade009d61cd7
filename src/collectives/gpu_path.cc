#include "collectives/gpu_path.h"

namespace chorus {

const char* gpu_path_name(GpuPath path) {
  switch (path) {
    case GpuPath::kNccl: return "nccl";
    case GpuPath::kMpiCudaAware: return "mpi (CUDA-aware)";
    case GpuPath::kMpiStaged: return "mpi (staged through pinned host memory)";
  }
  return "?";
}

GpuPathChoice choose_gpu_path(const GpuPathInputs& in) {
  const bool want_mpi = in.requested == "mpi";
  const bool want_nccl = in.requested == "nccl";
  GpuPathChoice c;
  if (!want_mpi && in.nccl_built && !in.gpu_shared) {
    c.path = GpuPath::kNccl;
    c.reason = want_nccl ? "NCCL, as requested" : "NCCL: built in and every rank has its own GPU";
    return c;
  }
  c.path = in.mpi_cuda_aware ? GpuPath::kMpiCudaAware : GpuPath::kMpiStaged;
  std::string why;
  if (want_mpi) {
    why = "MPI, as requested";
  } else if (!in.nccl_built) {
    why = "MPI: this build has no NCCL";
  } else {
    why = "MPI: ranks share a GPU, which NCCL refuses";
  }
  if (want_nccl) why = "NCCL was requested but cannot run here; " + why;
  c.reason = why + (in.mpi_cuda_aware ? "; the MPI library is CUDA-aware"
                                      : "; staged through pinned host buffers");
  return c;
}

bool hierarchical_layout(const RankMap& map, std::string* reason) {
  auto no = [&](const char* why) {
    if (reason) *reason = why;
    return false;
  };
  if (map.cross_size < 2) return no("all ranks are on one host");
  if (map.local_size < 2) return no("one rank per host: nothing to reduce inside a node");
  if (!map.uniform) return no("hosts run different numbers of ranks");
  if (reason) *reason = map.layout();
  return true;
}

bool hierarchical_groups_needed(std::optional<bool> requested, const RankMap& map) {
  if (requested) return *requested;
  return hierarchical_layout(map, nullptr);
}

bool use_hierarchical_allreduce(std::optional<bool> requested, bool global_set, GpuPath path,
                                const RankMap& map, std::string* reason) {
  auto no = [&](const std::string& why) {
    if (reason) *reason = why;
    return false;
  };
  if (requested == false) return no("CHORUS_HIERARCHICAL_ALLREDUCE=0 turns it off");
  if (!global_set) return no("only the global process set has local and cross groups");
  std::string layout;
  if (!hierarchical_layout(map, &layout)) return no(layout);
  if (requested == true) {
    if (reason) *reason = "hierarchical, as requested (CHORUS_HIERARCHICAL_ALLREDUCE=1): " + layout;
    return true;
  }
  if (path != GpuPath::kNccl) {
    return no(
        "CHORUS_HIERARCHICAL_ALLREDUCE is unset and the path is MPI (automatic only with "
        "NCCL; set it to 1 to use it on MPI)");
  }
  if (reason) *reason = "hierarchical, automatic on NCCL: " + layout;
  return true;
}

}  // namespace chorus
