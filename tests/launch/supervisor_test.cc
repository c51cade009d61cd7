// chorusrun's supervision of elastic jobs (launch/supervisor.h): how a launch's end is read
// from the launcher's status and stderr (mpirun's and srun's own words), the plan of each
// launch on the hosts left, the discovery script's lines, and the loop driven through
// scripted launches: restarts and their limit, the host a failure names leaving the job,
// program errors and cancellations that are not restarted, and added hosts that are.
#include "supervisor.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <csignal>
#include <string>
#include <vector>

namespace chorus::launch {
namespace {

int exited(int status) { return status << 8; }
int killed(int sig) { return sig; }

Plan plan_of(const std::vector<Host>& hosts) {
  StatusOr<Plan> p = elastic_plan(hosts, ElasticRequest{});
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  return *p;
}

const char kMpirunKilled[] =
    "--------------------------------------------------------------------------\n"
    "mpirun noticed that process rank 4 with PID 0 on node h3 exited on signal 9 (Killed).\n"
    "--------------------------------------------------------------------------\n";

TEST(ClassifyEnd, AKilledRankNamesItsHostAsThePlanSpellsIt) {
  const Plan plan = plan_of({{"a", 2}, {"b", 2}, {"h3-planned", 2}});
  // mpirun may spell the node otherwise ("vm" for "localhost"): the rank decides.
  LaunchEnd end = classify_end(exited(137), kMpirunKilled, plan);
  EXPECT_EQ(end.ending, Ending::kFailed);
  EXPECT_EQ(end.failed_host, "h3-planned");
  EXPECT_EQ(end.status, 137);
  EXPECT_NE(end.reason.find("rank 4 on h3-planned ended on signal 9"), std::string::npos)
      << end.reason;
}

TEST(ClassifyEnd, ANonzeroExitNamesTheRanksHostFromThePlan) {
  const Plan plan = plan_of({{"a", 2}, {"b", 2}});
  const std::string text =
      "the job to be terminated. The first process to do so was:\n\n"
      "  Process name: [[1256,1],3]\n  Exit code:    1\n";
  LaunchEnd end = classify_end(exited(1), text, plan);
  EXPECT_EQ(end.ending, Ending::kFailed);
  EXPECT_EQ(end.failed_host, "b");
  EXPECT_NE(end.reason.find("rank 3 on b exited with status 1"), std::string::npos) << end.reason;
}

TEST(ClassifyEnd, SrunNamesTheHostAndTask) {
  const Plan plan = plan_of({{"n1", 1}, {"n2", 1}});
  LaunchEnd end = classify_end(exited(143),
                               "srun: error: n2: tasks 1-3: Killed\n"
                               "srun: error: n1: task 0: Terminated\n",
                               plan);
  EXPECT_EQ(end.ending, Ending::kFailed);
  EXPECT_EQ(end.failed_host, "n2");
  EXPECT_EQ(end.status, 143);
  EXPECT_EQ(end.reason, "rank 1 on n2 ended (srun: Killed)");
}

TEST(ClassifyEnd, StallStatusesAreProgramErrorsButAStoppedRankIsAFailure) {
  const Plan plan = plan_of({{"a", 2}, {"b", 2}});
  for (int status : {81, 82, 83}) {
    LaunchEnd end = classify_end(exited(status), kMpirunKilled, plan);
    EXPECT_EQ(end.ending, Ending::kProgramError) << status;
    EXPECT_EQ(end.status, status);
    EXPECT_TRUE(end.failed_host.empty()) << "the reporting rank is not to blame";
  }
  LaunchEnd stopped = classify_end(exited(84), "  Process name: [[7,1],2]\n", plan);
  EXPECT_EQ(stopped.ending, Ending::kFailed);
  EXPECT_TRUE(stopped.failed_host.empty());
  EXPECT_NE(stopped.reason.find("ranks stopped taking part (exit 84"), std::string::npos)
      << stopped.reason;
}

TEST(ClassifyEnd, FinishedAndHostsChanged) {
  const Plan plan = plan_of({{"a", 1}});
  EXPECT_EQ(classify_end(exited(0), "", plan).ending, Ending::kFinished);
  EXPECT_EQ(classify_end(exited(kHostsChangedStatus), "", plan).ending, Ending::kHostsChanged);
  // srun ends the step's other tasks once one exited 85, and may call them killed.
  EXPECT_EQ(classify_end(exited(137),
                         "srun: error: a: task 1: Killed\n"
                         "srun: error: a: task 0: Exited with exit code 85\n",
                         plan)
                .ending,
            Ending::kHostsChanged);
}

TEST(ClassifyEnd, AHostGoneWithItsDaemonIsNamed) {
  const Plan plan = plan_of({{"h1", 2}, {"h3", 2}});
  LaunchEnd end = classify_end(exited(1),
                               "ORTE has lost communication with a remote daemon.\n\n"
                               "  HNP daemon   : [[63177,0],0] on node vm\n"
                               "  Remote daemon: [[63177,0],2] on node h3\n",
                               plan);
  EXPECT_EQ(end.ending, Ending::kFailed);
  EXPECT_EQ(end.failed_host, "h3");
  EXPECT_EQ(end.reason, "host h3 was lost (mpirun lost its daemon there)");
}

TEST(ElasticPlan, CapsAndFloors) {
  ElasticRequest req;
  req.max_np = 5;
  StatusOr<Plan> p = elastic_plan({{"a", 2}, {"b", 2}, {"c", 2}}, req);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->np, 5);
  req = {};
  req.ppr = 2;
  req.np = 6;
  req.min_np = 4;
  p = elastic_plan({{"a", 2}, {"b", 3}}, req);  // whole hosts of 2: 4 ranks
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->np, 4);
  p = elastic_plan({{"a", 2}}, req);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("2 ranks fit on the hosts left (a:2), fewer than --min-np 4"),
            std::string::npos)
      << p.status().message();
  req.min_np.reset();  // -np is the floor where --min-np is not given, as in horovodrun
  EXPECT_FALSE(elastic_plan({{"a", 2}, {"b", 2}}, req).ok());
}

TEST(DiscoveredHosts, LinesCommentsAndErrors) {
  StatusOr<std::vector<Host>> h = parse_discovered_hosts("# now\nh1:2\n\nh2\n");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(*h, (std::vector<Host>{{"h1", 2}, {"h2", 1}}));
  EXPECT_FALSE(parse_discovered_hosts("h1 h2\n").ok());
  StatusOr<std::vector<Host>> twice = parse_discovered_hosts("h1\nh1:2\n");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("'h1' is listed twice"), std::string::npos);
}

// A supervisor whose launches end as scripted; records each launch's hosts and the log.
struct Scripted {
  std::vector<std::vector<Host>> offered;  // per launch (the last repeats)
  std::vector<LaunchResult> endings;       // per launch
  std::vector<std::string> launched;       // "a:2,b:2" per launch
  std::vector<std::string> log;

  int run(const ElasticRequest& req) {
    SupervisorHooks hooks;
    hooks.hosts = [this]() -> StatusOr<std::vector<Host>> {
      const std::size_t i = std::min(launched.size(), offered.size() - 1);
      return offered[i];
    };
    hooks.launch = [this](const Plan& plan, int launch, const std::set<std::string>&) {
      std::vector<Host> used;
      for (const Placement& p : plan.hosts) used.push_back({p.host, p.ranks});
      launched.push_back(format_host_list(used));
      EXPECT_EQ(launch, static_cast<int>(launched.size()));
      return endings.at(launched.size() - 1);
    };
    hooks.log = [this](const std::string& line) { log.push_back(line); };
    return supervise(req, hooks);
  }
};

TEST(Supervise, AKilledHostLeavesAndTheJobFinishesOnTheRest) {
  Scripted s;
  s.offered = {{{"h1", 2}, {"h2", 2}, {"h3", 2}}};
  s.endings = {{exited(137),
                "mpirun noticed that process rank 4 with PID 9 on node h3 exited "
                "on signal 9 (Killed).\n"},
               {exited(0), ""}};
  ElasticRequest req;
  req.max_restarts = 2;
  req.min_np = 2;
  EXPECT_EQ(s.run(req), 0);
  EXPECT_EQ(s.launched, (std::vector<std::string>{"h1:2,h2:2,h3:2", "h1:2,h2:2"}));
  ASSERT_EQ(s.log.size(), 2u);
  EXPECT_EQ(s.log[1],
            "chorusrun: restart 1 of 2 after rank 4 on h3 ended on signal 9 (Killed); launch 2: "
            "4 ranks on h1:2,h2:2 (excluded: h3)");
}

TEST(Supervise, RestartsRunOut) {
  Scripted s;
  s.offered = {{{"h1", 1}}};
  s.endings = {{exited(84), ""}, {exited(84), ""}};
  ElasticRequest req;
  req.max_restarts = 1;
  EXPECT_EQ(s.run(req), 84);
  EXPECT_EQ(s.launched.size(), 2u);
  EXPECT_NE(s.log.back().find("no restarts left (--max-restarts 1)"), std::string::npos)
      << s.log.back();
}

TEST(Supervise, ProgramErrorsAndCancellationsAreNotRestarted) {
  Scripted s;
  s.offered = {{{"h1", 2}}};
  s.endings = {{exited(82), ""}};
  ElasticRequest req;
  req.max_restarts = 3;
  EXPECT_EQ(s.run(req), 82);
  EXPECT_EQ(s.launched.size(), 1u);
  EXPECT_NE(s.log.back().find("not restarting: ranks submit in different orders"),
            std::string::npos);

  Scripted c;
  c.offered = {{{"h1", 2}}};
  c.endings = {{exited(143), "", SIGTERM}};
  EXPECT_EQ(c.run(req), 143);
  EXPECT_EQ(c.launched.size(), 1u);
  EXPECT_NE(c.log.back().find("cancelled by signal 15"), std::string::npos);
}

TEST(Supervise, ALaunchThatCannotStartEndsTheJob) {
  Scripted s;
  s.offered = {{{"h1", 2}}};
  LaunchResult not_started;
  not_started.wait_status = exited(127);
  not_started.not_started = "--launcher srun needs the same number of ranks on every host";
  s.endings = {not_started};
  ElasticRequest req;
  req.max_restarts = 3;
  EXPECT_EQ(s.run(req), 2);
  EXPECT_EQ(s.launched.size(), 1u) << "not retried";
  EXPECT_NE(s.log.back().find("launch 1 could not start: --launcher srun needs"), std::string::npos)
      << s.log.back();
}

TEST(Supervise, TooFewRanksLeftEndsTheJobWithTheFailuresStatus) {
  Scripted s;
  s.offered = {{{"h1", 1}, {"h2", 1}}};
  s.endings = {{exited(137),
                "mpirun noticed that process rank 1 with PID 9 on node h2 exited "
                "on signal 9 (Killed).\n"}};
  ElasticRequest req;
  req.max_restarts = 3;
  req.np = 2;  // and so --min-np 2
  EXPECT_EQ(s.run(req), 137);
  EXPECT_NE(s.log.back().find("cannot relaunch: 1 ranks fit on the hosts left (h1:1)"),
            std::string::npos)
      << s.log.back();
}

TEST(Supervise, AddedHostsRelaunchWithoutCountingARestart) {
  Scripted s;
  s.offered = {{{"h1", 2}}, {{"h1", 2}, {"h2", 2}}};
  s.endings = {{exited(kHostsChangedStatus), ""}, {exited(0), ""}};
  ElasticRequest req;  // no restarts allowed: growing is not one
  EXPECT_EQ(s.run(req), 0);
  EXPECT_EQ(s.launched, (std::vector<std::string>{"h1:2", "h1:2,h2:2"}));
}

}  // namespace
}  // namespace chorus::launch
