#include "watched_launch.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

extern char** environ;

namespace chorus::launch {
namespace {

std::atomic<pid_t> g_child{0};
std::atomic<int> g_cancelled{0};

void forward_signal(int sig) {
  g_cancelled.store(sig);
  const pid_t child = g_child.load();
  if (child > 0) kill(child, sig);
}

// The launcher's stderr kept for classify_end(): its last 64 KiB.
constexpr std::size_t kKept = 64 * 1024;

}  // namespace

LaunchResult run_watched(const std::vector<std::string>& argv,
                         const std::vector<std::string>& env_overrides,
                         const std::function<void()>& tick) {
  LaunchResult result;
  // A cancel that came between launches starts nothing.
  if (g_cancelled.load()) {
    result.wait_status = (128 + g_cancelled.load()) << 8;
    result.cancelled_by = g_cancelled.load();
    return result;
  }
  // Everything the child needs is made before fork(): after it, the child only execs (the
  // hosts notice's thread may hold the allocator's lock at the moment of the fork).
  std::vector<std::string> env_text;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const std::string name = kv.substr(0, kv.find('='));
    const bool overridden = std::any_of(
        env_overrides.begin(), env_overrides.end(),
        [&](const std::string& o) { return o.compare(0, name.size() + 1, name + "=") == 0; });
    if (!overridden) env_text.push_back(kv);
  }
  env_text.insert(env_text.end(), env_overrides.begin(), env_overrides.end());
  std::vector<char*> envp;
  for (std::string& kv : env_text) envp.push_back(kv.data());
  envp.push_back(nullptr);
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);

  int err[2];
  if (pipe(err) != 0) {
    result.wait_status = 127 << 8;
    result.not_started = std::string("cannot make a pipe: ") + std::strerror(errno);
    return result;
  }
  struct sigaction sa {};
  sa.sa_handler = forward_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // Held back over fork(), so that a signal reaches the launcher once it runs: the child
  // takes the default actions back before it unblocks them.
  sigset_t block, before;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  sigprocmask(SIG_BLOCK, &block, &before);
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    sigprocmask(SIG_SETMASK, &before, nullptr);
    dup2(err[1], STDERR_FILENO);
    close(err[0]);
    close(err[1]);
    execvpe(cargv[0], cargv.data(), envp.data());
    const char* why = std::strerror(errno);
    (void)!write(STDERR_FILENO, "chorusrun: error: cannot run the launcher: ", 43);
    (void)!write(STDERR_FILENO, why, std::strlen(why));
    (void)!write(STDERR_FILENO, "\n", 1);
    _exit(127);
  }
  const int fork_errno = errno;
  if (pid > 0) g_child.store(pid);
  sigprocmask(SIG_SETMASK, &before, nullptr);
  close(err[1]);
  if (pid < 0) {
    close(err[0]);
    result.wait_status = 127 << 8;
    result.not_started = std::string("cannot fork: ") + std::strerror(fork_errno);
    return result;
  }
  if (g_cancelled.load()) kill(pid, g_cancelled.load());
  time_t last_tick = time(nullptr);
  bool open = true;
  char chunk[4096];
  while (open) {
    pollfd p{err[0], POLLIN, 0};
    const int ready = poll(&p, 1, 1000);
    if (ready > 0) {
      const ssize_t n = read(err[0], chunk, sizeof(chunk));
      if (n > 0) {
        (void)!write(STDERR_FILENO, chunk, static_cast<std::size_t>(n));
        result.stderr_text.append(chunk, static_cast<std::size_t>(n));
        if (result.stderr_text.size() > 2 * kKept) result.stderr_text.erase(0, kKept);
      } else if (n == 0 || errno != EINTR) {
        open = false;
      }
    }
    if (time(nullptr) != last_tick) {
      last_tick = time(nullptr);
      if (!g_cancelled.load()) tick();
    }
  }
  close(err[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_child.store(0);
  result.wait_status = status;
  result.cancelled_by = g_cancelled.load();
  return result;
}

}  // namespace chorus::launch
