#pragma once
// One launch of an elastic job's workers as a child of chorusrun: the launcher's stderr is
// passed through and kept, SIGINT and SIGTERM sent to chorusrun reach the launcher (and end
// the supervision: a job cancelled is not restarted), and a callback runs about once a
// second while the launch runs (the discovery of added hosts).

#include <functional>
#include <string>
#include <vector>

#include "supervisor.h"

namespace chorus::launch {

/// Runs `argv` (argv[0] looked up in PATH) with `env_overrides` ("NAME=value") added to its
/// environment, calling `tick` about once a second until it ends.
LaunchResult run_watched(const std::vector<std::string>& argv,
                         const std::vector<std::string>& env_overrides,
                         const std::function<void()>& tick);

}  // namespace chorus::launch
