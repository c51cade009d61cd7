#include "collectives/gloo/gloo_world.h"

#include <arpa/inet.h>
#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "collectives/clock_offset.h"
#include "collectives/gloo/gloo_backend.h"
#include "collectives/gloo/gloo_control.h"
#include "collectives/gloo/gloo_links.h"
#include "collectives/shm/shm_backend.h"

namespace chorus {
namespace {

// Gloo's store over the job's rendezvous; Gloo takes failures as exceptions.
class StoreAdapter final : public gloo::rendezvous::Store {
 public:
  StoreAdapter(Rendezvous& rendezvous, std::chrono::milliseconds timeout)
      : rendezvous_(rendezvous), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    Status s = rendezvous_.set(key, std::string(data.begin(), data.end()));
    if (!s.ok()) throw gloo::IoException(s.message());
  }
  std::vector<char> get(const std::string& key) override {
    StatusOr<std::string> v = rendezvous_.get(key, timeout_);
    if (!v.ok()) throw gloo::IoException(v.status().message());
    return std::vector<char>(v->begin(), v->end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  // Gloo gets each key after waiting for it: the wait only looks, so that each value (every
  // member's addresses) crosses the store once.
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (const std::string& key : keys) {
      for (auto pause = std::chrono::milliseconds(1);; pause = std::min(pause * 2, kMostPause)) {
        StatusOr<bool> there = rendezvous_.check(key);
        if (!there.ok()) throw gloo::IoException(there.status().message());
        if (*there) break;
        if (std::chrono::steady_clock::now() > deadline) {
          throw gloo::IoException("rank " + std::to_string(rendezvous_.rank()) + ": no rank set '" +
                                  key + "' in the job's store within " +
                                  std::to_string(timeout.count() / 1000) + " s");
        }
        std::this_thread::sleep_for(pause);
      }
    }
  }

 private:
  static constexpr std::chrono::milliseconds kMostPause{50};

  Rendezvous& rendezvous_;
  std::chrono::milliseconds timeout_;
};

// The address of this host that packets to `host` leave from (a UDP socket's connect sends
// nothing); empty where `host` does not resolve or no route leads there.
std::string address_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &found) != 0) return {};
  std::string out;
  for (addrinfo* a = found; a != nullptr && out.empty(); a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    char text[INET6_ADDRSTRLEN] = {0};
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        getnameinfo(reinterpret_cast<sockaddr*>(&local), len, text, sizeof text, nullptr, 0,
                    NI_NUMERICHOST) == 0) {
      out = text;
    }
    close(fd);
  }
  freeaddrinfo(found);
  return out;
}

std::string this_host() {
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  return name;
}

Status gloo_failed(const std::string& what, const std::exception& e) {
  return Status(StatusCode::kAborted, what + " (gloo: " + e.what() + ")");
}

class GlooGroup final : public Group {
 public:
  GlooGroup(std::shared_ptr<gloo::Context> control, std::shared_ptr<gloo::Context> data,
            std::vector<int> job_ranks, GlooControl::RollCall roll_call,
            const WorldOptions& options)
      : liveness_seconds_(options.liveness_seconds),
        control_(std::move(control), job_ranks, std::move(roll_call)),
        backend_(std::move(data), options.host_algorithm, options.liveness_seconds,
                 std::move(job_ranks)) {}
  int rank() const override { return control_.rank(); }
  int size() const override { return control_.size(); }
  ControlTransport& control() override { return control_; }
  Backend& backend() override { return backend_; }
  StatusOr<std::unique_ptr<Backend>> shared_memory(std::string* why) override {
    return ShmBackend::join(control_, liveness_seconds_, why);
  }

 private:
  double liveness_seconds_;
  GlooControl control_;
  GlooBackend backend_;
};

class GlooWorld final : public World {
 public:
  GlooWorld(std::shared_ptr<Rendezvous> rendezvous, std::shared_ptr<gloo::transport::Device> device,
            const GlooWorldOptions& gloo, const WorldOptions& options)
      : rendezvous_(std::move(rendezvous)),
        store_(*rendezvous_, gloo.connect_timeout),
        device_(std::move(device)),
        gloo_(gloo),
        options_(options) {}

  // The world's own context, for allgather and the clock.
  Status start() {
    std::vector<int> everyone(static_cast<std::size_t>(size()));
    std::iota(everyone.begin(), everyone.end(), 0);
    StatusOr<std::shared_ptr<gloo::Context>> made = connect("world", rank(), everyone);
    if (!made.ok()) return made.status();
    world_ = std::move(made).value();
    links_ = std::make_unique<GlooLinks>(world_, options_.liveness_seconds);
    return {};
  }

  int rank() const override { return rendezvous_->rank(); }
  int size() const override { return rendezvous_->size(); }

  StatusOr<std::vector<std::string>> host_names() override { return allgather(this_host()); }

  StatusOr<ClockOffset> clock_offset() override {
    return measure_clock_offset(*links_, steady_clock_ns);
  }

  StatusOr<std::vector<std::string>> allgather(const std::string& mine) override {
    const int64_t len = static_cast<int64_t>(mine.size());
    std::vector<int64_t> lens(static_cast<std::size_t>(size()));
    if (Status s = links_->allgather(&len, lens.data(), sizeof len); !s.ok()) return s;
    std::vector<size_t> counts(lens.begin(), lens.end());
    std::string all(static_cast<std::size_t>(std::accumulate(lens.begin(), lens.end(), int64_t{0})),
                    '\0');
    try {
      gloo::AllgathervOptions opts(world_);
      opts.setInput(const_cast<char*>(mine.data()), mine.size());
      opts.setOutput(all.data(), counts);
      opts.setTimeout(links_->bound());
      gloo::allgatherv(opts);
    } catch (const std::exception& e) {
      return links_->collective_failed(e.what());
    }
    std::vector<std::string> out;
    std::size_t at = 0;
    for (int64_t n : lens) {
      out.push_back(all.substr(at, static_cast<std::size_t>(n)));
      at += static_cast<std::size_t>(n);
    }
    return out;
  }

  // Non-members take no part: the members meet under the call's own prefix.
  StatusOr<std::unique_ptr<Group>> create_group(const std::vector<int>& ranks) override {
    const std::string prefix = "group." + std::to_string(calls_++);
    auto it = std::find(ranks.begin(), ranks.end(), rank());
    if (it == ranks.end()) return std::unique_ptr<Group>();
    return make_group(prefix, static_cast<int>(it - ranks.begin()), ranks);
  }

  StatusOr<std::unique_ptr<Group>> split(int color, int key) override {
    if (color < 0) return invalid_argument("split: negative color");
    const std::string prefix = "split." + std::to_string(calls_++) + "." + std::to_string(color);
    const int64_t mine[2] = {color, key};
    std::vector<int64_t> all(2 * static_cast<std::size_t>(size()));
    if (Status s = links_->allgather(mine, all.data(), sizeof mine); !s.ok()) return s;
    std::vector<int> members;
    for (int r = 0; r < size(); ++r) {
      if (all[2 * r] == color) members.push_back(r);
    }
    std::stable_sort(members.begin(), members.end(),
                     [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });
    const int index =
        static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
    return make_group(prefix, index, members);
  }

  Status finalize() override {
    links_.reset();
    world_.reset();
    return {};
  }

 private:
  StatusOr<std::unique_ptr<Group>> make_group(const std::string& prefix, int index,
                                              const std::vector<int>& members) {
    StatusOr<std::shared_ptr<gloo::Context>> control = connect(prefix + ".c", index, members);
    if (!control.ok()) return control.status();
    StatusOr<std::shared_ptr<gloo::Context>> data = connect(prefix + ".d", index, members);
    if (!data.ok()) return data.status();
    return std::unique_ptr<Group>(
        new GlooGroup(std::move(control).value(), std::move(data).value(), members,
                      {rendezvous_, "chorus." + prefix + ".roll", gloo_.lost_key}, options_));
  }

  // A context among `members` (ranks of the job), this rank being member `index`.
  StatusOr<std::shared_ptr<gloo::Context>> connect(const std::string& prefix, int index,
                                                   const std::vector<int>& members) {
    auto context =
        std::make_shared<gloo::rendezvous::Context>(index, static_cast<int>(members.size()));
    context->setTimeout(gloo_.connect_timeout);
    try {
      gloo::rendezvous::PrefixStore scoped("chorus." + prefix, store_);
      context->connectFullMesh(scoped, device_);
    } catch (const std::exception& e) {
      // A host name that maps to a loopback address here (127.0.1.1, as Debian's /etc/hosts
      // has it) would have Gloo listen where no other host reaches it.
      const std::string address = device_->str();
      const bool loopback =
          address.find("127.") != std::string::npos || address.find("::1") != std::string::npos;
      return gloo_failed("rank " + std::to_string(rank()) + " could not connect to the ranks of " +
                             prefix + " through the job's store (Gloo listens here on " + address +
                             (loopback ? ", a loopback address other hosts cannot reach: set "
                                         "CHORUS_GLOO_IFACE, or a MASTER_ADDR they reach)"
                                       : ")"),
                         e);
    }
    return std::shared_ptr<gloo::Context>(std::move(context));
  }

  std::shared_ptr<Rendezvous> rendezvous_;
  StoreAdapter store_;
  std::shared_ptr<gloo::transport::Device> device_;
  GlooWorldOptions gloo_;
  WorldOptions options_;
  std::shared_ptr<gloo::Context> world_;
  std::unique_ptr<GlooLinks> links_;
  uint64_t calls_ = 0;  // world-wide calls that made groups, the same count on every rank
};

}  // namespace

StatusOr<std::unique_ptr<World>> init_gloo_world(std::shared_ptr<Rendezvous> rendezvous,
                                                 const GlooWorldOptions& gloo,
                                                 const WorldOptions& options) {
  gloo::transport::tcp::attr attr;
  if (!gloo.iface.empty()) {
    attr.iface = gloo.iface;
  } else {
    attr.hostname = gloo.route_to.empty() ? std::string() : address_towards(gloo.route_to);
    if (attr.hostname.empty()) attr.hostname = this_host();
  }
  std::shared_ptr<gloo::transport::Device> device;
  try {
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    return gloo_failed(
        "rank " + std::to_string(rendezvous->rank()) + ": Gloo cannot use " +
            (gloo.iface.empty() ? "address " + attr.hostname
                                : "interface " + gloo.iface + " (CHORUS_GLOO_IFACE)"),
        e);
  }
  auto world = std::make_unique<GlooWorld>(std::move(rendezvous), std::move(device), gloo, options);
  if (Status s = world->start(); !s.ok()) return s;
  return std::unique_ptr<World>(std::move(world));
}

}  // namespace chorus
