#include "gloo_elastic.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <thread>

#include "elastic_job.h"
#include "elastic_rounds.h"
#include "hosts_notice.h"
#include "transport/tcp_store.h"

namespace chorus::launch {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int> g_signal{0};
void note_signal(int sig) { g_signal.store(sig); }

// A worker's process: its pid (0 once reaped), and for a remote one the pipe whose closing
// ends it there (gloo_launch.h's start_on).
struct Process {
  pid_t pid = 0;
  int input = -1;
};

class Supervision {
 public:
  Supervision(const Cli& cli, const Env& env, const GlooJob& job, std::string local_host,
              std::string store_address, std::string notice_address, std::string job_name)
      : cli_(cli),
        env_(env),
        job_(job),
        local_host_(std::move(local_host)),
        store_address_(std::move(store_address)),
        notice_address_(std::move(notice_address)),
        job_name_(std::move(job_name)) {}

  void start_worker(const std::string& host, ElasticRounds* rounds) {
    const std::string id = "w" + std::to_string(++started_);
    const RankStart start =
        start_on(host, worker_vars(id, store_address_, notice_address_, job_name_), cli_.program,
                 job_, env_, local_host_);
    int held[2] = {-1, -1};
    if (start.remote && pipe2(held, O_CLOEXEC) != 0) held[0] = held[1] = -1;
    Process p;
    p.pid = spawn(start, held[0]);
    if (held[0] >= 0) close(held[0]);
    p.input = held[1];
    if (p.pid < 0) {
      std::fprintf(stderr, "chorusrun: error: cannot start worker %s on %s: %s\n", id.c_str(),
                   host.c_str(), std::strerror(errno));
      p.pid = 0;
      if (p.input >= 0) close(p.input);
      p.input = -1;
    }
    processes_[id] = p;
    rounds->started(id, host);
    if (p.pid == 0) rounds->ended(id, 127, Clock::now());
  }

  // Ends a worker: SIGKILL here, and for a remote one its line's input closes, so that the
  // watcher there ends it.
  void stop(const std::string& id, int sig) {
    Process& p = processes_[id];
    if (p.pid > 0) kill(p.pid, sig);
    if (sig == SIGKILL && p.input >= 0) {
      close(p.input);
      p.input = -1;
    }
  }

  // The workers that ended since the last call, with their status (128 + signal).
  std::vector<std::pair<std::string, int>> reap() {
    std::vector<std::pair<std::string, int>> out;
    int status = 0;
    for (pid_t pid; (pid = waitpid(-1, &status, WNOHANG)) > 0;) {
      for (auto& [id, p] : processes_) {
        if (p.pid != pid) continue;
        p.pid = 0;
        if (p.input >= 0) close(p.input);
        p.input = -1;
        out.emplace_back(id, WIFEXITED(status)     ? WEXITSTATUS(status)
                             : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                                   : 1);
      }
    }
    return out;
  }

  bool any_running() const {
    for (const auto& [id, p] : processes_) {
      if (p.pid > 0) return true;
    }
    return false;
  }

  // Every worker still running ends: `sig`, then SIGKILL after 10 s.
  void end_all(int sig) {
    for (auto& [id, p] : processes_) {
      if (p.pid > 0) stop(id, sig);
    }
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (any_running()) {
      reap();
      if (Clock::now() > deadline) {
        for (auto& [id, p] : processes_) {
          if (p.pid > 0) stop(id, SIGKILL);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

 private:
  const Cli& cli_;
  const Env& env_;
  const GlooJob& job_;
  std::string local_host_;
  std::string store_address_;
  std::string notice_address_;
  std::string job_name_;
  int started_ = 0;
  std::map<std::string, Process> processes_;
};

double liveness_seconds(const Env& env) {
  auto it = env.find("CHORUS_LIVENESS_SECONDS");
  const double given = it == env.end() ? 0 : std::atof(it->second.c_str());
  return given > 0 ? given : 60.0;
}

}  // namespace

std::vector<std::string> worker_vars(const std::string& id, const std::string& store_address,
                                     const std::string& notice_address,
                                     const std::string& job_name) {
  return {"CHORUS_CONTROLLER=gloo", "CHORUS_ELASTIC_RENDEZVOUS=" + store_address,
          "CHORUS_ELASTIC_WORKER=" + id, "CHORUS_ELASTIC_JOB=" + job_name,
          "CHORUS_ELASTIC_SUPERVISOR=" + notice_address};
}

int supervise_gloo_job(const Cli& cli, const Env& env, const Allocation& allocation,
                       const Plan& plan, const GlooJob& job, const std::string& local_host,
                       const std::string& job_name) {
  StatusOr<std::unique_ptr<TcpStoreServer>> server = TcpStoreServer::listen(0);
  StatusOr<std::unique_ptr<HostsNotice>> notice = HostsNotice::start();
  for (const Status& s : {server.status(), notice.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "chorusrun: error: %s\n", s.message().c_str());
      return 2;
    }
  }
  const int port = (*server)->port();
  StatusOr<std::shared_ptr<TcpRendezvous>> store =
      TcpRendezvous::connect_client("chorusrun", "127.0.0.1", port, std::chrono::seconds(5));
  if (!store.ok()) {
    std::fprintf(stderr, "chorusrun: error: %s\n", store.status().message().c_str());
    return 2;
  }
  // The workers reach the store by any of chorusrun's addresses, as they reach the notice.
  const std::string& notice_address = (*notice)->address();
  const std::string store_address =
      notice_address.substr(0, notice_address.rfind(':')) + ":" + std::to_string(port);
  const ElasticRequest request = elastic_request(cli);
  const auto bound =
      std::chrono::milliseconds(static_cast<int64_t>((liveness_seconds(env) + 10) * 1000));

  struct sigaction sa {};
  sa.sa_handler = note_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::fprintf(stderr, "chorusrun: elastic job %s (CHORUS_ELASTIC_JOB), resetting in place\n",
               job_name.c_str());
  ElasticRounds rounds(request, bound);
  Supervision workers(cli, env, job, local_host, store_address, notice_address, job_name);
  for (const Placement& p : plan.hosts) {
    for (int k = 0; k < p.ranks; ++k) workers.start_worker(p.host, &rounds);
  }
  auto last_discovery = Clock::now();
  for (;;) {
    const auto now = Clock::now();
    for (const auto& [id, status] : workers.reap()) rounds.ended(id, status, now);
    for (const auto& [id, key] : rounds.awaited_asks()) {
      StatusOr<bool> asked = (*store)->check(key);
      if (asked.ok() && *asked) rounds.joined(id, now);
    }
    if (!request.discovery_script.empty() && now - last_discovery > std::chrono::seconds(2)) {
      last_discovery = now;
      StatusOr<std::vector<Host>> found = elastic_hosts(request, allocation);
      const std::set<std::string> in_use = rounds.hosts_in_use();
      int room =
          request.max_np ? *request.max_np - static_cast<int>(rounds.live().size()) : 1 << 30;
      std::string added;
      for (const Host& h : found.ok() ? *found : std::vector<Host>()) {
        if (in_use.count(h.name) || rounds.excluded().count(h.name) || room <= 0) continue;
        const int n = std::min(room, request.ppr.value_or(h.slots));
        for (int k = 0; k < n; ++k) workers.start_worker(h.name, &rounds);
        room -= n;
        added += (added.empty() ? "" : ",") + h.name + ":" + std::to_string(n);
      }
      if (!added.empty()) {
        std::fprintf(stderr,
                     "chorusrun: hosts added (%s): their workers join at the job's next commit\n",
                     added.c_str());
        (*notice)->bump();
      }
    }
    const ElasticRounds::Decision d = rounds.step(now, (*notice)->version());
    for (const auto& [key, answer] : d.answers) {
      if (Status s = (*store)->set(key, answer); !s.ok()) {
        std::fprintf(stderr, "chorusrun: error: %s\n", s.message().c_str());
      }
    }
    for (const std::string& id : d.stop) workers.stop(id, SIGKILL);
    for (const std::string& line : d.lines) std::fprintf(stderr, "%s\n", line.c_str());
    if (d.end) {
      workers.end_all(SIGKILL);
      return *d.end;
    }
    if (const int sig = g_signal.load(); sig != 0) {
      std::fprintf(stderr, "chorusrun: %s: ending the workers; the job is not restarted\n",
                   strsignal(sig));
      workers.end_all(sig);
      return 128 + sig;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace chorus::launch
