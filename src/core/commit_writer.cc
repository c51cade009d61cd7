#include "core/commit_writer.h"

#include <pthread.h>

#include <exception>
#include <utility>

#include "base/logging.h"
#include "transport/commit_store.h"

namespace chorus {

CommitWriter& process_commit_writer() {
  static CommitWriter* const writer = new CommitWriter;
  return *writer;
}

Status CommitWriter::submit(std::string dir, int keep, uint64_t number, Bytes bytes) {
  Job job{std::move(dir), keep, number, std::move(bytes)};
  std::optional<Job> dropped;  // destroyed outside the lock: it may own the state's copy
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_) {
    lock.unlock();
    Status s = write(job);
    lock.lock();
    if (!s.ok() && failed_.ok()) failed_ = s;
    return failed_;
  }
  if (pending_) {
    dropped = std::move(pending_);
    ++replaced_;
  }
  pending_ = std::move(job);
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  wake_.notify_one();
  return failed_;
}

Status CommitWriter::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return !pending_ && !writing_; });
  return failed_;
}

Status CommitWriter::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    wake_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

uint64_t CommitWriter::replaced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return replaced_;
}

void CommitWriter::loop() {
  pthread_setname_np(pthread_self(), "chorus-commits");
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return pending_ || stopping_; });
    if (!pending_) break;  // stopping, and everything handed over is written
    std::optional<Job> job = std::exchange(pending_, std::nullopt);
    writing_ = true;
    lock.unlock();
    Status s = write(*job);
    job.reset();  // the state's copy goes before the training thread may reuse its memory
    lock.lock();
    writing_ = false;
    if (!s.ok()) {
      log().error("{}", s.to_string());
      if (failed_.ok()) failed_ = std::move(s);
    }
    if (!pending_) idle_.notify_all();
  }
  idle_.notify_all();
}

Status CommitWriter::write(Job& job) {
  const std::string what = "elastic commit " + std::to_string(job.number) + " to " + job.dir;
  std::string bytes;
  try {
    bytes = job.bytes();
  } catch (const std::exception& e) {
    return internal_error(what + ": serializing the state failed: " + e.what());
  }
  Status s = CommitStore(job.dir, job.keep).write(job.number, bytes);
  if (!s.ok()) return Status(s.code(), what + ": " + s.message());
  return {};
}

}  // namespace chorus
