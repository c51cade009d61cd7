#pragma once
// The rounds of an elastic job on the Gloo world (launch/gloo_elastic.h): which workers train
// together next, when that round forms, and which workers and hosts leave the job. A worker
// asks to join each time Chorus starts in it (transport/elastic_round.h); a round forms when
//  - every worker expected has asked (the job's start; a reset after added hosts, whose
//    workers wait for the others' next commit), or
//  - the running round broke (one of its workers asked again, or died) and `bound` has passed
//    since: its workers that have not asked by then (stopped, or cut off from the network) are
//    ended and their hosts leave the job, as a host whose worker died does.
// The new round takes the workers that asked, host by host in the order the hosts joined the
// job (so that rank 0 is a survivor's), up to --max-np; fewer than --min-np ends the job, and
// so does a failure beyond --max-restarts, or a program error (the stall classes 81-83).
// Every round that broke counts as a restart unless hosts were added since it formed; a
// worker that dies while it waits to join only takes its host out.
//
// Pure: gloo_elastic.cc tells it what happened and carries out what it decides, and the unit
// test drives it through scripted events.

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "supervisor.h"

namespace chorus::launch {

class ElasticRounds {
 public:
  using Clock = std::chrono::steady_clock;

  ElasticRounds(const ElasticRequest& request, std::chrono::milliseconds bound);

  /// A worker process started on `host`.
  void started(const std::string& id, const std::string& host);
  /// The worker asked to join (the key of its ask_key()).
  void joined(const std::string& id, Clock::time_point now);
  /// The worker's process ended: 0, its exit status, or 128 + the signal that killed it.
  void ended(const std::string& id, int status, Clock::time_point now);

  struct Decision {
    /// What to set in the store: each worker's answer (assign/ID/N), and the running round's
    /// ranks seen to end (round/R/lost), which its waits then fail on at once.
    std::vector<std::pair<std::string, std::string>> answers;
    std::vector<std::string> stop;  ///< workers to end now
    std::vector<std::string> lines;
    std::optional<int> end;  ///< the job is over, chorusrun exits with this
  };
  /// What to do now; `hosts_version` is the notice's (launch/hosts_notice.h).
  Decision step(Clock::time_point now, int64_t hosts_version);

  /// The store's keys of the workers' next asks, for those that have not asked yet.
  std::vector<std::pair<std::string, std::string>> awaited_asks() const;
  /// The hosts with a live worker, and those that left the job.
  std::set<std::string> hosts_in_use() const;
  const std::set<std::string>& excluded() const { return excluded_; }
  /// Live workers, for a job that ends.
  std::vector<std::string> live() const;
  int64_t round() const { return round_; }

 private:
  struct Worker {
    std::string id;
    std::string host;
    int asks = 0;  ///< answered so far; its next ask is asks + 1
    bool asked = false;
    bool alive = true;
    bool finished = false;
  };

  Worker* find(const std::string& id);
  std::string ask_key(const Worker& w) const;
  // Ends the job: every live worker stops.
  void end_job(int status, const std::string& line, Decision* d);
  // The failure that broke the round (one line), for the next round's line.
  void failed(const std::string& why, int status, Clock::time_point now);
  bool member(const std::string& id) const;
  bool on_excluded_host(const Worker& w) const { return excluded_.count(w.host) > 0; }

  ElasticRequest request_;
  std::chrono::milliseconds bound_;
  std::vector<Worker> workers_;     // in start order
  std::vector<std::string> hosts_;  // in the order they joined the job
  std::set<std::string> excluded_;
  int64_t round_ = 0;
  std::vector<std::string> members_;  // the round's workers, in rank order
  std::optional<Clock::time_point> broken_since_;
  std::string failure_;  // what broke the round, when a failure did
  std::string lost_;     // the round's ranks seen to end, for its lost key
  bool lost_told_ = false;
  std::string first_ask_;           // the member whose ask broke the round
  int64_t formed_version_ = 0;      // the hosts' version the round was formed at
  std::vector<std::string> notes_;  // lines for the next step
  int first_failure_status_ = 0;
  int restarts_ = 0;
  std::optional<int> program_error_;
  bool over_ = false;
};

}  // namespace chorus::launch
