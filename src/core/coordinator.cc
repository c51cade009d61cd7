#include "core/coordinator.h"

#include <algorithm>
#include <cstdio>

#include "core/ops/op.h"

namespace chorus {
namespace {

std::string seconds(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

}  // namespace

Response decide_response(const std::string& name,
                         const std::vector<std::optional<Request>>& by_rank) {
  const int n = static_cast<int>(by_rank.size());
  const Request* ref = nullptr;
  std::vector<int> absent;
  for (int r = 0; r < n; ++r) {
    if (by_rank[r]) {
      if (!ref) ref = &*by_rank[r];
    } else {
      absent.push_back(r);
    }
  }
  Response resp;
  resp.name = name;
  if (!ref) {
    resp.status = internal_error("coordinator: no request for '" + name + "'");
    return resp;
  }
  // An op this build does not know is answered as an allreduce: the error response below
  // carries only known values, so that every rank decodes it.
  resp.op = static_cast<int>(ref->op) < kNumOpTypes ? ref->op : OpType::kAllreduce;
  resp.dtype = ref->dtype;
  resp.reduce_op = ref->reduce_op;
  resp.device = ref->device;
  resp.shape = ref->shape;
  resp.root = ref->root;
  resp.prescale = ref->prescale;
  resp.postscale = ref->postscale;
  resp.group = ref->group;
  resp.group_size = ref->group_size;
  resp.group_index = ref->group_index;

  const std::string prefix = std::string(op_type_name(ref->op)) + " '" + name + "': ";
  auto mismatch = [&](const std::string& m) {
    Response e;
    e.op = resp.op;
    e.name = name;
    e.group = resp.group;
    e.group_size = resp.group_size;
    e.group_index = resp.group_index;
    e.status = Status(StatusCode::kMismatch, prefix + m);
    return e;
  };

  // Values this build does not know fail the collective on every rank.
  for (int r = 0; r < n; ++r) {
    if (!by_rank[r]) continue;
    if (Status s = check_request(*by_rank[r]); !s.ok()) {
      Response e = mismatch("");
      e.status = invalid_argument("the request of rank " + std::to_string(r) + ": " + s.message());
      return e;
    }
  }
  Agreement agreement(by_rank, *ref);
  if (!agreement.same("the operation", [](const Request& q) { return op_type_name(q.op); })) {
    return mismatch(agreement.message());
  }
  const OpDescriptor& op = op_descriptor(ref->op);
  if (!absent.empty() && !op.runs_with_joined && !op.submitted_by_listed_ranks) {
    Response e = mismatch("");
    e.status = failed_precondition(prefix + "cannot run while ranks " + ranks_string(absent) +
                                   " have joined; only allreduce runs with joined ranks");
    return e;
  }
  if (op.carries_data && (!agreement.same("dtype", [](const Request& q) {
        return dtype_name(q.dtype);
      }) || !agreement.same("device type", [](const Request& q) {
        return q.device.is_cpu() ? "cpu" : "cuda";
      }))) {
    return mismatch(agreement.message());
  }
  if (!op.agree(agreement, resp)) return mismatch(agreement.message());
  return resp;
}

Coordinator::Coordinator(int size) : size_(size), joined_(size, false), idle_(size, -1.0) {}

void Coordinator::add(int rank, const RequestList& list, Clock::time_point now) {
  idle_[rank] = list.idle_seconds;
  for (const Request& q : list.requests) {
    if (q.op == OpType::kJoin) {
      joined_[rank] = true;
      last_joined_ = rank;  // ranks arrive in rank order: ties go to the highest rank
      continue;
    }
    auto [it, fresh] = table_.try_emplace(q.name);
    Arrivals& e = it->second;
    if (fresh) {
      e.by_rank.resize(size_);
      e.first_seen = now;
      arrival_.push_back(q.name);
    }
    if (!e.by_rank[rank]) ++e.count;
    e.by_rank[rank] = q;
    e.by_rank[rank]->rank = rank;
  }
}

void Coordinator::add_waiting(int rank, const Response& cached, double waited_seconds) {
  auto [it, fresh] = waiting_.try_emplace(cached.name);
  if (fresh) {
    it->second.cached = cached;
    it->second.ranks.assign(size_, false);
  }
  it->second.ranks[rank] = true;
  it->second.waited_seconds = std::max(it->second.waited_seconds, waited_seconds);
}

// The ops its listed ranks alone submit name the list (add_process_set_of_members), so every
// request of such an entry lists the same ranks: the first one says who owes one.
const Request* Coordinator::listing(const Arrivals& e) const {
  for (const auto& q : e.by_rank) {
    if (q) return op_descriptor(q->op).submitted_by_listed_ranks ? &*q : nullptr;
  }
  return nullptr;
}

std::vector<bool> Coordinator::not_owed(const Arrivals& e) const {
  std::vector<bool> out(size_, true);
  if (const Request* q = listing(e)) {
    for (int32_t r : q->ranks) {
      if (r >= 0 && r < size_) out[r] = e.by_rank[r].has_value();
    }
    return out;
  }
  for (int r = 0; r < size_; ++r) out[r] = e.by_rank[r].has_value();
  return out;
}

bool Coordinator::complete(const Arrivals& e) const {
  if (const Request* q = listing(e)) {
    for (int32_t r : q->ranks) {
      if (r >= 0 && r < size_ && !e.by_rank[r]) return false;
    }
    return true;
  }
  int have = e.count;
  for (int r = 0; r < size_; ++r) {
    if (joined_[r] && !e.by_rank[r]) ++have;
  }
  return have == size_;
}

std::vector<Response> Coordinator::take_ready() {
  std::vector<std::string> still;
  for (const std::string& name : arrival_) {
    auto it = table_.find(name);
    if (it == table_.end()) continue;  // emitted earlier in this scan, as a group member
    const Arrivals& e = it->second;
    const Request* any = nullptr;
    for (auto& q : e.by_rank) {
      if (q) {
        any = &*q;
        break;
      }
    }
    // Only an allreduce runs while some rank has joined: any other op fails at once for
    // the ranks that sent it, without waiting for the others, whose names may never match
    // (a rank that joined skipped the calls that would have kept generated names in step).
    const bool refused = any->group_size == 0 && !op_descriptor(any->op).runs_with_joined &&
                         std::find(joined_.begin(), joined_.end(), true) != joined_.end();
    if (!complete(e) && !refused) {
      still.push_back(name);
      continue;
    }
    if (refused) {
      std::vector<int> joined;
      for (int r = 0; r < size_; ++r) {
        if (joined_[r]) joined.push_back(r);
      }
      Response resp = decide_response(name, e.by_rank);
      resp.status = failed_precondition(std::string(op_type_name(any->op)) + " '" + name +
                                        "': cannot run while ranks " + ranks_string(joined) +
                                        " have joined; only allreduce runs with joined ranks");
      ready_.push_back(std::move(resp));
      table_.erase(it);
      continue;
    }
    if (any->group_size == 0) {
      Response resp = decide_response(name, e.by_rank);
      if (resp.status.ok() && creates_process_set(resp.op)) resp.new_set_id = next_set_id_++;
      ready_.push_back(std::move(resp));
      table_.erase(it);
      continue;
    }
    // A grouped member: the whole group is emitted together, in group order, once every
    // member is complete; a member that fails fails the whole group.
    std::vector<std::string> members;
    bool all = true;
    for (auto& [other, oe] : table_) {
      const Request* oq = nullptr;
      for (auto& q : oe.by_rank) {
        if (q) {
          oq = &*q;
          break;
        }
      }
      if (oq->group_size != 0 && oq->group == any->group) {
        members.push_back(other);
        all = all && complete(oe);
      }
    }
    if (!all || static_cast<int>(members.size()) < any->group_size) {
      still.push_back(name);
      continue;
    }
    std::vector<Response> group;
    Status failure;
    for (const std::string& m : members) {
      group.push_back(decide_response(m, table_.at(m).by_rank));
      if (!group.back().status.ok() && failure.ok()) failure = group.back().status;
    }
    std::sort(group.begin(), group.end(),
              [](const Response& a, const Response& b) { return a.group_index < b.group_index; });
    for (Response& g : group) {
      if (!failure.ok() && g.status.ok()) {
        g.status = Status(failure.code(), "grouped with a failed member: " + failure.message());
      }
      table_.erase(g.name);
      ready_.push_back(std::move(g));
    }
  }
  arrival_ = std::move(still);
  if (std::all_of(joined_.begin(), joined_.end(), [](bool j) { return j; })) {
    Response join;
    join.op = OpType::kJoin;
    join.name = "chorus.join";
    join.last_joined_rank = last_joined_;
    ready_.push_back(std::move(join));
    joined_.assign(size_, false);
    last_joined_ = -1;
  }
  return std::move(ready_);
}

std::vector<int> Coordinator::missing_ranks(const std::vector<bool>& present) const {
  std::vector<int> missing;
  for (int r = 0; r < size_; ++r) {
    if (!present[r] && !joined_[r]) missing.push_back(r);
  }
  return missing;
}

StallReport Coordinator::inspect_stalls(Clock::time_point now, double check_seconds,
                                        double shutdown_seconds) {
  StallReport report;
  auto describe = [&](const std::string& name, OpType op, double age,
                      const std::vector<bool>& present) {
    std::vector<int> have;
    for (int r = 0; r < size_; ++r) {
      if (present[r]) have.push_back(r);
    }
    return std::string(op_type_name(op)) + " '" + name + "' waited " + seconds(age) +
           " s: submitted by ranks " + ranks_string(have) + ", not yet by ranks " +
           ranks_string(missing_ranks(present));
  };
  // What every rank has outstanding, new names and cached ones, for the classes.
  StallView view;
  view.size = size_;
  view.outstanding.resize(size_);
  view.idle_seconds = idle_;
  for (const std::string& name : arrival_) {
    const Arrivals& e = table_.at(name);
    for (int r = 0; r < size_; ++r) {
      if (e.by_rank[r]) view.outstanding[r].push_back(name);
    }
  }
  for (const auto& [name, w] : waiting_) {
    for (int r = 0; r < size_; ++r) {
      if (w.ranks[r]) view.outstanding[r].push_back(name);
    }
  }
  // The tensors to warn about or fail now; `failing`: those to fail once their class is known.
  std::vector<StallView::Stuck> failing;
  auto consider = [&](const std::string& name, OpType op, double age,
                      const std::vector<bool>& present, bool fail, bool warn) {
    if (!fail && !warn) return;
    view.stuck.push_back({name, op, age, present});
    if (fail) {
      failing.push_back({name, op, age, present});
    } else {
      report.warnings.push_back(describe(name, op, age, present));
    }
  };

  std::vector<std::string> failed;
  for (auto& [name, e] : table_) {
    double age = std::chrono::duration<double>(now - e.first_seen).count();
    // A rank that owes no request is not reported missing.
    const std::vector<bool> present = not_owed(e);
    OpType op = OpType::kAllreduce;
    for (int r = 0; r < size_; ++r) {
      if (e.by_rank[r]) op = e.by_rank[r]->op;
    }
    const bool fail = shutdown_seconds > 0 && age >= shutdown_seconds;
    const bool warn =
        !fail && check_seconds > 0 && age >= check_seconds &&
        (!e.warned || std::chrono::duration<double>(now - e.last_warned).count() >= check_seconds);
    consider(name, op, age, present, fail, warn);
    if (fail) failed.push_back(name);
    if (warn) {
      e.warned = true;
      e.last_warned = now;
    }
  }
  for (const std::string& name : failed) {
    table_.erase(name);
    arrival_.erase(std::find(arrival_.begin(), arrival_.end(), name));
  }
  for (auto& [name, w] : waiting_) {
    const bool fail = shutdown_seconds > 0 && w.waited_seconds >= shutdown_seconds;
    bool warn = false;
    if (fail) {
      cached_warned_.erase(name);
    } else if (check_seconds > 0 && w.waited_seconds >= check_seconds) {
      auto last = cached_warned_.find(name);
      warn = last == cached_warned_.end() ||
             std::chrono::duration<double>(now - last->second).count() >= check_seconds;
      if (warn) cached_warned_[name] = now;
    }
    consider(name, w.cached.op, w.waited_seconds, w.ranks, fail, warn);
  }
  waiting_.clear();

  report.findings = classify_stalls(view);
  std::map<std::string, const StallFinding*> class_of;
  for (const StallFinding& f : report.findings) {
    for (const std::string& t : f.tensors) class_of[t] = &f;
  }
  for (const StallView::Stuck& f : failing) {
    Response r;
    r.op = f.op;
    r.name = f.name;
    auto c = class_of.find(f.name);
    const std::string why =
        c == class_of.end() ? "" : std::string("; ") + stall_class_name(c->second->cls);
    r.status =
        Status(StatusCode::kStalled,
               "stall inspector (CHORUS_STALL_SHUTDOWN_SECONDS=" + seconds(shutdown_seconds) +
                   "): " + describe(f.name, f.op, f.waited_seconds, f.submitted) + why);
    report.failures.push_back(std::move(r));
    if (c != class_of.end()) {
      const int status = stall_exit_status(c->second->cls);
      if (report.exit_status == 0 || status < report.exit_status) report.exit_status = status;
    }
  }
  std::sort(report.warnings.begin(), report.warnings.end());
  std::sort(report.failures.begin(), report.failures.end(),
            [](const Response& a, const Response& b) { return a.name < b.name; });
  return report;
}

bool Coordinator::stall_due(Clock::time_point now, double check_seconds,
                            double shutdown_seconds) const {
  for (const auto& [name, e] : table_) {
    double age = std::chrono::duration<double>(now - e.first_seen).count();
    if (shutdown_seconds > 0 && age >= shutdown_seconds) return true;
    if (check_seconds > 0 && age >= check_seconds &&
        (!e.warned ||
         std::chrono::duration<double>(now - e.last_warned).count() >= check_seconds)) {
      return true;
    }
  }
  return false;
}

std::vector<std::string> Coordinator::pending_names() const { return arrival_; }

}  // namespace chorus
