#pragma once
// The writer of an elastic job's commits (include/chorus/elastic.h, store_commit_async): a
// thread of the process that turns a commit into bytes and writes them to the node's commit
// store (transport/commit_store.h), so that the training thread pays only for the copy of
// its state in memory. The thread starts with the first commit handed to it.
//
// Queue: one commit being written and at most one waiting. A newer commit handed over while
// one waits replaces it (it was never started; the store only wants the newest), so a
// trainer that commits faster than the store takes them never queues more than two. A
// write's failure is latched and returned by every later submit() and flush(), naming the
// directory and the commit: a commit missing from the store must not pass unnoticed.
//
// The process has one (process_commit_writer()): it outlives a reset in place, whose restart
// need not wait for a write, and chorus::shutdown() flushes it, so that no commit handed over
// is lost and no `bytes` runs after the trainer's objects are gone.
//
// Thread contract: submit(), flush() and stop() from any thread; `bytes` runs on the writer
// thread, and whatever it reads must not change until it returns. stop() (and the
// destructor) writes what was handed over, then joins: a process that shuts down loses no
// commit, and one killed midway leaves the previous file (the store renames whole files).

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "chorus/status.h"

namespace chorus {

class CommitWriter {
 public:
  using Bytes = std::function<std::string()>;

  CommitWriter() = default;
  ~CommitWriter() { stop(); }
  CommitWriter(const CommitWriter&) = delete;
  CommitWriter& operator=(const CommitWriter&) = delete;

  /// Hands commit `number` to the writer thread: `bytes()` there, then the store in `dir`
  /// (keeping the newest `keep`). Replaces a commit that waits and was not started. Returns
  /// the latched failure of an earlier write, if any (this commit is then still handed over).
  Status submit(std::string dir, int keep, uint64_t number, Bytes bytes);
  /// Waits until every commit handed over is in the store or was replaced; the latched
  /// failure of a write, if any.
  Status flush();
  /// Writes what was handed over, then ends the thread; the latched failure, if any.
  /// Idempotent; submit() afterwards writes on the calling thread.
  Status stop();

  /// Commits replaced before they were started (for tests and the bench).
  uint64_t replaced() const;

 private:
  struct Job {
    std::string dir;
    int keep = 2;
    uint64_t number = 0;
    Bytes bytes;
  };
  void loop();
  static Status write(Job& job);

  mutable std::mutex mu_;
  std::condition_variable wake_;  // the writer: a job waits, or stop
  std::condition_variable idle_;  // flush(): nothing waits and nothing is being written
  std::optional<Job> pending_;
  bool writing_ = false;
  bool stopping_ = false;
  Status failed_;
  uint64_t replaced_ = 0;
  std::thread thread_;
};

/// The process's writer. Never destroyed: a `bytes` left to a static destructor could reach
/// objects already gone (a Python interpreter finalized); shutdown() flushes it instead.
CommitWriter& process_commit_writer();

}  // namespace chorus
