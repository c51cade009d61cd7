#pragma once
/// \file
/// Committed training state for elastic jobs (docs/elastic.md): each node keeps the newest
/// commits of the state in node-local memory, and a job started again after a failure agrees
/// on the newest commit that some node still holds. The state is whatever bytes the trainer
/// serializes (its model, optimizer and own values), the same on every rank at a commit.
/// The front ends build on these calls: chorus.torch.elastic (TorchState, run) and
/// chorus/torch/elastic.h for LibTorch trainers; chorusrun --max-restarts supervises.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "chorus/export.h"
#include "chorus/status.h"

namespace chorus::elastic {

/// A commit: its number, which grows with every commit of a job, and the serialized state.
struct CommittedState {
  uint64_t number = 0;
  std::string bytes;
};

/// This node's store of the elastic job's commits:
/// `$CHORUS_ELASTIC_DIR/chorus-elastic-$CHORUS_ELASTIC_JOB/<host name>` (the host's name
/// keeps hosts that share a /dev/shm apart). Empty where CHORUS_ELASTIC_JOB is unset: the job
/// is not elastic, and commits stay in the process. Not collective.
CHORUS_API StatusOr<std::string> commit_dir();

/// Stores `bytes` as commit `number` in `dir`, a directory of node-local memory
/// (/dev/shm/...) that the job's next launch on this node will read, on the node's first
/// local rank; the other ranks return at once, since one copy per node is enough. `number`
/// must be newer than the node's newest stored commit; the node keeps the newest
/// CHORUS_ELASTIC_KEEP. Not collective.
CHORUS_API Status store_commit(const std::string& dir, uint64_t number, std::string_view bytes);

/// store_commit, with the bytes made and written off the calling thread: on the node's first
/// local rank, `bytes()` runs on a writer thread of the process and its result is stored as
/// commit `number` in `dir`; the other ranks drop `bytes` and return at once. `bytes` must
/// read only what the caller will not change (a copy of the state taken for this commit).
/// A newer commit handed over while one waits to be started replaces it; a commit that is
/// not in the store is never resumed from (the store holds whole files only). Returns the
/// failure of an earlier write, naming its commit and `dir`, once it happened (then on every
/// later call). Chorus's shutdown writes what was handed over before it returns. Not
/// collective.
CHORUS_API Status store_commit_async(const std::string& dir, uint64_t number,
                                     std::function<std::string()> bytes);

/// Waits until every commit handed to store_commit_async on this rank is in the store (or
/// was replaced by a newer one); the first write failure, naming its commit and directory.
/// OK at once on ranks that write nothing; also after Chorus stopped. Not collective.
CHORUS_API Status flush_commits();

/// Commits replaced by a newer one before their write started, in this process.
CHORUS_API uint64_t commits_replaced();

/// The newest commit that some node holds in its `dir`, the same bytes on every rank (the
/// lowest rank whose node holds it broadcasts it); none where no node holds one. Each node
/// then drops the commits it holds above that one. A node that cannot read its store fails
/// the call on every rank, naming that rank. Collective over every rank, like a collective
/// of the global set.
CHORUS_API StatusOr<std::optional<CommittedState>> newest_commit(const std::string& dir);

/// Whether chorusrun reported hosts added since this launch started (its discovery script
/// found hosts the job could grow onto): rank 0 asks the supervisor and every rank returns
/// its answer, so that all stop at the same commit. False when the job is not supervised;
/// a supervisor that does not answer is logged and not asked again. Collective over every
/// rank.
CHORUS_API StatusOr<bool> hosts_added();

/// Whether this worker resets in place when a collective fails or hosts are added: a worker
/// of an elastic job that chorusrun --gloo supervises (CHORUS_ELASTIC_RENDEZVOUS). Elsewhere
/// the worker ends, and chorusrun relaunches the job from the newest stored commit. False
/// before init(). Not collective.
CHORUS_API bool resets_in_place();

/// Which start of the elastic job this rank runs in, from 1: the launch of a job that is
/// relaunched (CHORUS_ELASTIC_LAUNCH), or the round of one that resets in place (every reset
/// forms the next); 0 outside a job chorusrun supervises. Not collective.
CHORUS_API int64_t start_number();

/// A worker's reset in place: Chorus shuts down on this rank (the failed round's collectives
/// in flight fail, its connections and shared memory go) and starts again with the options
/// of the last init(), joining the next round that chorusrun forms with the workers left
/// (and those of added hosts); rank() and size() are then the new round's. Returns
/// FAILED_PRECONDITION, saying why, when chorusrun dropped this worker from the job (its host
/// left it): the worker should end. Any other error is a failure during the reset itself,
/// and another reset may follow. Every worker of the job calls it.
CHORUS_API Status reset();

/// After a reset in place: the ranks agree on the newest commit any of them holds in its
/// memory (`mine`: its number, 0 for none). Returns that commit's number (0: none) and, where
/// this rank does not hold it, its bytes, which the lowest rank holding it serializes with
/// `bytes()`; empty bytes where this rank holds it (restore your own copy). Collective over
/// every rank.
CHORUS_API StatusOr<CommittedState> newest_held_commit(uint64_t mine,
                                                       const std::function<std::string()>& bytes);

/// Removes this node's commits in `dir` (on the node's first local rank), once the training
/// they served has finished on every rank; first waits for the writes handed over
/// (flush_commits), so that none lands after the removal. Not collective.
CHORUS_API Status remove_commits(const std::string& dir);

}  // namespace chorus::elastic
