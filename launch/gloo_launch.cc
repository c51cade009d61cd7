#include "gloo_launch.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>

#include "command.h"

extern char** environ;

namespace chorus::launch {
namespace {

bool port_free(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

std::atomic<int> g_signal{0};
void note_signal(int sig) { g_signal.store(sig); }

}  // namespace

bool is_this_host(const std::string& host, const std::string& local_host) {
  return host == local_host || host == "localhost" || host == "127.0.0.1";
}

RankStart start_on(const std::string& host, const std::vector<std::string>& vars,
                   const std::vector<std::string>& program, const GlooJob& job, const Env& env,
                   const std::string& local_host) {
  if (is_this_host(host, local_host)) return {program, vars, false};
  // ssh runs one shell line: the directory, then the rank (the variables, the program, each
  // quoted) beside a watcher of the line's input, which chorusrun holds open for the rank's
  // life: when it closes (chorusrun or its ssh ended, the connection lost, or chorusrun ends
  // the rank) the watcher ends the rank, SIGTERM then SIGKILL, where the remote shell would
  // leave it running (the program is exec'd by env, so the rank is that process). A shell
  // without job control gives a background list /dev/null for input, so the watcher reads
  // the line's input through fd 3; the line exits with the rank's status.
  std::string line = "cd " + shell_quote(job.cwd) + " || exit 127; exec 3<&0; env";
  for (const auto& [name, value] : env) {
    const bool ours = std::any_of(vars.begin(), vars.end(), [&](const std::string& v) {
      return v.compare(0, name.size() + 1, name + "=") == 0;
    });
    if (forwarded_to_ranks(name) && !ours) line += " " + shell_quote(name + "=" + value);
  }
  for (const std::string& v : vars) line += " " + shell_quote(v);
  for (const std::string& w : program) line += " " + shell_quote(w);
  line +=
      " </dev/null 3<&- & r=$!; (cat <&3; kill -TERM $r; sleep 5; kill -KILL $r) >/dev/null "
      "2>&1 & w=$!; exec 3<&-; wait $r; c=$?; kill $w 2>/dev/null; exit $c";
  RankStart start;
  start.argv = job.rsh;
  start.argv.push_back(host);
  start.argv.push_back(line);
  start.remote = true;
  return start;
}

std::vector<RankStart> gloo_starts(const Plan& plan, const std::vector<std::string>& program,
                                   const GlooJob& job, const Env& env,
                                   const std::string& local_host) {
  std::vector<RankStart> out;
  for (std::size_t h = 0; h < plan.hosts.size(); ++h) {
    const Placement& p = plan.hosts[h];
    for (int local = 0; local < p.ranks; ++local) {
      const std::vector<std::string> vars = {"RANK=" + std::to_string(p.first_rank + local),
                                             "WORLD_SIZE=" + std::to_string(plan.np),
                                             "LOCAL_RANK=" + std::to_string(local),
                                             "LOCAL_WORLD_SIZE=" + std::to_string(p.ranks),
                                             "GROUP_RANK=" + std::to_string(h),
                                             "MASTER_ADDR=" + job.master_addr,
                                             "MASTER_PORT=" + std::to_string(job.master_port),
                                             "CHORUS_CONTROLLER=gloo"};
      out.push_back(start_on(p.host, vars, program, job, env, local_host));
    }
  }
  return out;
}

int free_port_pair() {
  std::mt19937 pick(static_cast<unsigned>(getpid()) ^ static_cast<unsigned>(time(nullptr)));
  for (int tries = 0; tries < 200; ++tries) {
    const int port = 20000 + static_cast<int>(pick() % 40000);
    if (port_free(port) && port_free(port + 1)) return port;
  }
  return 29500;
}

pid_t spawn(const RankStart& start, int remote_input) {
  // The rank's variables replace chorusrun's own of the same names (getenv takes the first).
  std::vector<std::string> env_text;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const std::string name = kv.substr(0, kv.find('=') + 1);
    const bool replaced =
        std::any_of(start.env.begin(), start.env.end(),
                    [&](const std::string& v) { return v.compare(0, name.size(), name) == 0; });
    if (!replaced) env_text.push_back(kv);
  }
  env_text.insert(env_text.end(), start.env.begin(), start.env.end());
  std::vector<char*> envp, argv;
  for (std::string& kv : env_text) envp.push_back(kv.data());
  envp.push_back(nullptr);
  for (const std::string& a : start.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    // A rank (or its remote shell) does not outlive chorusrun.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    // No rank reads chorusrun's input (a remote shell would take it, or stop on SIGTTIN in
    // the background): a local rank reads /dev/null, a remote one the pipe chorusrun holds.
    const int in_fd = start.remote ? remote_input : open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (in_fd >= 0) dup2(in_fd, STDIN_FILENO);
    execvpe(argv[0], argv.data(), envp.data());
    std::fprintf(stderr, "chorusrun: error: cannot run '%s': %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  return pid;
}

int run_gloo_job(const std::vector<RankStart>& starts) {
  struct sigaction sa {};
  sa.sa_handler = note_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::vector<pid_t> pids;
  int verdict_at_start = 0;
  // The remote ranks' input (gloo_starts): open, never written, until chorusrun ends.
  int held[2] = {-1, -1};
  const bool any_remote =
      std::any_of(starts.begin(), starts.end(), [](const RankStart& s) { return s.remote; });
  if (any_remote && pipe2(held, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "chorusrun: error: pipe: %s\n", std::strerror(errno));
    return 1;
  }
  for (const RankStart& s : starts) {
    const pid_t pid = spawn(s, held[0]);
    if (pid < 0) {
      std::fprintf(stderr, "chorusrun: error: fork: %s\n", std::strerror(errno));
      verdict_at_start = 1;
      break;
    }
    pids.push_back(pid);
  }
  // The first failure (or a signal to chorusrun) ends the others: SIGTERM, then SIGKILL.
  int verdict = verdict_at_start;
  std::size_t running = pids.size();
  time_t ending_since = 0;
  while (running > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      --running;
      std::size_t rank = 0;
      while (rank < pids.size() && pids[rank] != pid) ++rank;
      if (rank == pids.size()) {
        ++running;  // not a rank: a child chorusrun did not start
        continue;
      }
      pids[rank] = 0;
      const int code = WIFEXITED(status)     ? WEXITSTATUS(status)
                       : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                             : 1;
      if (code != 0 && verdict == 0) {
        verdict = code;
        if (WIFSIGNALED(status)) {
          std::fprintf(
              stderr,
              "chorusrun: rank %zu (pid %d) was killed by signal %d (%s); ending the other ranks\n",
              rank, pid, WTERMSIG(status), strsignal(WTERMSIG(status)));
        } else {
          std::fprintf(
              stderr,
              "chorusrun: rank %zu (pid %d) exited with status %d; ending the other ranks\n", rank,
              pid, code);
        }
      }
      continue;
    }
    if (g_signal.load() != 0 && verdict == 0) verdict = 128 + g_signal.load();
    if (verdict != 0) {
      if (ending_since == 0) ending_since = time(nullptr);
      const int sig = time(nullptr) - ending_since > 10 ? SIGKILL : SIGTERM;
      for (pid_t p : pids) {
        if (p > 0) kill(p, sig);
      }
    }
    usleep(verdict != 0 ? 200000 : 20000);
  }
  for (int fd : held) {
    if (fd >= 0) close(fd);
  }
  return verdict;
}

}  // namespace chorus::launch
