#pragma once
// chorusrun as the supervisor of an elastic job (docs/elastic.md): it launches the workers,
// reads how the launch ended, and launches them again on the hosts it still has, until the
// program finishes, a program error ends it, or the restarts run out. The training state
// survives in each node's commits, which the relaunched workers agree on.
//
// How a launch ends, from the launcher's status and what it wrote on stderr:
//  - 0: finished.
//  - 85 (kHostsChangedStatus): the workers stopped at a commit because the supervisor told
//    them that hosts were added; relaunched at once, not counted as a restart.
//  - 81, 82, 83: the stall classes that are program errors (a name mismatch, an order
//    deadlock, a tensor never submitted; protocol/stall_classes.h). A restart would meet the
//    same error, so the job ends with that status.
//  - Anything else (84, a rank stopped; a signal; another status): a failure. The host the
//    launcher names (mpirun's "on node H", or the rank it names mapped to its host; srun's
//    "srun: error: H: task N") is excluded from the following launches while others remain.
//
// The loop's effects (the hosts, the command, the launch itself, the log) are hooks, so
// the unit test drives it through scripted endings.

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "chorus/status.h"
#include "host_list.h"
#include "plan.h"

namespace chorus::launch {

/// The status of workers that stopped at a commit because hosts were added.
inline constexpr int kHostsChangedStatus = 85;
/// The status of a worker that a job resetting in place dropped (launch/elastic_rounds.h).
inline constexpr int kLeftJobStatus = 86;

struct ElasticRequest {
  int max_restarts = 0;       ///< failures relaunched before the job ends
  std::optional<int> np;      ///< -np: the ranks wanted (default: every slot)
  std::optional<int> min_np;  ///< fewer ranks than this end the job (default: -np, else 1)
  std::optional<int> max_np;  ///< never more ranks than this
  std::optional<int> ppr;     ///< --ppr: ranks per host
  bool oversubscribe = false;
  std::string discovery_script;  ///< --host-discovery-script, or empty: the allocation's hosts
};

/// The plan of one launch on `hosts` (the excluded ones already removed): the ranks wanted,
/// capped by --max-np and by the slots (rounded down to whole hosts with --ppr). Fewer than
/// --min-np ranks is an error that names the hosts and the numbers.
StatusOr<Plan> elastic_plan(const std::vector<Host>& hosts, const ElasticRequest& request);

/// The host lines a discovery script printed: "name" or "name:slots", one per line ('#'
/// comments and blank lines skipped).
StatusOr<std::vector<Host>> parse_discovered_hosts(const std::string& text);

enum class Ending { kFinished, kHostsChanged, kProgramError, kFailed };

struct LaunchEnd {
  Ending ending = Ending::kFailed;
  int status = 1;           ///< the status chorusrun exits with if this launch is the last
  std::string failed_host;  ///< the host the launcher names, when it names one
  std::string reason;       ///< one phrase: "rank 4 on h3 exited on signal 9 (Killed)"
};

/// How a launch of `plan` ended, from waitpid()'s status and the launcher's stderr.
LaunchEnd classify_end(int wait_status, const std::string& launcher_stderr, const Plan& plan);

struct LaunchResult {
  int wait_status = 0;
  std::string stderr_text;  ///< what the launcher wrote on stderr (also passed through)
  int cancelled_by = 0;     ///< the signal (SIGINT, SIGTERM) that cancelled the job, or 0
  std::string not_started;  ///< why the launcher could not be started (no command, no fork)
};

struct SupervisorHooks {
  /// The hosts the job may use now: the discovery script's, else the allocation's.
  std::function<StatusOr<std::vector<Host>>()> hosts;
  /// Runs one launch of `plan` (its number counts from 1) and waits for it; `excluded`
  /// are the hosts left out after failures.
  std::function<LaunchResult(const Plan& plan, int launch, const std::set<std::string>& excluded)>
      launch;
  std::function<void(const std::string& line)> log;
};

/// Launches until the job ends; returns chorusrun's exit status.
int supervise(const ElasticRequest& request, const SupervisorHooks& hooks);

}  // namespace chorus::launch
