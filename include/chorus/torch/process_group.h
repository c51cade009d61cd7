#pragma once
/// \file
/// Chorus as a torch.distributed (c10d) process group: the collectives of
/// `dist.init_process_group("chorus")` (registered by `import chorus.torch`), or of a LibTorch
/// trainer that speaks c10d. Each call is a Chorus collective on the group's process set, so it
/// is negotiated, fused and reduced as every other (one combination order, the stall inspector,
/// the liveness bound), and named by its place in the group's sequence of calls: every member
/// must make the group's calls in the same order, as c10d requires of every backend, and a
/// member whose call differs (another collective, another shape or dtype) fails that call on
/// every member with a message naming the ranks and what each asked for.
///
/// Work: wait() blocks until the collective completed and throws chorus::Error on every member
/// when it failed; getFuture() completes at the same time with the call's output tensors
/// (what DDP's communication hooks receive). The future's callbacks run on a thread of the
/// group's, and may wait for the group's later calls (as PowerSGD's hook does).
///
/// Built against c10d::ProcessGroup before torch 2 and c10d::Backend from torch 2, whose
/// collective methods have the same signatures; torch wraps a Backend in its ProcessGroup.

#include <torch/version.h>

#include <torch/csrc/distributed/c10d/Store.hpp>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "chorus/rendezvous.h"

namespace chorus::torch {

#if TORCH_VERSION_MAJOR >= 2
using C10dBackend = ::c10d::Backend;
#else
using C10dBackend = ::c10d::ProcessGroup;
#endif

struct ProcessGroupOptions {
  int rank = 0;  ///< this process' rank in the group
  int size = 1;  ///< the group's size
  /// The group's members as ranks of the Chorus job, increasing; empty: the whole job.
  std::vector<int> global_ranks;
  /// The group's name, the same on every member and different for each group made over one
  /// set of ranks (torch.distributed's group name).
  std::string group_name;
};

/// The process group of Chorus's job (chorus::init() first, on every rank), or of a group of
/// its ranks: a process set its members make (chorus::add_process_set_of_members), so only
/// they call this, as torch.distributed's new_group calls its backend. `options` must match
/// the job as Chorus sees it. Throws chorus::Error naming what differs.
c10::intrusive_ptr<C10dBackend> make_process_group(const ProcessGroupOptions& options);

/// `store` (torch.distributed's, of a job's default group) as the place where the ranks of a
/// job that no MPI launcher started meet: pass it as Options::rendezvous to chorus::init(),
/// with this process' rank and the job's size.
std::shared_ptr<chorus::Rendezvous> store_rendezvous(c10::intrusive_ptr<::c10d::Store> store,
                                                     int rank, int size);

}  // namespace chorus::torch
