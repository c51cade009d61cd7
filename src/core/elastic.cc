// The public calls of include/chorus/elastic.h: the node-local commit store
// (transport/commit_store.h) on each node's first local rank, and the agreement on the
// newest commit over the job's collectives.
#include "chorus/elastic.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <system_error>
#include <thread>

#include "base/logging.h"
#include "chorus/chorus.h"
#include "core/commit_writer.h"
#include "core/config.h"
#include "core/runtime.h"
#include "core/thread_runtime.h"
#include "transport/commit_store.h"
#include "transport/elastic_round.h"
#include "transport/hosts_version.h"

namespace chorus::elastic {
namespace {

StatusOr<std::shared_ptr<Runtime>> running(const char* call) {
  std::shared_ptr<Runtime> rt = current_runtime();
  if (!rt)
    return Status(StatusCode::kNotInitialized, std::string(call) + ": Chorus is not initialized");
  return rt;
}

std::string host_name() {
  char host[256] = {0};
  return gethostname(host, sizeof(host) - 1) == 0 ? host : "";
}

// The tests' faults (CHORUS_TEST_FAIL_AT_COMMIT, CHORUS_TEST_FAIL_RESTORE): this rank dies
// as a lost host's would, or its calling thread hangs as a stalled rank's would.
[[noreturn]] void die(const std::string& why) {
  log().error("{}: rank {} on {} is killed", why, rank(), host_name());
  raise(SIGKILL);
  std::abort();
}

// Which start of the job this is: the launch (relaunched jobs) or the round (resets in place),
// from 1.
int64_t job_start(const Config& config) {
  const std::optional<ElasticRound> round = joined_round();
  return round ? round->round : config.elastic_launch;
}

// CHORUS_TEST_FAIL_RESTORE: the ranks on that host die in the second start's restore.
void test_fault_in_restore(const Config& config, uint64_t number) {
  if (job_start(config) == 2 && config.test_fail_restore == host_name()) {
    die("CHORUS_TEST_FAIL_RESTORE: in the restore of commit " + std::to_string(number));
  }
}

// After commit `number` is stored: CHORUS_TEST_FAIL_AT_COMMIT=HOST:NUMBER[:hang|:stop], or
// several such faults separated by commas. A relaunched job meets them in its first launch
// only; a job that resets in place meets each at its commit (the numbers only grow).
Status test_fault_after_commit(const Config& config, const std::string& dir, uint64_t number) {
  const std::string& faults = config.test_fail_at_commit;
  if (faults.empty() || (!joined_round() && config.elastic_launch > 1)) return {};
  std::stringstream list(faults);
  for (std::string fault; std::getline(list, fault, ',');) {
    const std::size_t colon = fault.find(':');
    const std::string host = fault.substr(0, colon);
    const std::string rest = colon == std::string::npos ? "" : fault.substr(colon + 1);
    const std::size_t mode_at = rest.find(':');
    const std::string digits = rest.substr(0, mode_at);
    const std::string mode = mode_at == std::string::npos ? "" : rest.substr(mode_at + 1);
    if (host.empty() || digits.empty() ||
        digits.find_first_not_of("0123456789") != std::string::npos ||
        !(mode.empty() || mode == "hang" || mode == "stop")) {
      return invalid_argument("CHORUS_TEST_FAIL_AT_COMMIT='" + faults +
                              "': expected HOST:NUMBER, HOST:NUMBER:hang or HOST:NUMBER:stop, "
                              "separated by commas");
    }
    if (std::stoull(digits) != number) continue;
    // Every node holds the commit before a host goes.
    if (Status s = barrier().wait(); !s.ok()) return s;
    if (host != host_name()) continue;
    if (mode == "hang") {
      log().error("CHORUS_TEST_FAIL_AT_COMMIT: rank {} on {} hangs after commit {}", rank(), host,
                  number);
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    }
    if (mode == "stop") {
      // The whole process stops, Chorus's threads too, as a SIGSTOP from outside would; the
      // test may cut the host's network, then let it go on (SIGCONT).
      log().error("CHORUS_TEST_FAIL_AT_COMMIT: rank {} on {} stops (SIGSTOP) after commit {}",
                  rank(), host, number);
      raise(SIGSTOP);
      continue;
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    die("CHORUS_TEST_FAIL_AT_COMMIT: after commit " + std::to_string(number) +
        ", with the node's commits");
  }
  return {};
}

}  // namespace

StatusOr<std::string> commit_dir() {
  StatusOr<std::shared_ptr<Runtime>> rt = running("commit_dir");
  if (!rt.ok()) return rt.status();
  const Config& config = (*rt)->config();
  if (config.elastic_job.empty()) return std::string();
  const std::string host = host_name();
  if (host.empty()) return Status(StatusCode::kInternal, "commit_dir: gethostname failed");
  return config.elastic_dir + "/chorus-elastic-" + config.elastic_job + "/" + host;
}

Status store_commit(const std::string& dir, uint64_t number, std::string_view bytes) {
  StatusOr<std::shared_ptr<Runtime>> rt = running("store_commit");
  if (!rt.ok()) return rt.status();
  const Config& config = (*rt)->config();
  if (local_rank() == 0) {
    if (Status s = CommitStore(dir, static_cast<int>(config.elastic_keep)).write(number, bytes);
        !s.ok()) {
      return s;
    }
  }
  return test_fault_after_commit(config, dir, number);
}

Status store_commit_async(const std::string& dir, uint64_t number,
                          std::function<std::string()> bytes) {
  StatusOr<std::shared_ptr<Runtime>> rt = running("store_commit_async");
  if (!rt.ok()) return rt.status();
  const Config& config = (*rt)->config();
  if (local_rank() == 0) {
    CommitWriter& writer = process_commit_writer();
    if (Status s =
            writer.submit(dir, static_cast<int>(config.elastic_keep), number, std::move(bytes));
        !s.ok()) {
      return s;
    }
    // The fault waits for every node's store to hold the commit before its host goes.
    if (!config.test_fail_at_commit.empty()) {
      if (Status s = writer.flush(); !s.ok()) return s;
    }
  }
  return test_fault_after_commit(config, dir, number);
}

Status flush_commits() {
  // The process's writer: also once Chorus stopped, so that no commit handed over is lost.
  return process_commit_writer().flush();
}

uint64_t commits_replaced() { return process_commit_writer().replaced(); }

Status remove_commits(const std::string& dir) {
  StatusOr<std::shared_ptr<Runtime>> rt = running("remove_commits");
  if (!rt.ok()) return rt.status();
  if (local_rank() != 0) return {};
  if (Status s = process_commit_writer().flush(); !s.ok()) return s;
  if (Status s = CommitStore(dir).remove_all(); !s.ok()) return s;
  // The job's folder goes with its last node store (on a shared /dev/shm, the last host's).
  std::error_code ec;
  std::filesystem::remove(std::filesystem::path(dir).parent_path(), ec);
  return {};
}

StatusOr<bool> hosts_added() {
  StatusOr<std::shared_ptr<Runtime>> rt = running("hosts_added");
  if (!rt.ok()) return rt.status();
  const Config& config = (*rt)->config();
  if (config.elastic_supervisor.empty()) return false;
  int32_t added = 0;
  // Rank 0 asks; once the supervisor did not answer, it is not asked again (each try waits
  // up to 2 s for every address while the other ranks wait for the answer).
  static std::atomic<bool> unreachable{false};
  if (rank() == 0 && !unreachable.load()) {
    StatusOr<int64_t> version = ask_hosts_version(config.elastic_supervisor, 2.0);
    if (!version.ok()) {
      unreachable.store(true);
      log().warn("hosts_added: {}; the job will not grow (it runs on)", version.status().message());
    } else {
      // A reset in place started at the version its round was formed at.
      const std::optional<ElasticRound> round = joined_round();
      added = *version > (round ? round->hosts_version : config.elastic_hosts_version) ? 1 : 0;
    }
  }
  if (Status s =
          broadcast("chorus.elastic.hosts", TensorRef{&added, DataType::kInt32, {1}, {}}, 0).wait();
      !s.ok()) {
    return s;
  }
  return added != 0;
}

// Every rank tells what its node holds ({number + 1, or 0 for none; 1 if its store could not
// be read}); the highest number wins, and the lowest rank holding it sends its size, then
// its bytes.
StatusOr<std::optional<CommittedState>> newest_commit(const std::string& dir) {
  StatusOr<std::shared_ptr<Runtime>> rt = running("newest_commit");
  if (!rt.ok()) return rt.status();
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
  // What the job resumes from is the newest commit of every node from now on: newer files a
  // node holds (torn, or left by a launch that was not agreed on) go.
  const uint64_t agreed = newest > 0 ? static_cast<uint64_t>(newest - 1) : 0;
  if (local_rank() == 0) {
    if (Status s = CommitStore(dir).drop_after(agreed); !s.ok()) {
      return Status(StatusCode::kInternal, "newest_commit: " + s.message());
    }
  }
  if (source < 0) return std::optional<CommittedState>();
  CommittedState state;
  state.number = agreed;
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
  test_fault_in_restore((*rt)->config(), state.number);
  return std::optional<CommittedState>(std::move(state));
}

int64_t start_number() {
  std::shared_ptr<Runtime> rt = current_runtime();
  return rt ? job_start(rt->config()) : 0;
}

bool resets_in_place() {
  std::shared_ptr<Runtime> rt = current_runtime();
  return rt && !rt->config().elastic_rendezvous.empty();
}

Status reset() { return restart_runtime(); }

// Every rank tells the number it holds; the highest wins, and where some rank lacks it, the
// lowest rank holding it sends its size, then its bytes.
StatusOr<CommittedState> newest_held_commit(uint64_t mine,
                                            const std::function<std::string()>& bytes) {
  StatusOr<std::shared_ptr<Runtime>> rt = running("newest_held_commit");
  if (!rt.ok()) return rt.status();
  int64_t number = static_cast<int64_t>(mine);
  Handle numbers = allgather("chorus.elastic.held", TensorRef{&number, DataType::kInt64, {1}, {}});
  if (Status s = numbers.wait(); !s.ok()) return s;
  const auto* all = static_cast<const int64_t*>(numbers.output().data);
  int64_t newest = 0;
  int source = -1;
  bool everyone = true;
  for (int r = 0; r < size(); ++r) {
    if (all[r] > newest) {
      newest = all[r];
      source = r;
    }
  }
  for (int r = 0; r < size(); ++r) everyone = everyone && all[r] == newest;
  CommittedState state;
  state.number = static_cast<uint64_t>(newest);
  if (newest == 0 || everyone) {
    test_fault_in_restore((*rt)->config(), state.number);
    return state;
  }
  std::string sent = rank() == source ? bytes() : std::string();
  int64_t length = static_cast<int64_t>(sent.size());
  if (Status s = broadcast("chorus.elastic.held.size",
                           TensorRef{&length, DataType::kInt64, {1}, {}}, source)
                     .wait();
      !s.ok()) {
    return s;
  }
  sent.resize(static_cast<std::size_t>(length));
  if (Status s = broadcast("chorus.elastic.held.bytes",
                           TensorRef{sent.data(), DataType::kUInt8, {length}, {}}, source)
                     .wait();
      !s.ok()) {
    return s;
  }
  if (static_cast<uint64_t>(all[rank()]) != state.number) state.bytes = std::move(sent);
  test_fault_in_restore((*rt)->config(), state.number);
  return state;
}

}  // namespace chorus::elastic
