#pragma once
// chorusrun's elastic path: the request its options make, the hosts of each launch, and the
// supervision itself (launch/supervisor.h), with each launch's environment: the job's name
// for its commit stores, the launch's number, and where to ask whether hosts were added
// (launch/hosts_notice.h).

#include <string>
#include <vector>

#include "allocation.h"
#include "cli.h"
#include "command.h"
#include "supervisor.h"

namespace chorus::launch {

ElasticRequest elastic_request(const Cli& cli);

/// What every launch of an elastic job passes to the launcher: the CHORUS_ELASTIC_* variables
/// (mpirun's -x), the plan's own layout, and the step ended when a task fails.
void elastic_command_options(CommandOptions& options);

/// The hosts an elastic job may use now: the discovery script's, else the allocation's.
StatusOr<std::vector<Host>> elastic_hosts(const ElasticRequest& request,
                                          const Allocation& allocation);

/// Supervises the job until it ends (`options` made by elastic_command_options); returns
/// chorusrun's exit status. `mpirun` is the
/// launcher program for mpirun launches; the job is named CHORUS_ELASTIC_JOB, else
/// `default_job_name`.
int supervise_job(const Cli& cli, const Env& env, const Allocation& allocation,
                  CommandOptions options, const std::string& mpirun,
                  const std::string& default_job_name);

}  // namespace chorus::launch
