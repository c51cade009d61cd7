#include "transport/elastic_round.h"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "transport/tcp_store.h"

namespace chorus {
namespace {

// The round's ranks over the supervisor's store: their places, and keys under the round's
// prefix.
class RoundRendezvous final : public Rendezvous {
 public:
  RoundRendezvous(std::shared_ptr<TcpRendezvous> store, const ElasticRound& round)
      : store_(std::move(store)),
        prefix_("round/" + std::to_string(round.round) + "/"),
        rank_(round.rank),
        size_(round.size) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status set(const std::string& key, const std::string& value) override {
    return store_->set(prefix_ + key, value);
  }
  StatusOr<std::string> get(const std::string& key, std::chrono::milliseconds timeout) override {
    return store_->get(prefix_ + key, timeout);
  }
  StatusOr<bool> check(const std::string& key) override { return store_->check(prefix_ + key); }

 private:
  std::shared_ptr<TcpRendezvous> store_;
  std::string prefix_;
  int rank_;
  int size_;
};

std::mutex g_mu;
int64_t g_joins = 0;  // asks answered so far in this process
std::optional<ElasticRound> g_joined;
std::string g_reached;  // the address of chorusrun's that answered last

std::string host_name() {
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  return name;
}

// The first of the store's addresses that takes a connection (set in `*reached`), trying each
// in turn until `timeout` ran out (chorusrun may be reachable by one of its addresses only).
StatusOr<std::shared_ptr<TcpRendezvous>> connect_store(const ElasticWorker& worker,
                                                       std::chrono::milliseconds timeout,
                                                       std::string* reached) {
  const std::size_t colon = worker.store.rfind(':');
  const int port = colon == std::string::npos ? 0 : std::atoi(worker.store.c_str() + colon + 1);
  if (port <= 0) {
    return invalid_argument("CHORUS_ELASTIC_RENDEZVOUS='" + worker.store +
                            "': expected ADDRESS[,ADDRESS...]:PORT (set by chorusrun)");
  }
  std::vector<std::string> addresses;
  std::stringstream list(worker.store.substr(0, colon));
  for (std::string a; std::getline(list, a, ',');) {
    if (!a.empty()) addresses.push_back(a);
  }
  // The one that answered last first: the others may drop a connection only after seconds.
  const auto known = std::find(addresses.begin(), addresses.end(), g_reached);
  if (known != addresses.end()) std::rotate(addresses.begin(), known, known + 1);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Status last = invalid_argument("CHORUS_ELASTIC_RENDEZVOUS='" + worker.store + "' has no address");
  do {
    for (const std::string& a : addresses) {
      StatusOr<std::shared_ptr<TcpRendezvous>> store = TcpRendezvous::connect_client(
          "elastic worker " + worker.id, a, port, std::chrono::seconds(2));
      if (store.ok()) {
        *reached = g_reached = a;
        return store;
      }
      last = store.status();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (std::chrono::steady_clock::now() < deadline && !addresses.empty());
  return last;
}

}  // namespace

std::string format_elastic_round(const ElasticRound& round) {
  return std::to_string(round.round) + " " + std::to_string(round.rank) + " " +
         std::to_string(round.size) + " " + std::to_string(round.hosts_version);
}

std::optional<ElasticRound> parse_elastic_round(const std::string& text) {
  ElasticRound r;
  char rest = 0;
  if (std::sscanf(text.c_str(), "%" SCNd64 " %d %d %" SCNd64 "%c", &r.round, &r.rank, &r.size,
                  &r.hosts_version, &rest) != 4 ||
      r.round < 1 || r.size < 1 || r.rank < 0 || r.rank >= r.size) {
    return std::nullopt;
  }
  return r;
}

StatusOr<JoinedRound> join_next_round(const ElasticWorker& worker,
                                      std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(g_mu);
  JoinedRound joined;
  // chorusrun's store answers at once where it can be reached at all: a worker cut off from
  // it gives up after a minute, whatever the wait for the round's answer may be.
  StatusOr<std::shared_ptr<TcpRendezvous>> store =
      connect_store(worker, std::min<std::chrono::milliseconds>(timeout, std::chrono::minutes(1)),
                    &joined.store_host);
  if (!store.ok()) return store.status();
  // An ask that got no answer is made again under the same number, which chorusrun waits for.
  const std::string ask = worker.id + "/" + std::to_string(g_joins + 1);
  if (Status s = (*store)->set("join/" + ask, host_name()); !s.ok()) return s;
  StatusOr<std::string> answer = (*store)->get("assign/" + ask, timeout);
  if (!answer.ok()) return answer.status();
  if (answer->rfind(kLeaveAnswer, 0) == 0) {
    ++g_joins;
    return failed_precondition("elastic worker " + worker.id + " leaves the job: " +
                               answer->substr(std::string(kLeaveAnswer).size()));
  }
  std::optional<ElasticRound> round = parse_elastic_round(*answer);
  if (!round) {
    return Status(StatusCode::kInternal, "elastic worker " + worker.id +
                                             ": the supervisor's answer '" + *answer +
                                             "' is not a round");
  }
  ++g_joins;
  g_joined = round;
  joined.rendezvous = std::make_shared<RoundRendezvous>(std::move(store).value(), *round);
  return joined;
}

std::optional<ElasticRound> joined_round() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_joined;
}

}  // namespace chorus
