#pragma once
// Which transport moves a process set's GPU tensors, and whether allreduce goes through
// the node-then-cross hierarchy. Pure functions of what the build, the MPI library and the
// rank layout offer, so the choice is unit-tested without a GPU. Every rank of a set
// computes it from values that are the same on every rank (see GpuPathInputs), so all
// members pick the same path and their calls line up.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/words.h"
#include "chorus/status.h"
#include "collectives/hierarchical_allreduce.h"
#include "topology/rank_map.h"

namespace chorus {

/// CHORUS_GPU_BACKEND: which transport the user asks for. Stable numbering: it travels in
/// the GPU context's setup exchange.
enum class GpuBackendRequest : uint8_t {
  kAuto = 0,  ///< NCCL when built and every rank has its own GPU, MPI otherwise
  kNccl = 1,  ///< NCCL, or fail where it cannot run
  kMpi = 2,   ///< MPI, staged through host memory, even where NCCL could run
};
/// CHORUS_GPU_BACKEND's words; empty reads as auto.
inline constexpr Words<GpuBackendRequest, 3> kGpuBackendWords{{{
    {GpuBackendRequest::kAuto, "auto"},
    {GpuBackendRequest::kNccl, "nccl"},
    {GpuBackendRequest::kMpi, "mpi"},
}}};

enum class GpuPath {
  kNccl,       ///< NCCL communicator over the set, on Chorus's communication stream
  kMpiStaged,  ///< copies through pinned host buffers, the host MPI backend in between
};
const char* gpu_path_name(GpuPath path);

/// What the path depends on. Fields marked "agreed" must be the same on every rank of the
/// set: GpuContext builds them from one allgather over the set's host backend in which
/// every rank contributes its GPU's UUID and its requested path, so every rank derives the
/// same values before choosing.
struct GpuPathInputs {
  bool nccl_built = false;  ///< CHORUS_WITH_NCCL
  /// agreed: some GPU is used by two ranks of the set (NCCL refuses that; the MPS pattern).
  bool gpu_shared = false;
  /// agreed: which ranks share a GPU, for messages ("ranks 0 and 2"); empty when none.
  std::string shared_by;
  /// agreed: CHORUS_GPU_BACKEND, the same on every rank (agree_gpu_backend).
  GpuBackendRequest requested = GpuBackendRequest::kAuto;
  /// agreed (init() checks CHORUS_TEST_SHARED_GPU): ranks sharing a GPU still use NCCL, each
  /// rank a host of its own to NCCL (NCCL_HOSTID). For tests of NCCL at n > 1 on one GPU.
  bool shared_gpu_nccl = false;
};

struct GpuPathChoice {
  GpuPath path = GpuPath::kMpiStaged;
  std::string reason;  ///< one line for the debug log: why this path
};

/// auto: NCCL when built and no GPU is shared (or shared_gpu_nccl), otherwise MPI, staged
/// through host memory whatever the MPI library's CUDA support (gpu_staged_backend.h). mpi:
/// MPI, staged. nccl: NCCL, or
/// kFailedPrecondition naming CHORUS_GPU_BACKEND and why NCCL cannot run (no NCCL in the
/// build, ranks sharing a GPU): asking for NCCL never quietly runs MPI. The inputs are
/// agreed, so every member gets the same answer, error included.
StatusOr<GpuPathChoice> choose_gpu_path(const GpuPathInputs& in);

/// The CHORUS_GPU_BACKEND of a set, from every member's own (`per_rank`, in set rank
/// order): the common value, or kMismatch listing each value with its ranks (`label`
/// names the set). Every member sees the same list, so every member gets the same answer.
StatusOr<GpuBackendRequest> agree_gpu_backend(const std::vector<GpuBackendRequest>& per_rank,
                                              const std::string& label);

/// How a GPU allreduce of a set is carried: flat over the set's path, or local
/// reduce-scatter, cross allreduce, local allgather.
struct GpuHierarchy {
  bool on = false;
  /// Both levels use the set's path: on NCCL, one NCCL communicator over the local group
  /// (NVLink or PCIe inside the node) and one over the cross group (NCCL's network
  /// transports, GPUDirect RDMA where there is one), so no shard passes through host memory;
  /// on MPI, the staged MPI path over each group's host backend.
  GpuPath local = GpuPath::kMpiStaged;
  GpuPath cross = GpuPath::kMpiStaged;
  std::string reason;  ///< one line for the debug log: why on, or why flat
};

/// `requested` is CHORUS_HIERARCHICAL_ALLREDUCE. Unset or 0: flat, on every path: a flat NCCL
/// allreduce spans the nodes with its own rings and trees, which is what NCCL users expect
/// (host memory keeps its automatic hierarchy: use_hierarchical_host_allreduce). 1: on,
/// where only the global set (`global_set`) has local and cross groups and the layout must
/// allow it (hierarchical_layout), both levels over `path`, the set's agreed path. The inputs
/// are the same on every rank, so every member decides the same.
GpuHierarchy gpu_hierarchy(std::optional<bool> requested, bool global_set, GpuPath path,
                           const RankMap& map);

}  // namespace chorus
