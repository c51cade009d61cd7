#include "elastic_rounds.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "transport/elastic_round.h"

namespace chorus::launch {
namespace {

// The stall classes that are errors in the program (protocol/stall_classes.h).
constexpr int kFirstProgramError = 81;
constexpr int kLastProgramError = 83;

std::string describe(int status) {
  if (status > 128) {
    return "ended on signal " + std::to_string(status - 128) + " (" + strsignal(status - 128) + ")";
  }
  return "exited with status " + std::to_string(status);
}

}  // namespace

ElasticRounds::ElasticRounds(const ElasticRequest& request, std::chrono::milliseconds bound)
    : request_(request), bound_(bound) {}

ElasticRounds::Worker* ElasticRounds::find(const std::string& id) {
  for (Worker& w : workers_) {
    if (w.id == id) return &w;
  }
  return nullptr;
}

bool ElasticRounds::member(const std::string& id) const {
  return std::find(members_.begin(), members_.end(), id) != members_.end();
}

std::string ElasticRounds::ask_key(const Worker& w) const {
  return "assign/" + w.id + "/" + std::to_string(w.asks + 1);
}

void ElasticRounds::started(const std::string& id, const std::string& host) {
  workers_.push_back({id, host});
  if (std::find(hosts_.begin(), hosts_.end(), host) == hosts_.end()) hosts_.push_back(host);
}

void ElasticRounds::joined(const std::string& id, Clock::time_point now) {
  Worker* w = find(id);
  if (w == nullptr || !w->alive) return;
  w->asked = true;
  if (round_ > 0 && member(id) && !broken_since_) {
    broken_since_ = now;
    first_ask_ = "worker " + id + " on " + w->host;
  }
}

void ElasticRounds::failed(const std::string& why, int status, Clock::time_point now) {
  if (failure_.empty()) failure_ = why;
  if (first_failure_status_ == 0) first_failure_status_ = status;
  if (!broken_since_) broken_since_ = now;
}

void ElasticRounds::ended(const std::string& id, int status, Clock::time_point now) {
  Worker* w = find(id);
  if (w == nullptr || !w->alive) return;  // unknown, or ended by chorusrun
  w->alive = false;
  w->asked = false;
  if (status == 0) {
    w->finished = true;
    return;
  }
  if (status == kLeftJobStatus || on_excluded_host(*w)) return;
  if (status >= kFirstProgramError && status <= kLastProgramError) {
    program_error_ = status;
    return;
  }
  // The host leaves the job while another host has workers, as Horovod drops a failed host.
  const bool others = std::any_of(workers_.begin(), workers_.end(), [&](const Worker& o) {
    return o.alive && o.host != w->host && !on_excluded_host(o);
  });
  if (others) excluded_.insert(w->host);
  if (round_ > 0 && !member(id)) {
    // A worker that waited to join (an added host's): the round goes on without it.
    notes_.push_back("chorusrun: worker " + id + " on " + w->host + " " + describe(status) +
                     " before it joined" + (others ? "; its host leaves the job" : ""));
    return;
  }
  const auto at = std::find(members_.begin(), members_.end(), id);
  if (at != members_.end() && lost_.empty()) {
    lost_ = "rank " + std::to_string(at - members_.begin()) + " (worker " + id + " on " + w->host +
            ", " + describe(status) + ")";
  }
  failed("worker " + id + " on " + w->host + " " + describe(status), status, now);
}

std::vector<std::pair<std::string, std::string>> ElasticRounds::awaited_asks() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Worker& w : workers_) {
    if (w.alive && !w.asked)
      out.emplace_back(w.id, "join/" + w.id + "/" + std::to_string(w.asks + 1));
  }
  return out;
}

std::set<std::string> ElasticRounds::hosts_in_use() const {
  std::set<std::string> out;
  for (const Worker& w : workers_) {
    if (w.alive) out.insert(w.host);
  }
  return out;
}

std::vector<std::string> ElasticRounds::live() const {
  std::vector<std::string> out;
  for (const Worker& w : workers_) {
    if (w.alive) out.push_back(w.id);
  }
  return out;
}

void ElasticRounds::end_job(int status, const std::string& line, Decision* d) {
  over_ = true;
  if (!line.empty()) d->lines.push_back(line);
  for (Worker& w : workers_) {
    if (!w.alive) continue;
    d->stop.push_back(w.id);
    w.alive = false;
  }
  d->end = status;
}

ElasticRounds::Decision ElasticRounds::step(Clock::time_point now, int64_t hosts_version) {
  Decision d;
  if (over_) return d;
  d.lines = std::exchange(notes_, {});
  if (program_error_) {
    end_job(*program_error_,
            "chorusrun: a worker ended with status " + std::to_string(*program_error_) +
                ", an error in the program that a reset would meet again; the job ends",
            &d);
    return d;
  }
  if (round_ > 0 && std::all_of(members_.begin(), members_.end(),
                                [&](const std::string& id) { return find(id)->finished; })) {
    end_job(0, "", &d);  // the training returned on every rank of the round
    return d;
  }
  if (live().empty()) {
    end_job(first_failure_status_,
            first_failure_status_ == 0 ? "" : "chorusrun: no worker is left; the job ends", &d);
    return d;
  }
  if (!lost_.empty() && !lost_told_) {
    d.answers.emplace_back("round/" + std::to_string(round_) + "/" + kLostKey, lost_);
    lost_told_ = true;
  }
  auto candidate = [&](const Worker& w) { return w.alive && !on_excluded_host(w); };
  const bool all_asked = std::all_of(workers_.begin(), workers_.end(),
                                     [&](const Worker& w) { return !candidate(w) || w.asked; });
  const bool due = broken_since_ && now - *broken_since_ >= bound_;
  if (round_ == 0 ? !all_asked : !(broken_since_ && (all_asked || due))) return d;

  if (round_ > 0 && !all_asked) {
    // The round's workers that did not come back within the bound are ended, and their hosts
    // leave the job.
    for (const std::string& id : members_) {
      Worker* w = find(id);
      if (!candidate(*w) || w->asked) continue;
      excluded_.insert(w->host);
      failed("worker " + id + " on " + w->host + " did not come back within " +
                 std::to_string(bound_.count() / 1000) + " s (stopped, or cut off)",
             1, now);
    }
  }
  // Workers of hosts that left: told so where they asked, else ended.
  for (Worker& w : workers_) {
    if (!w.alive || !on_excluded_host(w)) continue;
    if (w.asked) {
      d.answers.emplace_back(ask_key(w), std::string(kLeaveAnswer) + "its host " + w.host +
                                             " left the job after a failure");
      ++w.asks;
      w.asked = false;
    } else {
      d.stop.push_back(w.id);
      w.alive = false;
    }
  }

  // The new round: the workers that asked, host by host, up to --max-np (the others wait).
  std::vector<Worker*> next;
  for (const std::string& host : hosts_) {
    for (Worker& w : workers_) {
      if (w.host == host && candidate(w) && w.asked) next.push_back(&w);
    }
  }
  if (request_.max_np && static_cast<int>(next.size()) > *request_.max_np) {
    next.resize(static_cast<std::size_t>(*request_.max_np));
  }
  const int min_np = request_.min_np.value_or(request_.np.value_or(1));
  const int status = first_failure_status_ != 0 ? first_failure_status_ : 1;
  if (static_cast<int>(next.size()) < min_np) {
    end_job(status,
            "chorusrun: " + std::to_string(next.size()) + " workers are left" +
                (failure_.empty() ? "" : " after " + failure_) + ", fewer than --min-np " +
                std::to_string(min_np) + "; the job ends",
            &d);
    return d;
  }
  // A round that broke with no death and no hosts added: a worker saw a collective fail (a
  // peer stopped or cut off, or an error that may come back): a restart too.
  if (round_ > 0 && failure_.empty() && hosts_version == formed_version_) {
    failure_ = first_ask_ + " saw the round fail";
  }
  std::string after;
  if (!failure_.empty()) {
    if (++restarts_ > request_.max_restarts) {
      end_job(status,
              "chorusrun: " + failure_ + "; no restarts left (--max-restarts " +
                  std::to_string(request_.max_restarts) + "); the job ends",
              &d);
      return d;
    }
    after = " after " + failure_ + " (restart " + std::to_string(restarts_) + " of " +
            std::to_string(request_.max_restarts) + ")";
  }
  ++round_;
  const int size = static_cast<int>(next.size());
  std::string layout;
  for (int rank = 0; rank < size; ++rank) {
    Worker& w = *next[static_cast<std::size_t>(rank)];
    d.answers.emplace_back(ask_key(w), format_elastic_round({round_, rank, size, hosts_version}));
    ++w.asks;
    w.asked = false;
  }
  std::map<std::string, int> per_host;
  for (const Worker* w : next) ++per_host[w->host];
  for (const std::string& host : hosts_) {
    if (per_host.count(host)) {
      layout += (layout.empty() ? "" : ",") + host + ":" + std::to_string(per_host[host]);
    }
  }
  std::string excluded;
  for (const std::string& h : excluded_) excluded += (excluded.empty() ? "" : ",") + h;
  d.lines.push_back("chorusrun: round " + std::to_string(round_) + ": " + std::to_string(size) +
                    " ranks on " + layout + after +
                    (excluded.empty() ? "" : " (excluded: " + excluded + ")"));
  members_.clear();
  for (const Worker* w : next) members_.push_back(w->id);
  formed_version_ = hosts_version;
  broken_since_.reset();
  failure_.clear();
  lost_.clear();
  lost_told_ = false;
  return d;
}

}  // namespace chorus::launch
