#include "supervisor.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstring>
#include <regex>

#include "parse_util.h"
#include "protocol/stall_classes.h"

namespace chorus::launch {
namespace {

int slots_of(const std::vector<Host>& hosts) {
  int n = 0;
  for (const Host& h : hosts) n += h.slots;
  return n;
}

// The host of global rank `rank` in `plan`, or empty.
std::string host_of_rank(const Plan& plan, int rank) {
  for (const Placement& p : plan.hosts) {
    if (rank >= p.first_rank && rank < p.first_rank + p.ranks) return p.host;
  }
  return {};
}

std::string signal_words(int sig) {
  const char* name = strsignal(sig);
  return "signal " + std::to_string(sig) + (name ? std::string(" (") + name + ")" : "");
}

// What the launcher's stderr says about the first rank that failed: its rank and host.
struct Named {
  int rank = -1;
  std::string host;
  std::string srun_says;     ///< srun's word for the task's end ("Killed"), when srun named it
  bool daemon_lost = false;  ///< mpirun lost its daemon on `host`: the host is gone
};

Named named_rank(const std::string& text, const Plan& plan) {
  // mpirun: "mpirun noticed that process rank 4 with PID 123 on node h3 exited on signal 9",
  // or for a nonzero exit "Process name: [[1256,1],4]"; srun: "srun: error: h3: task 4: Killed".
  static const std::regex noticed(R"(process rank (\d+) with PID \d+ on node (\S+))");
  static const std::regex process(R"(Process name: \[\[\d+,\d+\],(\d+)\])");
  static const std::regex srun(R"(srun: error: (\S+): tasks? (\d+)[-0-9,]*: ([^\n]+))");
  // mpirun, a host gone with its daemon: "Remote daemon: [[63177,0],2] on node h3"
  static const std::regex daemon(R"(Remote daemon: \S+ on node (\S+))");
  Named named;
  std::smatch m;
  if (std::regex_search(text, m, daemon)) {
    named.host = m[1];
    named.daemon_lost = true;
  } else if (std::regex_search(text, m, noticed)) {
    named = {std::stoi(m[1]), m[2]};
  } else if (std::regex_search(text, m, process)) {
    named.rank = std::stoi(m[1]);
  } else if (std::regex_search(text, m, srun)) {
    named = {std::stoi(m[2]), m[1], m[3]};
  }
  // The plan's name for the host, as the next launch's host list spells it (the launcher may
  // say "vm" where the plan said "localhost").
  if (named.rank >= 0) {
    std::string planned = host_of_rank(plan, named.rank);
    if (!planned.empty()) named.host = std::move(planned);
  }
  return named;
}

std::string excluded_words(const std::set<std::string>& excluded) {
  std::string out;
  for (const std::string& h : excluded) out += (out.empty() ? "" : ",") + h;
  return out;
}

}  // namespace

StatusOr<Plan> elastic_plan(const std::vector<Host>& hosts, const ElasticRequest& req) {
  const int capacity = req.ppr ? *req.ppr * static_cast<int>(hosts.size()) : slots_of(hosts);
  int np = req.max_np ? *req.max_np : (req.np ? *req.np : capacity);
  if (!req.oversubscribe) np = std::min(np, capacity);
  if (req.ppr) np -= np % *req.ppr;
  const int min_np = req.min_np ? *req.min_np : (req.np ? *req.np : 1);
  if (np < min_np || np < 1) {
    return invalid_argument(std::to_string(np) + " ranks fit on the hosts left (" +
                            (hosts.empty() ? std::string("none") : format_host_list(hosts)) +
                            "), fewer than --min-np " + std::to_string(min_np));
  }
  Allocation allocation;
  allocation.source = "the elastic job's hosts";
  allocation.hosts = hosts;
  return make_plan(allocation, {np, req.ppr, req.oversubscribe});
}

StatusOr<std::vector<Host>> parse_discovered_hosts(const std::string& text) {
  std::vector<Host> hosts;
  for (const std::string& raw : split_lines(text)) {
    const std::vector<std::string> words = split_words(strip_comment(raw));
    if (words.empty()) continue;
    if (words.size() > 1) {
      return invalid_argument("host discovery script: line '" + raw +
                              "' is not 'name' or 'name:slots'");
    }
    StatusOr<std::vector<Host>> one = parse_host_list(words[0]);
    if (!one.ok()) {
      return invalid_argument("host discovery script: " + one.status().message());
    }
    for (const Host& h : *one) {
      auto same = std::find_if(hosts.begin(), hosts.end(),
                               [&](const Host& known) { return known.name == h.name; });
      if (same != hosts.end()) {
        return invalid_argument("host discovery script: host '" + h.name + "' is listed twice");
      }
      hosts.push_back(h);
    }
  }
  return hosts;
}

LaunchEnd classify_end(int wait_status, const std::string& text, const Plan& plan) {
  LaunchEnd end;
  const Named named = named_rank(text, plan);
  end.failed_host = named.host;
  std::string who = named.rank >= 0 ? "rank " + std::to_string(named.rank) : "a rank";
  if (!named.host.empty()) who += " on " + named.host;
  // The launcher passes on a rank's exit status, or its own 128 + signal for a killed rank.
  int status = 1;
  if (WIFEXITED(wait_status)) {
    status = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    status = 128 + WTERMSIG(wait_status);
  }
  end.status = status;
  if (status == 0) {
    end.ending = Ending::kFinished;
    end.reason = "finished";
  } else if (status == kHostsChangedStatus ||
             text.find("Exited with exit code " + std::to_string(kHostsChangedStatus)) !=
                 std::string::npos) {
    // srun ends the other tasks of a step once one exited 85, and may report them killed.
    end.ending = Ending::kHostsChanged;
    end.reason = "the workers stopped at a commit";
    end.failed_host.clear();
  } else if (status >= stall_exit_status(StallClass::kNameMismatch) &&
             status <= stall_exit_status(StallClass::kRankStopped)) {
    const auto cls = static_cast<StallClass>(status - stall_exit_status(StallClass{0}));
    end.ending = cls == StallClass::kRankStopped ? Ending::kFailed : Ending::kProgramError;
    end.reason = std::string(stall_class_name(cls)) + " (exit " + std::to_string(status) +
                 "; first reported by " + who + ")";
    // The rank that reported a stall is not the one that stopped: no host is to blame.
    end.failed_host.clear();
  } else if (named.daemon_lost) {
    end.reason = "host " + named.host + " was lost (mpirun lost its daemon there)";
  } else if (!named.srun_says.empty()) {
    // srun's own status is that of the step it ended; the task that failed first is named.
    end.reason = who + " ended (srun: " + named.srun_says + ")";
  } else if (status > 128) {
    end.reason = who + " ended on " + signal_words(status - 128);
  } else {
    end.reason = who + " exited with status " + std::to_string(status);
  }
  return end;
}

int supervise(const ElasticRequest& req, const SupervisorHooks& hooks) {
  std::set<std::string> excluded;
  int restarts = 0;
  int last_status = 0;
  std::vector<Host> last_offered;
  std::string why_relaunch;  // empty on the first launch
  for (int launch = 1;; ++launch) {
    StatusOr<std::vector<Host>> offered = hooks.hosts();
    if (!offered.ok() && launch > 1) {
      hooks.log("chorusrun: " + offered.status().message() + "; the hosts of launch " +
                std::to_string(launch - 1) + " stand");
      offered = last_offered;
    }
    if (!offered.ok()) {
      hooks.log("chorusrun: error: " + offered.status().message());
      return 2;
    }
    last_offered = *offered;
    std::vector<Host> usable;
    for (const Host& h : *offered) {
      if (!excluded.count(h.name)) usable.push_back(h);
    }
    StatusOr<Plan> plan = elastic_plan(usable, req);
    if (!plan.ok()) {
      hooks.log("chorusrun: " + std::string(launch == 1 ? "cannot launch" : "cannot relaunch") +
                ": " + plan.status().message() +
                (excluded.empty() ? "" : "; excluded after failures: " + excluded_words(excluded)));
      // The failure's status; a stop for added hosts is no failure of its own.
      return launch == 1 || last_status == kHostsChangedStatus ? 2 : last_status;
    }
    std::vector<Host> used;
    for (const Placement& p : plan->hosts) used.push_back({p.host, p.ranks});
    hooks.log("chorusrun: " + (why_relaunch.empty() ? "" : why_relaunch + "; ") + "launch " +
              std::to_string(launch) + ": " + std::to_string(plan->np) + " ranks on " +
              format_host_list(used) +
              (excluded.empty() ? "" : " (excluded: " + excluded_words(excluded) + ")"));
    const LaunchResult result = hooks.launch(*plan, launch, excluded);
    if (!result.not_started.empty()) {
      hooks.log("chorusrun: error: launch " + std::to_string(launch) +
                " could not start: " + result.not_started);
      return 2;
    }
    const LaunchEnd end = classify_end(result.wait_status, result.stderr_text, *plan);
    last_status = end.status;
    if (result.cancelled_by != 0 && end.ending != Ending::kFinished) {
      hooks.log("chorusrun: cancelled by signal " + std::to_string(result.cancelled_by) +
                "; not restarting");
      return end.status;
    }
    switch (end.ending) {
      case Ending::kFinished: return 0;
      case Ending::kProgramError:
        hooks.log("chorusrun: not restarting: " + end.reason +
                  " is an error in the program, which a restart would meet again");
        return end.status;
      case Ending::kHostsChanged: why_relaunch = "hosts added: " + end.reason; continue;
      case Ending::kFailed: break;
    }
    if (restarts == req.max_restarts) {
      hooks.log("chorusrun: " + end.reason + "; no restarts left (--max-restarts " +
                std::to_string(req.max_restarts) + ")");
      return end.status;
    }
    ++restarts;
    // A host the launcher blames leaves the job while other hosts remain.
    if (!end.failed_host.empty() && usable.size() > 1) excluded.insert(end.failed_host);
    why_relaunch = "restart " + std::to_string(restarts) + " of " +
                   std::to_string(req.max_restarts) + " after " + end.reason;
  }
}

}  // namespace chorus::launch
