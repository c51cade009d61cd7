#include "negotiation_world.h"

#include <algorithm>
#include <thread>

#include "base/logging.h"
#include "core/codec.h"

namespace chorus::testing {

bool Rank::round(bool shutdown) {
  if (Clock::now() > deadline_) {
    return fail("gave up at round " + std::to_string(records_.size()) +
                ": the test's condition was not reached within its time bound (" +
                std::to_string(negotiator_.pending()) + " requests still pending here)");
  }
  Status s = negotiator_.start(shutdown, Clock::now());
  if (!s.ok())
    return fail("start of round " + std::to_string(records_.size()) + ": " + s.to_string());
  for (;;) {
    StatusOr<bool> done = negotiator_.poll();
    if (!done.ok()) {
      return fail("poll in round " + std::to_string(records_.size()) + ": " +
                  done.status().to_string());
    }
    if (*done) break;
    if (Clock::now() > deadline_) {
      return fail("round " + std::to_string(records_.size()) + " did not finish in time");
    }
    std::this_thread::yield();
  }
  if (Status c = negotiator_.complete(Clock::now()); !c.ok()) {
    return fail("completion of round " + std::to_string(records_.size()) + ": " + c.to_string());
  }
  const Negotiator::Round& r = negotiator_.round();
  last_ = {{}, r.shutdown, r.used_coordinator};
  for (const auto& resp : r.responses) last_.responses.push_back(*resp);
  records_.push_back(
      {codec::encode(ResponseList{last_.responses}), r.shutdown, r.used_coordinator});
  responses_.insert(responses_.end(), last_.responses.begin(), last_.responses.end());
  return true;
}

bool Rank::fail(const std::string& why) {
  if (error_.empty()) error_ = "rank " + std::to_string(rank()) + ": " + why;
  hub_->abort(error_);
  return false;
}

World::World(int n, NegotiatorOptions options, std::chrono::milliseconds bound) : hub(n, bound) {
  const Rank::Clock::time_point deadline = Rank::Clock::now() + bound;
  for (int r = 0; r < n; ++r) ranks.push_back(std::make_unique<Rank>(&hub, r, options, deadline));
}

void World::run(const std::function<void(Rank&)>& body) {
  std::vector<std::thread> threads;
  for (auto& r : ranks) threads.emplace_back([&body, rank = r.get()] { body(*rank); });
  for (std::thread& t : threads) t.join();
}

::testing::AssertionResult no_errors(const World& w) {
  std::string all;
  for (const auto& r : w.ranks) {
    if (!r->error().empty()) all += r->error() + "\n";
  }
  if (all.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << all;
}

std::string describe(const std::vector<Response>& rs) {
  std::string out;
  for (const Response& r : rs) {
    out += std::string(op_type_name(r.op)) + " '" + r.name + "'" +
           (r.status.ok() ? "" : " " + r.status.to_string()) + "; ";
  }
  return out;
}

::testing::AssertionResult identical_everywhere(const World& w) {
  const Rank& ref = *w.ranks[0];
  for (const auto& r : w.ranks) {
    if (r->records().size() != ref.records().size()) {
      return ::testing::AssertionFailure() << "rank " << r->rank() << " ran " << r->records().size()
                                           << " rounds, rank 0 " << ref.records().size();
    }
    for (std::size_t k = 0; k < ref.records().size(); ++k) {
      const RoundRecord& a = ref.records()[k];
      const RoundRecord& b = r->records()[k];
      if (a.encoded != b.encoded || a.shutdown != b.shutdown ||
          a.used_coordinator != b.used_coordinator) {
        auto decode = [](const std::string& e) {
          StatusOr<ResponseList> l = codec::decode_response_list(e);
          return l.ok() ? describe(l->responses) : l.status().to_string();
        };
        return ::testing::AssertionFailure()
               << "round " << k << " differs between rank 0 and rank " << r->rank()
               << "\n  rank 0: " << decode(a.encoded) << " shutdown=" << a.shutdown
               << " coordinator=" << a.used_coordinator << "\n  rank " << r->rank() << ": "
               << decode(b.encoded) << " shutdown=" << b.shutdown
               << " coordinator=" << b.used_coordinator;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

std::vector<int32_t> range_ranks(int from, int to) {
  std::vector<int32_t> v;
  for (int r = from; r < to; ++r) v.push_back(r);
  return v;
}

std::string ranks_string(const std::vector<int32_t>& ranks) {
  std::string out = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

std::vector<Response> named(const Rank& r, const std::string& name) {
  std::vector<Response> out;
  for (const Response& resp : r.responses()) {
    if (resp.name == name) out.push_back(resp);
  }
  return out;
}

bool contains_all(const std::set<std::string>& seen, const std::vector<std::string>& names) {
  return std::all_of(names.begin(), names.end(),
                     [&](const std::string& n) { return seen.count(n); });
}

ScopedCapture::ScopedCapture() : sink_(std::make_shared<CaptureSink>()) {
  log().sinks().push_back(sink_);
}

ScopedCapture::~ScopedCapture() {
  auto& sinks = log().sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
}

std::string rank_count_name(const ::testing::TestParamInfo<int>& info) {
  return "np" + std::to_string(info.param);
}

}  // namespace chorus::testing
