#include "core/debug_signal.h"

#include <signal.h>

#include <atomic>

namespace chorus {
namespace {

std::atomic<bool> g_asked{false};
std::atomic<bool> g_installed{false};

void on_sigusr1(int) { g_asked.store(true, std::memory_order_relaxed); }

}  // namespace

bool install_flight_signal() {
  struct sigaction old {};
  if (sigaction(SIGUSR1, nullptr, &old) != 0) return false;
  // An application's handler (either kind) stays.
  if ((old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_DFL) return false;
  struct sigaction mine {};
  mine.sa_handler = on_sigusr1;
  sigemptyset(&mine.sa_mask);
  mine.sa_flags = SA_RESTART;
  if (sigaction(SIGUSR1, &mine, nullptr) != 0) return false;
  g_installed.store(true);
  return true;
}

void remove_flight_signal() {
  if (!g_installed.exchange(false)) return;
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGUSR1, &dfl, nullptr);
}

bool flight_record_asked() { return g_asked.exchange(false, std::memory_order_relaxed); }

}  // namespace chorus
