#include "core/runtime.h"

#include <pthread.h>
#include <sys/prctl.h>

namespace chorus {
namespace {

// CHORUS_CYCLE_TIME: how long the background thread sleeps between cycles without work.
std::chrono::microseconds cycle_time(const Config& config) {
  return std::chrono::microseconds(static_cast<int64_t>(config.cycle_time_ms * 1000));
}

}  // namespace

StatusOr<std::shared_ptr<Runtime>> Runtime::start(const Options& options, WorldFactory make_world) {
  StatusOr<Config> config = Config::load(options);
  if (!config.ok()) return config.status();
  if (!make_world) {
    StatusOr<ChosenWorld> chosen =
        choose_world({config->controller, config->rendezvous, config->gloo_iface,
                      config->store_port, config->elastic_rendezvous, config->elastic_worker},
                     process_env());
    if (!chosen.ok()) return chosen.status();
    config->controller = chosen->controller;  // as controller() reports it
    make_world = std::move(chosen->make);
  }
  std::shared_ptr<Runtime> rt(new Runtime(std::move(config).value()));
  rt->handle_driver_ = std::shared_ptr<detail::Driver>(rt, &rt->driver_);
  std::promise<Status> started;
  std::future<Status> ready = started.get_future();
  rt->thread_ = std::thread(&Runtime::run, rt.get(), std::move(make_world), std::move(started));
  Status s = ready.get();
  if (!s.ok()) {
    rt->thread_.join();
    return s;
  }
  return rt;
}

Runtime::~Runtime() { shutdown(); }

Status Runtime::shutdown() {
  submissions_.request_stop();
  doorbells_.ring();
  if (thread_.joinable()) thread_.join();
  return submissions_.shutdown_status();
}

Handle Runtime::submit(std::span<Entry> entries) {
  std::shared_ptr<detail::HandleState> handle = entries.front().handle;
  handle->driver = handle_driver_;
  for (const Entry& e : entries) {
    if (Status s = check_request(e.request); !s.ok()) {
      return Handle(detail::HandleState::failed(std::move(s)));
    }
  }
  if (Status s = process_sets_.claim(entries, map_.rank); !s.ok()) {
    return Handle(detail::HandleState::failed(std::move(s)));
  }
  // Entries of one submit stay adjacent in the queue: SetTable::accept takes them as a unit.
  if (!submissions_.push(entries)) {
    // Chorus stopped: the entries stay with the caller, their names leave flight.
    for (const Entry& e : entries) process_sets_.release(e);
    return Handle(detail::HandleState::failed(stopped(op_type_name(entries.front().request.op))));
  }
  driver_.submitted(handle.get());
  return Handle(std::move(handle));
}

// The observability service reaches the sets through two closures, both called under
// progress_mu_ (the service's thread contract): the executors follow the active timeline,
// and a flight record lists the sets and their entries outstanding.
Runtime::Runtime(Config config)
    : config_(std::move(config)),
      observability_(
          {config_.debug_dir, config_.timeline_max_mb,
           [this](Timeline* timeline) {
             progress_mu_.assert_held();
             for (auto& [id, set] : sets_) set->executor->set_timeline(timeline);
           },
           [this](SetMembers* members, std::vector<Observability::Pending>* pending) {
             progress_mu_.assert_held();
             for (const auto& [id, set] : sets_) {
               (*members)[id] = set->ranks;
               const int32_t set_id = id;  // a structured binding is not captured
               set->entries.for_each([&](const Entry& e) { pending->push_back({set_id, &e}); });
             }
           }}),
      sets_(&process_sets_, &observability_),
      driver_(&progress_mu_, &sets_, &submissions_, &doorbells_, &observability_,
              cycle_time(config_), Autotuner::make(config_)) {}

// Only rank 0 writes a timeline unless its path holds "{rank}": elsewhere a start of rank
// 0's file is a stop, since any rank may have a file of its own from an earlier start (a
// switch closes the old file everywhere). Every rank refuses when Chorus is not running.
Status Runtime::request_timeline(std::string path, bool mark_cycles) {
  if (std::this_thread::get_id() == bg_thread_id_) {
    return failed_precondition(std::string(path.empty() ? "stop_timeline" : "start_timeline") +
                               ": called on Chorus's background thread");
  }
  const std::string call = path.empty() ? "stop_timeline" : "start_timeline";
  if (!running()) return stopped(call);
  // A start of rank 0's file elsewhere closes this rank's own file, if it has one.
  if (map_.rank != 0 && !path.empty() && !timeline_on_every_rank(path)) path.clear();
  Submissions::TimelineRequest request;
  request.path = std::move(path);
  request.mark_cycles = mark_cycles;
  std::future<Status> done = request.done.get_future();
  if (!submissions_.push(std::move(request))) return stopped(call);
  doorbells_.ring();
  return done.get();
}

void Runtime::run(const WorldFactory& make_world, std::promise<Status> started) {
  pthread_setname_np(pthread_self(), "chorus-bg");
  bg_thread_id_ = std::this_thread::get_id();
  // Short sleeps in the poll loop should last what they ask for, not the default 50 us slack.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  {
    MutexLock progress(progress_mu_);
    Status s = setup(make_world);
    if (!s.ok()) {
      sets_.close(s, false);
      topology_groups_ = {};
      if (world_) world_->finalize();
      started.set_value(s);
      return;
    }
  }
  submissions_.set_running();
  started.set_value(Status());
  driver_.loop([this](const CycleDriver::Ended& ended) {
    progress_mu_.assert_held();
    // Stopped before the handles fail: a thread that sees its handle fail and submits again
    // must find Chorus stopped, not a queue that no one will take.
    std::vector<Entry> queued;
    submissions_.stop(ended.status, &queued);
    // No entry failed here has device work queued: every round's batches completed before
    // the round ended (Executor::execute).
    for (Entry& e : queued) sets_.release(e, ended.status);
    observability_.stop();
    // After a failure the ranks are out of step: the sets' GPU communicators are aborted.
    sets_.close(ended.status, !ended.mpi_usable);
    topology_groups_ = {};
    // After a failed round MPI may hold requests that never complete, and finalizing could
    // hang: MPI is then left to the process's exit.
    submissions_.set_shutdown_status(ended.mpi_usable ? world_->finalize() : ended.status);
  });
}

}  // namespace chorus
