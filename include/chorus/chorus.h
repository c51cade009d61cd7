#pragma once
/// \file
/// The public C++ API of Chorus. A trainer includes this one header.
///
/// Threading: every function may be called from any thread after init(). Collectives return
/// a Handle at once and never block on the network; the work runs on Chorus's background
/// thread, which is the only thread that talks to MPI.
///
/// Names: a tensor's name identifies it across ranks, so every rank must use the same name
/// for the same collective. An empty name gets a generated one ("chorus.<op>.<n>", or
/// "chorus.set<id>.<op>.<n>" in process set <id>, counted per op and set on each rank), which
/// matches across ranks only when every member issues unnamed collectives of that op in that
/// set in the same order. Two collectives with the same name in flight
/// on one rank is an error on the second.

#include <string>
#include <vector>

#include "chorus/handle.h"
#include "chorus/options.h"
#include "chorus/status.h"
#include "chorus/types.h"
#include "chorus/version.h"

namespace chorus {

/// Initializes MPI (unless the program did, in which case it must have asked for
/// MPI_THREAD_MULTIPLE), reads the CHORUS_* environment and starts the background thread.
/// A bad CHORUS_* value fails with kInvalidArgument naming the variable.
CHORUS_API Status init(const Options& options = {});
/// Stops the background thread on every rank: pending handles fail with kAborted. Finalizes
/// MPI if init() initialized it. Safe to call twice.
CHORUS_API Status shutdown();
CHORUS_API bool is_initialized();

/// Ranks in the global set. local_* count ranks on this host; cross_* count hosts, where
/// cross_rank is this host's index among the hosts (ordered by their lowest rank).
/// Each returns -1 before init().
CHORUS_API int rank();
CHORUS_API int size();
CHORUS_API int local_rank();
CHORUS_API int local_size();
CHORUS_API int cross_rank();
CHORUS_API int cross_size();
/// What carries the running job: "mpi" or "gloo" (CHORUS_CONTROLLER, as init() chose it);
/// empty before init().
CHORUS_API std::string controller();

/// Sums (or averages, ...) `input` over the process set into `output`. input.data may equal
/// output.data (in place). Both must have the same dtype and shape.
CHORUS_API Handle allreduce(const std::string& name, const TensorRef& input,
                            const TensorRef& output, const AllreduceOptions& options = {});

/// Allreduces a list negotiated as one unit: no member runs before every member is ready
/// on every rank, and the members are fused together. One Handle for the whole group.
/// `names` may be empty (generated) or give one name per tensor.
CHORUS_API Handle grouped_allreduce(const std::vector<std::string>& names,
                                    const std::vector<TensorRef>& inputs,
                                    const std::vector<TensorRef>& outputs,
                                    const AllreduceOptions& options = {});

/// Concatenates every rank's `input` along the first dimension, in rank order. The first
/// dimension may differ per rank; the other dimensions must match.
CHORUS_API Handle allgather(const std::string& name, const TensorRef& input,
                            const AllgatherOptions& options = {});

/// Every tensor of `inputs` allgathered, negotiated as one unit (as grouped_allreduce): no
/// member runs before every member is ready on every rank, and a failed member fails the
/// group. Handle::output(i) is tensor i's result (or options.allocate[i]'s memory).
/// `names` may be empty (generated) or give one name per tensor.
CHORUS_API Handle grouped_allgather(const std::vector<std::string>& names,
                                    const std::vector<TensorRef>& inputs,
                                    const GroupedAllgatherOptions& options = {});

/// Copies `tensor` from `root` into `tensor` on every rank. `root` is the root's rank
/// within the process set (its position among the set's sorted global ranks), not its
/// global rank; in the global set the two are the same. (chorus.torch's root_rank is a
/// global rank, as in Horovod, and is converted before it reaches here.)
CHORUS_API Handle broadcast(const std::string& name, const TensorRef& tensor, int root,
                            const BroadcastOptions& options = {});

/// Reduces every rank's `input` into `output` on `root` alone (its rank within the process
/// set, as broadcast): the same bits an allreduce with these options gives there. `output`
/// matches `input` (dtype, shape, device) and may be `input` itself; on the other ranks it
/// is not written. It costs what the allreduce costs.
CHORUS_API Handle reduce(const std::string& name, const TensorRef& input, const TensorRef& output,
                         int root, const ReduceOptions& options = {});

/// Sends splits[i] first-dimension rows of `input` to rank i (consecutive blocks, in rank
/// order) and receives rank i's block for this rank at position i of the output. Empty
/// `splits` means equal blocks (the first dimension must divide evenly).
CHORUS_API Handle alltoall(const std::string& name, const TensorRef& input,
                           const std::vector<int64_t>& splits, const AlltoallOptions& options = {});

/// Reduces `input` over the process set and leaves rank r with block r of the first
/// dimension: dim0 / n rows, the first dim0 % n ranks one more.
CHORUS_API Handle reducescatter(const std::string& name, const TensorRef& input,
                                const ReducescatterOptions& options = {});

/// Every tensor of `inputs` reduce-scattered, negotiated as one unit (as
/// grouped_allgather); Handle::output(i) is this rank's block of tensor i.
CHORUS_API Handle grouped_reducescatter(const std::vector<std::string>& names,
                                        const std::vector<TensorRef>& inputs,
                                        const GroupedReducescatterOptions& options = {});

/// Completes once every rank of the set called barrier. `name`: as a collective's, matched
/// across the set (empty: generated, as for unnamed collectives).
CHORUS_API Handle barrier(ProcessSet process_set = {}, const std::string& name = {});

/// Declares that this rank has no more data: until every rank joined, this rank takes part
/// in the others' allreduces with zeros (averages still divide by the full set size).
/// Completes when every rank joined; Handle::last_joined_rank() tells the last one.
/// Other collectives started by the remaining ranks while some rank joined fail.
CHORUS_API Handle join();

/// Starts writing a Chrome-trace timeline (the CHORUS_TIMELINE format) to `path`, as
/// CHORUS_TIMELINE does at init. Not collective: call it on any rank, from any thread after
/// init(); rank 0 writes the file, the other ranks write nothing (closing a file of their
/// own from an earlier start) and return OK, unless `path` holds "{rank}": then every rank
/// that calls it writes its own file, `path` with its rank there (chorus-trace merge puts
/// them on one time axis). Returns once
/// Chorus switched, so a collective submitted after the call is recorded. A
/// timeline already active (from CHORUS_TIMELINE or an earlier call) is closed first, a
/// complete file, and the new one replaces it; if `path` cannot be opened, the call fails
/// with kInvalidArgument and no timeline is active. `mark_cycles`: also mark the start of
/// every cycle that ran a collective (a global "CYCLE_START" instant).
/// Fails with kNotInitialized before init() and after shutdown().
CHORUS_API Status start_timeline(const std::string& path, bool mark_cycles = false);
/// Stops the active timeline and closes its file, a complete JSON array: nothing recorded
/// after the call returns goes there. With no timeline active it does nothing and returns
/// OK (as Horovod's stop_timeline). Same threads and ranks as start_timeline.
CHORUS_API Status stop_timeline();
/// Marks the end of a training step on this rank's timeline (a STEP event from the previous
/// mark), so that chorus-trace summary can split each step into computing, waiting for peers
/// and reducing. DistributedOptimizer marks its steps itself. Any thread; does nothing
/// without an active timeline, or before init().
CHORUS_API void mark_step();

/// Creates a process set from global ranks. Collective: every rank calls it with the same
/// list, in the same order relative to other add/remove calls. Blocks until created.
CHORUS_API StatusOr<ProcessSet> add_process_set(const std::vector<int>& ranks);
/// Creates a process set from global ranks, collective over its members alone: each member
/// calls it with the same list, in the same order relative to the other sets it creates this
/// way; the other ranks make their part of it on Chorus's background thread, without a call
/// (torch.distributed's new_group, which calls its backend on the members only). Blocks
/// until created.
CHORUS_API StatusOr<ProcessSet> add_process_set_of_members(const std::vector<int>& ranks);
/// add_process_set_of_members without blocking: returns at once, and Handle::process_set() is
/// the new set once the handle completed. For a caller that must not wait for the other
/// members' call (a pair of ranks made on its first message, where each rank may first send
/// to another). `purpose`, the same on every member, keeps apart the sets of one list of ranks
/// made for different ends, whose calls each member may make in another order: the members
/// match the calls of one purpose in their order.
CHORUS_API Handle add_process_set_of_members_async(const std::vector<int>& ranks,
                                                   const std::string& purpose = {});
/// Removes a set created by add_process_set. Collective over every rank, like adding.
CHORUS_API Status remove_process_set(ProcessSet process_set);
/// This rank's rank in `process_set`, or -1 if it is not a member.
CHORUS_API int process_set_rank(ProcessSet process_set);
/// Number of ranks in `process_set`, or -1 if there is no such set.
CHORUS_API int process_set_size(ProcessSet process_set);

/// What this build of Chorus can do. Needs no init().
struct BuildInfo {
  bool cuda = false;          ///< CUDA tensors are supported (CHORUS_WITH_CUDA)
  int nccl_version_code = 0;  ///< NCCL_VERSION_CODE compiled against; 0: built without NCCL
  bool gloo = false;          ///< a job may run without MPI, on Gloo (CHORUS_WITH_GLOO)
};
CHORUS_API BuildInfo build_info();

}  // namespace chorus
