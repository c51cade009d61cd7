#pragma once
// Which runtime the public API (core/api.cc) serves on the calling thread: the process's,
// made by init(), unless the thread named its own. The in-process tests run every rank's
// runtime in one process, each rank on its own threads, and call the public API on them.

#include <memory>

#include "chorus/status.h"

namespace chorus {

class Runtime;

/// The runtime the public API serves on the calling thread: the thread's own if it named
/// one, else the process's; null before init() and after shutdown().
std::shared_ptr<Runtime> current_runtime();

/// Shuts the process's runtime down (if one runs) and starts it again with the options of the
/// last init(): an elastic worker's reset in place (include/chorus/elastic.h).
Status restart_runtime();

/// While it lives, the public API calls made on this thread go to `runtime`.
class ThreadRuntime {
 public:
  explicit ThreadRuntime(std::shared_ptr<Runtime> runtime);
  ~ThreadRuntime();
  ThreadRuntime(const ThreadRuntime&) = delete;
  ThreadRuntime& operator=(const ThreadRuntime&) = delete;

 private:
  std::shared_ptr<Runtime> previous_;
};

}  // namespace chorus
