#include "collectives/gpu_path.h"

namespace chorus {

const char* gpu_path_name(GpuPath path) {
  switch (path) {
    case GpuPath::kNccl: return "nccl";
    case GpuPath::kMpiStaged: return "mpi (staged through pinned host memory)";
  }
  return "?";
}

StatusOr<GpuPathChoice> choose_gpu_path(const GpuPathInputs& in) {
  const std::string mpi_kind = "; staged through pinned host buffers";
  const std::string shared =
      "ranks of the set share a GPU" + (in.shared_by.empty() ? "" : " (" + in.shared_by + ")");
  const bool shared_refused = in.gpu_shared && !in.shared_gpu_nccl;
  const std::string test_mode =
      in.gpu_shared ? "; " + shared + ", allowed by CHORUS_TEST_SHARED_GPU=1 (tests only)" : "";
  GpuPathChoice c;
  switch (in.requested) {
    case GpuBackendRequest::kNccl:
      if (!in.nccl_built) {
        return failed_precondition(
            "CHORUS_GPU_BACKEND=nccl, but this build of Chorus has no NCCL; use auto or mpi");
      }
      if (shared_refused) {
        return failed_precondition("CHORUS_GPU_BACKEND=nccl, but " + shared +
                                   ", which NCCL refuses; give each rank its own GPU, or use "
                                   "auto or mpi");
      }
      c.path = GpuPath::kNccl;
      c.reason = "NCCL, as CHORUS_GPU_BACKEND=nccl asks" + test_mode;
      return c;
    case GpuBackendRequest::kMpi:
      c.path = GpuPath::kMpiStaged;
      c.reason = "MPI, as CHORUS_GPU_BACKEND=mpi asks" + mpi_kind;
      return c;
    case GpuBackendRequest::kAuto: break;
  }
  if (in.nccl_built && !shared_refused) {
    c.path = GpuPath::kNccl;
    c.reason = "NCCL (CHORUS_GPU_BACKEND=auto): built in and " +
               (in.gpu_shared ? test_mode.substr(2) : "every rank has its own GPU");
    return c;
  }
  c.path = GpuPath::kMpiStaged;
  c.reason = std::string("MPI (CHORUS_GPU_BACKEND=auto): ") +
             (in.nccl_built ? shared + ", which NCCL refuses" : "this build has no NCCL") +
             mpi_kind;
  return c;
}

StatusOr<GpuBackendRequest> agree_gpu_backend(const std::vector<GpuBackendRequest>& per_rank,
                                              const std::string& label) {
  if (per_rank.empty()) return GpuBackendRequest::kAuto;
  bool same = true;
  for (GpuBackendRequest r : per_rank) same = same && r == per_rank.front();
  if (same) return per_rank.front();
  // Each value with its ranks, values in the order they first appear.
  std::string msg = label + ": the ranks set CHORUS_GPU_BACKEND differently:";
  std::vector<GpuBackendRequest> seen;
  for (GpuBackendRequest value : per_rank) {
    bool listed = false;
    for (GpuBackendRequest v : seen) listed = listed || v == value;
    if (listed) continue;
    seen.push_back(value);
    std::vector<int> ranks;
    for (int r = 0; r < static_cast<int>(per_rank.size()); ++r) {
      if (per_rank[r] == value) ranks.push_back(r);
    }
    msg += std::string(seen.size() > 1 ? ";" : "") + " " + kGpuBackendWords.name(value) +
           " on rank" + (ranks.size() > 1 ? "s" : "");
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      msg += (i == 0 ? " " : ", ") + std::to_string(ranks[i]);
    }
  }
  return Status(StatusCode::kMismatch, msg);
}

GpuHierarchy gpu_hierarchy(std::optional<bool> requested, bool global_set, GpuPath path,
                           const RankMap& map) {
  GpuHierarchy h;
  if (!requested.has_value()) {
    h.reason =
        "CHORUS_HIERARCHICAL_ALLREDUCE is unset: flat on GPU memory (NCCL's own rings and "
        "trees span the nodes; set it to 1 for the hierarchy)";
    return h;
  }
  // What allows it on host memory allows it here: the setting, the set, the layout.
  if (!use_hierarchical_host_allreduce(requested, global_set, map, &h.reason)) return h;
  h.on = true;
  h.local = path;
  h.cross = path;
  h.reason = std::string("hierarchical, as requested (CHORUS_HIERARCHICAL_ALLREDUCE=1), ") +
             gpu_path_name(path) + " inside each node and across nodes: " + map.layout();
  return h;
}

}  // namespace chorus
