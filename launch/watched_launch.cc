#include "watched_launch.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

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
  int err[2];
  if (pipe(err) != 0) {
    result.wait_status = 127 << 8;
    result.stderr_text = std::string("cannot make a pipe: ") + std::strerror(errno);
    return result;
  }
  struct sigaction sa {};
  sa.sa_handler = forward_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(err[1], STDERR_FILENO);
    close(err[0]);
    close(err[1]);
    for (const std::string& kv : env_overrides) putenv(const_cast<char*>(kv.c_str()));
    std::vector<char*> cargv;
    for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    execvp(cargv[0], cargv.data());
    std::fprintf(stderr, "chorusrun: error: cannot run '%s': %s\n", cargv[0], std::strerror(errno));
    _exit(127);
  }
  close(err[1]);
  g_child.store(pid);
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
