// The public calls of include/chorus/elastic.h: the node-local commit store
// (transport/commit_store.h) on each node's first local rank, and the agreement on the
// newest commit over the job's collectives.
#include "chorus/elastic.h"

#include "base/logging.h"
#include "chorus/chorus.h"
#include "transport/commit_store.h"

namespace chorus::elastic {

Status store_commit(const std::string& dir, uint64_t number, std::string_view bytes) {
  if (!is_initialized())
    return Status(StatusCode::kNotInitialized, "store_commit: Chorus is not initialized");
  if (local_rank() != 0) return {};
  return CommitStore(dir).write(number, bytes);
}

// Every rank tells what its node holds ({number + 1, or 0 for none; 1 if its store could not
// be read}); the highest number wins, and the lowest rank holding it sends its size, then
// its bytes.
StatusOr<std::optional<CommittedState>> newest_commit(const std::string& dir) {
  if (!is_initialized())
    return Status(StatusCode::kNotInitialized, "newest_commit: Chorus is not initialized");
  std::optional<Commit> mine;
  Status read;
  if (local_rank() == 0) {
    StatusOr<std::optional<Commit>> stored = CommitStore(dir).newest();
    if (stored.ok()) {
      mine = std::move(stored).value();
    } else {
      read = stored.status();
      log().error("newest_commit: {}", read.to_string());
    }
  }
  int64_t row[2] = {mine ? static_cast<int64_t>(mine->number) + 1 : 0, read.ok() ? 0 : 1};
  Handle rows = allgather("chorus.elastic.newest", TensorRef{row, DataType::kInt64, {1, 2}, {}});
  if (Status s = rows.wait(); !s.ok()) return s;
  const auto* all = static_cast<const int64_t*>(rows.output().data);
  int64_t newest = 0;
  int source = -1;
  for (int r = 0; r < size(); ++r) {
    if (all[2 * r + 1] != 0) {
      return Status(StatusCode::kInternal, "newest_commit: rank " + std::to_string(r) +
                                               " could not read its node's commits in " + dir +
                                               " (its log says why)");
    }
    if (all[2 * r] > newest) {
      newest = all[2 * r];
      source = r;
    }
  }
  if (source < 0) return std::optional<CommittedState>();
  CommittedState state;
  state.number = static_cast<uint64_t>(newest - 1);
  int64_t bytes = rank() == source ? static_cast<int64_t>(mine->bytes.size()) : 0;
  if (Status s =
          broadcast("chorus.elastic.size", TensorRef{&bytes, DataType::kInt64, {1}, {}}, source)
              .wait();
      !s.ok()) {
    return s;
  }
  if (rank() == source) {
    state.bytes = std::move(mine->bytes);
  } else {
    state.bytes.resize(static_cast<std::size_t>(bytes));
  }
  if (Status s = broadcast("chorus.elastic.bytes",
                           TensorRef{state.bytes.data(), DataType::kUInt8, {bytes}, {}}, source)
                     .wait();
      !s.ok()) {
    return s;
  }
  return std::optional<CommittedState>(std::move(state));
}

}  // namespace chorus::elastic
