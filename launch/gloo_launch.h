#pragma once
// chorusrun --gloo: a job without MPI. chorusrun starts every rank itself, as torchrun does,
// with torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
// MASTER_ADDR, MASTER_PORT) and CHORUS_CONTROLLER=gloo: the ranks on this host as its
// children, those on other hosts through the remote shell (ssh, or CHORUS_RSH: "agent HOST
// COMMAND", as Open MPI's plm_rsh_agent), with the variables mpirun would pass. The first
// rank that fails ends the others, and chorusrun exits with its status, as mpirun does.

#include <sys/types.h>

#include <string>
#include <vector>

#include "allocation.h"
#include "plan.h"

namespace chorus::launch {

/// How one rank starts: the words to exec, and the variables added to chorusrun's own.
struct RankStart {
  std::vector<std::string> argv;
  std::vector<std::string> env;  ///< NAME=value
  /// Started through the remote shell: its input is a pipe chorusrun holds open until it
  /// ends, which the remote line watches.
  bool remote = false;
};

struct GlooJob {
  std::string master_addr;  ///< MASTER_ADDR: the first host (127.0.0.1 when it is this one)
  int master_port = 0;      ///< MASTER_PORT; the ranks' store is on the port after it
  std::vector<std::string> rsh = {"ssh"};
  std::string cwd;  ///< where remote ranks start
};

/// Whether `host` of a plan is this one (`local_host`), which starts its ranks as children.
bool is_this_host(const std::string& host, const std::string& local_host);

/// How a process with the variables `vars` starts on `host`: a child of chorusrun's where the
/// host is this one, else through the remote shell, with the variables of `env` that remote
/// ranks get.
RankStart start_on(const std::string& host, const std::vector<std::string>& vars,
                   const std::vector<std::string>& program, const GlooJob& job, const Env& env,
                   const std::string& local_host);

/// Every rank's start, in rank order. `local_host` is this host's name; `env` is chorusrun's
/// environment (the variables remote ranks get, as mpirun passes them).
std::vector<RankStart> gloo_starts(const Plan& plan, const std::vector<std::string>& program,
                                   const GlooJob& job, const Env& env,
                                   const std::string& local_host);

/// Two free consecutive TCP ports on this host (MASTER_PORT and the store's).
int free_port_pair();

/// Forks and runs `start` (a remote one reading `remote_input`, a pipe chorusrun holds open for
/// as long as the process should live); its pid, or -1. The process is killed if chorusrun
/// dies.
pid_t spawn(const RankStart& start, int remote_input);

/// Starts them all and waits: 0 when every rank exits 0, else the first failure's status
/// (128 + signal for a rank killed by one) once the others are ended.
int run_gloo_job(const std::vector<RankStart>& starts);

}  // namespace chorus::launch
