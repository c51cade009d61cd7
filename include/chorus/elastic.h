#pragma once
/// \file
/// Committed training state for elastic jobs (docs/elastic.md): each node keeps the newest
/// commits of the state in node-local memory, and a job started again after a failure agrees
/// on the newest commit that some node still holds. The state is whatever bytes the trainer
/// serializes (its model, optimizer and own values), the same on every rank at a commit.
/// Not yet the whole of elastic training: the state objects, the run loop and the supervisor
/// come on top of these two calls.

#include <cstdint>
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

/// Stores `bytes` as commit `number` in `dir`, a directory of node-local memory
/// (/dev/shm/...) that the job's next launch on this node will read, on the node's first
/// local rank; the other ranks return at once, since one copy per node is enough. `number`
/// must be newer than the node's newest stored commit. Not collective.
CHORUS_API Status store_commit(const std::string& dir, uint64_t number, std::string_view bytes);

/// The newest commit that some node holds in its `dir`, the same bytes on every rank (the
/// lowest rank whose node holds it broadcasts it); none where no node holds one. A node that
/// cannot read its store fails the call on every rank, naming that rank. Collective over
/// every rank, like a collective of the global set.
CHORUS_API StatusOr<std::optional<CommittedState>> newest_commit(const std::string& dir);

}  // namespace chorus::elastic
