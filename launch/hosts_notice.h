#pragma once
// How chorusrun tells a running elastic job that hosts were added: a TCP service on every
// IPv4 address of chorusrun's host that answers each connection with one line, the hosts'
// version (a number that grows when the discovery script reports hosts the job could use).
// The workers get the address list and the version they were launched at
// (CHORUS_ELASTIC_SUPERVISOR, CHORUS_ELASTIC_HOSTS_VERSION); rank 0 asks at each commit,
// and a newer version stops every rank at that commit (chorus.torch.elastic).
//
// Thread contract: one thread of its own accepts and answers; bump() from any thread.

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "chorus/status.h"

namespace chorus::launch {

class HostsNotice {
 public:
  /// Listens on an unused port of every address.
  static StatusOr<std::unique_ptr<HostsNotice>> start();
  ~HostsNotice();
  HostsNotice(const HostsNotice&) = delete;
  HostsNotice& operator=(const HostsNotice&) = delete;

  /// "10.0.0.5,192.168.1.3:40123": this host's IPv4 addresses (loopback last) and the port.
  const std::string& address() const { return address_; }
  int version() const { return version_.load(); }
  void bump() { version_.fetch_add(1); }

 private:
  HostsNotice(int fd, std::string address);
  void serve();

  int fd_;
  std::string address_;
  std::atomic<int> version_{0};
  std::atomic<bool> stop_{false};
  std::thread server_;
};

}  // namespace chorus::launch
