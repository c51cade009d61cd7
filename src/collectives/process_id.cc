#include "collectives/process_id.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace chorus {
namespace {

uint64_t this_pid_namespace() {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

}  // namespace

void SharedProcessId::set_to_this_process() {
  pid_namespace.store(this_pid_namespace(), std::memory_order_relaxed);
  pid.store(getpid(), std::memory_order_release);
}

bool SharedProcessId::exited() const {
  const int64_t p = pid.load(std::memory_order_acquire);
  const uint64_t ns = pid_namespace.load(std::memory_order_relaxed);
  if (p <= 0 || ns == 0 || ns != this_pid_namespace()) return false;
  return kill(static_cast<pid_t>(p), 0) != 0 && errno == ESRCH;
}

}  // namespace chorus
