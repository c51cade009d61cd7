#include "plot.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "trace_events.h"

extern char** environ;

namespace chorus::trace {

std::string plot_script() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec).parent_path();
  const fs::path beside = self / "chorus_trace_plot.py";
  if (fs::exists(beside, ec)) return beside.string();
  return (self / ".." / "share" / "chorus" / "chorus_trace_plot.py").lexically_normal().string();
}

// CHORUS_TRACE_PYTHON is read here, not in the runtime's settings table (core/config.h): it
// is the tool's own, and the tool loads no runtime.
std::string plot_python() {
  if (const char* python = std::getenv("CHORUS_TRACE_PYTHON"); python != nullptr && *python) {
    return python;
  }
#ifdef CHORUS_TRACE_PYTHON
  return CHORUS_TRACE_PYTHON;
#else
  return "python3";
#endif
}

Status plot(const Summary& summary, const std::string& png, const std::string& title) {
  if (summary.steps.empty()) {
    return invalid_argument(
        "no steps to plot: the timelines have no step marks (STEP); "
        "DistributedOptimizer marks them, or chorus::mark_step()");
  }
  const std::string json = png + ".steps.json";
  if (Status s = write_text(json, summary_json(summary)); !s.ok()) return s;
  std::vector<std::string> args = {plot_python(), plot_script(), json, "-o", png};
  if (!title.empty()) args.insert(args.end(), {"--title", title});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
  if (err != 0) {
    std::remove(json.c_str());
    return invalid_argument("cannot run " + args[0] + ": " + std::strerror(err));
  }
  int status = 0;
  pid_t waited = 0;
  while ((waited = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  std::remove(json.c_str());
  if (waited != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return invalid_argument(args[1] + " failed under " + args[0] +
                            " (it needs matplotlib: Debian's python3-matplotlib; "
                            "CHORUS_TRACE_PYTHON names another Python)");
  }
  return {};
}

}  // namespace chorus::trace
