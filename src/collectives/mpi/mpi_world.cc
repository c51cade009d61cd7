#include "collectives/mpi/mpi_world.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <thread>

#include "collectives/and_schedule.h"
#include "collectives/backoff.h"
#include "collectives/clock_offset.h"
#include "collectives/mpi/mpi_backend.h"
#include "collectives/mpi/mpi_check.h"
#include "collectives/mpi/mpi_links.h"
#include "collectives/mpi/mpi_wait.h"
#include "collectives/shm/shm_backend.h"

namespace chorus {
namespace {

// The control transport over MPI. The round's AND is a non-blocking recursive doubling of
// our own over MPI_Isend/MPI_Irecv, advanced by test_and(): a rank waiting for an idle peer
// can still sleep, stop or report, and a round among ranks that are all present costs a
// few point-to-point messages. The round is on every collective's path, and this costs
// less than MPI_Iallreduce (docs/performance.md).
//
// The steps are collectives/and_schedule.h's.
class MpiControl final : public ControlTransport {
 public:
  explicit MpiControl(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    schedule_ = AndSchedule(rank_, size_);
    std::vector<int> members(static_cast<std::size_t>(size_));
    std::iota(members.begin(), members.end(), 0);
    in_job_ = ranks_in_job(comm_, members);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int job_rank(int member) const override { return in_job_.at(static_cast<std::size_t>(member)); }

  Status start_and(std::vector<uint64_t>* bits) override {
    bits_ = bits;
    incoming_.resize(bits->size());
    step_ = kFoldIn;
    return post();
  }

  StatusOr<bool> test_and() override {
    while (step_ != kDone) {
      int done = 0;
      CHORUS_MPI_CHECK(MPI_Testall(2, requests_, &done, MPI_STATUSES_IGNORE));
      if (!done) return false;
      if (receiving_) {
        for (std::size_t i = 0; i < bits_->size(); ++i) (*bits_)[i] &= incoming_[i];
      }
      step_ = schedule_.next(step_);
      if (Status s = post(); !s.ok()) return s;
    }
    return true;
  }

  std::vector<int> missing() const override { return schedule_.missing(step_); }

  void set_liveness(double seconds) override { liveness_seconds_ = seconds; }

  // A roll call: missing() says whose bits have not come, directly or through a partner, but
  // a member stuck in the round looks missing to its partners like the one it waits for. So
  // every member whose wait ran out tells every other that it is here (announce), and
  // listens for kRollCallGrace: the members neither heard from in the round nor in the roll
  // call are absent. Members waiting for the same thing run out within a cycle or so of
  // each other. The sends to absent members never complete; MPI is not used again after.
  std::vector<int> absent() override {
    std::vector<bool> heard(size_, true);
    for (int r : missing()) heard[r] = false;
    announce();
    return listen_for(comm_, kRollCallTag, std::move(heard));
  }

  void announce() override { announce_here(comm_, kRollCallTag); }

  // Non-blocking underneath, so that a member that stopped between the round and this call
  // (killed, or stopped by a signal) fails the wait after the liveness bound instead of
  // holding this rank in MPI for ever.
  StatusOr<std::vector<std::string>> gather(const std::string& mine) override {
    int len = static_cast<int>(mine.size());
    std::vector<int> lens(rank_ == 0 ? size_ : 0), displs(lens.size());
    MPI_Request req = MPI_REQUEST_NULL;
    CHORUS_MPI_CHECK(MPI_Igather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, comm_, &req));
    if (Status s = finish(&req, "gather"); !s.ok()) return s;
    std::string all;
    if (rank_ == 0) {
      int64_t total = 0;
      for (int r = 0; r < size_; ++r) {
        displs[r] = static_cast<int>(total);
        total += lens[r];
      }
      all.resize(static_cast<std::size_t>(total));
    }
    CHORUS_MPI_CHECK(MPI_Igatherv(mine.data(), len, MPI_BYTE, all.data(), lens.data(),
                                  displs.data(), MPI_BYTE, 0, comm_, &req));
    if (Status s = finish(&req, "gather"); !s.ok()) return s;
    std::vector<std::string> out;
    for (int r = 0; r < static_cast<int>(lens.size()); ++r)
      out.push_back(all.substr(displs[r], lens[r]));
    return out;
  }
  Status broadcast(std::string* data) override {
    int64_t len = static_cast<int64_t>(data->size());
    MPI_Request req = MPI_REQUEST_NULL;
    CHORUS_MPI_CHECK(MPI_Ibcast(&len, 1, MPI_INT64_T, 0, comm_, &req));
    if (Status s = finish(&req, "broadcast"); !s.ok()) return s;
    data->resize(static_cast<std::size_t>(len));
    CHORUS_MPI_CHECK(MPI_Ibcast(data->data(), static_cast<int>(len), MPI_BYTE, 0, comm_, &req));
    return finish(&req, "broadcast");
  }

 private:
  static constexpr int kTag = 7300;
  static constexpr int kRollCallTag = 7301;
  static constexpr int kFoldIn = AndSchedule::kFoldIn;
  static constexpr int kFoldOut = AndSchedule::kFoldOut;
  static constexpr int kDone = AndSchedule::kDone;

  // Waits for `req`: spins first (every member is known to be in the exchange, so it is
  // short), then sleeps between tests. Fails after liveness_seconds_ (0: never).
  Status finish(MPI_Request* req, const char* what) {
    const auto start = std::chrono::steady_clock::now();
    Backoff backoff(std::chrono::microseconds(1000));
    for (uint64_t tests = 1;; ++tests) {
      int done = 0;
      CHORUS_MPI_CHECK(MPI_Test(req, &done, MPI_STATUS_IGNORE));
      if (done) return {};
      if (tests % 1024 == 0 && liveness_seconds_ > 0) {
        const double waited =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (waited > liveness_seconds_) {
          std::vector<bool> heard(size_, false);
          heard[rank_] = true;
          announce();
          const std::vector<int> gone =
              job_ranks(listen_for(comm_, kRollCallTag, std::move(heard)));
          std::string ranks;
          for (int r : gone) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
          char secs[32];
          std::snprintf(secs, sizeof secs, "%.1f", liveness_seconds_);
          return Status(StatusCode::kAborted, "rank " + std::to_string(job_rank(rank_)) +
                                                  " stopped waiting in the coordinator's " + what +
                                                  " after " + secs +
                                                  " s (CHORUS_LIVENESS_SECONDS): ranks [" + ranks +
                                                  "] took no part in it");
        }
      }
      backoff.pause();
    }
  }

  // Posts the messages of the current step (none for a step this rank has no part in;
  // test_and() then moves straight on).
  Status post() {
    requests_[0] = requests_[1] = MPI_REQUEST_NULL;
    receiving_ = false;
    if (step_ == kDone) return {};
    const int n = static_cast<int>(bits_->size());
    auto send = [&](int peer, int slot) -> Status {
      CHORUS_MPI_CHECK(
          MPI_Isend(bits_->data(), n, MPI_UINT64_T, peer, kTag, comm_, &requests_[slot]));
      return {};
    };
    auto receive = [&](int peer, int slot, uint64_t* into) -> Status {
      receiving_ = into == incoming_.data();
      CHORUS_MPI_CHECK(MPI_Irecv(into, n, MPI_UINT64_T, peer, kTag, comm_, &requests_[slot]));
      return {};
    };
    const AndSchedule& sched = schedule_;
    if (step_ == kFoldIn) {
      if (sched.extra()) return send(sched.fold_partner(), 0);
      if (sched.has_extra()) return receive(sched.fold_partner(), 0, incoming_.data());
      return {};
    }
    if (step_ == kFoldOut) {
      if (sched.extra())
        return receive(sched.fold_partner(), 0, bits_->data());  // the final result
      if (sched.has_extra()) return send(sched.fold_partner(), 0);
      return {};
    }
    const int partner = sched.exchange_partner(step_);
    if (Status s = receive(partner, 0, incoming_.data()); !s.ok()) return s;
    return send(partner, 1);
  }

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  AndSchedule schedule_{0, 1};
  std::vector<uint64_t>* bits_ = nullptr;
  std::vector<uint64_t> incoming_;
  std::vector<int> in_job_;  // member -> rank of the job
  MPI_Request requests_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  bool receiving_ = false;  // the current step combines incoming_ into bits_
  double liveness_seconds_ = 0;
  int step_ = kDone;
};

class MpiGroup final : public Group {
 public:
  MpiGroup(MPI_Comm control, MPI_Comm data, const WorldOptions& options)
      : control_comm_(control),
        data_comm_(data),
        liveness_seconds_(options.liveness_seconds),
        control_(control),
        backend_(data, options.host_algorithm, options.liveness_seconds) {}
  ~MpiGroup() override {
    MPI_Comm_free(&control_comm_);
    MPI_Comm_free(&data_comm_);
  }
  int rank() const override { return control_.rank(); }
  int size() const override { return control_.size(); }
  ControlTransport& control() override { return control_; }
  Backend& backend() override { return backend_; }
  StatusOr<std::unique_ptr<Backend>> shared_memory(std::string* why) override {
    return ShmBackend::join(control_, liveness_seconds_, why);
  }

 private:
  MPI_Comm control_comm_;
  MPI_Comm data_comm_;
  double liveness_seconds_;
  MpiControl control_;
  MpiBackend backend_;
};

class MpiWorld final : public World {
 public:
  MpiWorld(MPI_Comm world, bool owns, const WorldOptions& options)
      : world_(world), owns_(owns), options_(options) {
    MPI_Comm_rank(world_, &rank_);
    MPI_Comm_size(world_, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  StatusOr<std::vector<std::string>> host_names() override {
    char mine[MPI_MAX_PROCESSOR_NAME] = {0};
    int len = 0;
    CHORUS_MPI_CHECK(MPI_Get_processor_name(mine, &len));
    return allgather(std::string(mine, strnlen(mine, MPI_MAX_PROCESSOR_NAME)));
  }

  StatusOr<ClockOffset> clock_offset() override {
    MpiLinks links(world_, options_.liveness_seconds);
    return measure_clock_offset(links, steady_clock_ns);
  }

  StatusOr<std::vector<std::string>> allgather(const std::string& mine) override {
    int len = static_cast<int>(mine.size());
    std::vector<int> lens(size_), displs(size_);
    CHORUS_MPI_CHECK(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, world_));
    int64_t total = 0;
    for (int r = 0; r < size_; ++r) {
      displs[r] = static_cast<int>(total);
      total += lens[r];
    }
    std::string all(static_cast<std::size_t>(total), '\0');
    CHORUS_MPI_CHECK(MPI_Allgatherv(mine.data(), len, MPI_BYTE, all.data(), lens.data(),
                                    displs.data(), MPI_BYTE, world_));
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r) out.push_back(all.substr(displs[r], lens[r]));
    return out;
  }

  StatusOr<std::unique_ptr<Group>> create_group(const std::vector<int>& ranks) override {
    auto it = std::find(ranks.begin(), ranks.end(), rank_);
    const bool member = it != ranks.end();
    MPI_Comm data = MPI_COMM_NULL;
    CHORUS_MPI_CHECK(MPI_Comm_split(world_, member ? 0 : MPI_UNDEFINED,
                                    member ? static_cast<int>(it - ranks.begin()) : 0, &data));
    if (!member) return std::unique_ptr<Group>();
    return make_group(data);
  }

  StatusOr<std::unique_ptr<Group>> split(int color, int key) override {
    if (color < 0) return invalid_argument("split: negative color");
    MPI_Comm data = MPI_COMM_NULL;
    CHORUS_MPI_CHECK(MPI_Comm_split(world_, color, key, &data));
    return make_group(data);
  }

  // The group over `data`, with a duplicate of it for control traffic.
  StatusOr<std::unique_ptr<Group>> make_group(MPI_Comm data) {
    MPI_Comm control = MPI_COMM_NULL;
    CHORUS_MPI_CHECK(MPI_Comm_dup(data, &control));
    CHORUS_MPI_CHECK(MPI_Comm_set_errhandler(data, MPI_ERRORS_RETURN));
    CHORUS_MPI_CHECK(MPI_Comm_set_errhandler(control, MPI_ERRORS_RETURN));
    return std::unique_ptr<Group>(new MpiGroup(control, data, options_));
  }

  Status finalize() override {
    if (world_ != MPI_COMM_NULL) CHORUS_MPI_CHECK(MPI_Comm_free(&world_));
    if (owns_) {
      owns_ = false;
      CHORUS_MPI_CHECK(MPI_Finalize());
    }
    return {};
  }

 private:
  MPI_Comm world_;
  bool owns_;
  WorldOptions options_;
  int rank_ = 0;
  int size_ = 1;
};

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    default: return "MPI_THREAD_MULTIPLE";
  }
}

}  // namespace

StatusOr<std::unique_ptr<World>> init_mpi_world(const WorldOptions& options) {
  mpi_detail::t_mpi_thread = true;
  int initialized = 0, finalized = 0;
  CHORUS_MPI_CHECK(MPI_Initialized(&initialized));
  CHORUS_MPI_CHECK(MPI_Finalized(&finalized));
  if (finalized) {
    return failed_precondition(
        "MPI was finalized by an earlier chorus::shutdown() and cannot start twice in one "
        "process; to init Chorus again, initialize MPI yourself (MPI_THREAD_MULTIPLE) first");
  }
  bool owns = false;
  if (!initialized) {
    int provided = 0;
    CHORUS_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided));
    owns = true;
  } else {
    int provided = 0;
    CHORUS_MPI_CHECK(MPI_Query_thread(&provided));
    if (provided < MPI_THREAD_MULTIPLE) {
      return failed_precondition(
          std::string("the program initialized MPI with ") + thread_level_name(provided) +
          "; Chorus's background thread also calls MPI, so initialize it with "
          "MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) or let chorus::init() do it");
    }
  }
  MPI_Comm world = MPI_COMM_NULL;
  CHORUS_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &world));
  CHORUS_MPI_CHECK(MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN));
  return std::unique_ptr<World>(new MpiWorld(world, owns, options));
}

}  // namespace chorus
