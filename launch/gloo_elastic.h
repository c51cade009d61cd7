#pragma once
// chorusrun --gloo as the supervisor of an elastic job whose workers reset in place
// (docs/elastic.md). chorusrun starts one worker process per rank of the first plan (children
// here, the remote shell elsewhere, as chorusrun --gloo starts ranks), serves the job's store
// (transport/tcp_store.h) and forms its rounds (launch/elastic_rounds.h): the workers ask it
// to join each time Chorus starts in them, and it answers with their rank in the next round.
// A worker that dies, or does not come back within the bound after its round broke, takes
// its host out of the job; nothing else is restarted: the survivors go on in the same
// processes. Hosts that the discovery script adds get new workers, which join the round
// formed at the running workers' next commit.
//
// The bound is CHORUS_LIVENESS_SECONDS (the time in which every survivor sees a lost rank)
// plus 10 s for the survivors' own reset.

#include <string>
#include <vector>

#include "allocation.h"
#include "cli.h"
#include "gloo_launch.h"
#include "plan.h"

namespace chorus::launch {

/// The variables a worker starts with (besides chorusrun's own environment): its id, where
/// chorusrun's store and hosts notice listen, and the job's name.
std::vector<std::string> worker_vars(const std::string& id, const std::string& store_address,
                                     const std::string& notice_address,
                                     const std::string& job_name);

/// Supervises the job until it ends; returns chorusrun's exit status. The first workers
/// follow `plan`; `local_host` is this host's name; `job_name` names the job's commit stores
/// (CHORUS_ELASTIC_JOB, else chorusrun's host and pid).
int supervise_gloo_job(const Cli& cli, const Env& env, const Allocation& allocation,
                       const Plan& plan, const GlooJob& job, const std::string& local_host,
                       const std::string& job_name);

}  // namespace chorus::launch
