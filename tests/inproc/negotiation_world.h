#pragma once
// The harness of the in-process negotiation tests: N ranks as threads, each with its own
// Negotiator over the in-memory transport, driving rounds (start, poll until done) until a
// condition that every rank computes from the round's responses (identical everywhere, so
// all ranks stop in the same round). Every test has a hard bound: a rank that gives up
// aborts the hub, the others then fail too, and the test reports what was missing instead
// of hanging.
//
// Thread safety: a Rank is driven by its own thread only (World::run); World, its Hub and
// the checks below are read by the test's thread once run() has joined every rank.

#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/negotiator.h"
#include "in_memory_transport.h"
#include "protocol/message.h"

namespace chorus::testing {

struct RoundRecord {
  std::string encoded;  // the round's responses, encoded: compared byte for byte
  bool shutdown = false;
  bool used_coordinator = false;
};

/// A finished round as the tests read it: its responses by value.
struct LastRound {
  std::vector<Response> responses;
  bool shutdown = false;
  bool used_coordinator = false;
};

class Rank {
 public:
  using Clock = Negotiator::Clock;

  Rank(Hub* hub, int rank, const NegotiatorOptions& options, Clock::time_point deadline)
      : hub_(hub),
        transport_(hub, rank),
        negotiator_(&transport_, options, "global"),
        deadline_(deadline) {}

  int rank() const { return transport_.rank(); }
  int size() const { return transport_.size(); }
  Negotiator& negotiator() { return negotiator_; }
  const Negotiator& negotiator() const { return negotiator_; }

  void submit(Request q) {
    negotiator_.submit(submitted_.emplace_back(std::move(q)), Clock::now());
  }

  /// One round: start, then poll until done. False (with error() set and the hub aborted)
  /// when the round failed or the test's time bound passed.
  bool round(bool shutdown = false);

  const LastRound& last() const { return last_; }
  const std::vector<RoundRecord>& records() const { return records_; }
  const std::vector<Response>& responses() const { return responses_; }
  const std::string& error() const { return error_; }

 private:
  bool fail(const std::string& why);

  Hub* hub_;
  InMemoryTransport transport_;
  // The negotiator reads submitted requests in place until they are answered; a deque keeps
  // them where they are for the whole test.
  std::deque<Request> submitted_;
  Negotiator negotiator_;
  Clock::time_point deadline_;
  std::vector<RoundRecord> records_;
  LastRound last_;
  std::vector<Response> responses_;
  std::string error_;
};

/// N ranks and their hub. run() starts one thread per rank and joins them all.
struct World {
  World(int n, NegotiatorOptions options = {},
        std::chrono::milliseconds bound = std::chrono::seconds(10));

  void run(const std::function<void(Rank&)>& body);

  Hub hub;
  std::vector<std::unique_ptr<Rank>> ranks;
};

// Fails unless no rank reported an error.
::testing::AssertionResult no_errors(const World& w);

// One "op 'name'[ status]; " entry per response, for failure messages.
std::string describe(const std::vector<Response>& rs);

// Fails unless every rank ran the same rounds with byte-identical responses.
::testing::AssertionResult identical_everywhere(const World& w);

std::vector<int32_t> range_ranks(int from, int to);  // [from, to)

// "[0, 1, 2]", as the coordinator writes rank lists.
std::string ranks_string(const std::vector<int32_t>& ranks);

// The responses named `name`, over the whole run of one rank.
std::vector<Response> named(const Rank& r, const std::string& name);

bool contains_all(const std::set<std::string>& seen, const std::vector<std::string>& names);

// Collects the library's log lines (warnings and worse, at the default level).
class CaptureSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    lines_.emplace_back(msg.payload.data(), msg.payload.size());
  }
  void flush_() override {}

 private:
  std::vector<std::string> lines_;
};

// Adds a CaptureSink to the library's logger for the lifetime of this object. Only while
// no rank thread runs (spdlog's sink list is not guarded).
class ScopedCapture {
 public:
  ScopedCapture();
  ~ScopedCapture();
  std::vector<std::string> lines() { return sink_->lines(); }

 private:
  std::shared_ptr<CaptureSink> sink_;
};

// The parameterized suite: every TEST_P runs once per rank count. Each test executable
// instantiates it with INSTANTIATE_TEST_SUITE_P(Ranks, NegotiationTest,
// ::testing::Values(1, 2, 3, 4, 5), rank_count_name).
class NegotiationTest : public ::testing::TestWithParam<int> {
 protected:
  int n() const { return GetParam(); }
};

// "np3": the test name suffix for a rank count.
std::string rank_count_name(const ::testing::TestParamInfo<int>& info);

}  // namespace chorus::testing
