#include "hosts_notice.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace chorus::launch {
namespace {

std::string ipv4_addresses() {
  std::vector<std::string> outer;
  std::vector<std::string> loopback;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a; a = a->ifa_next) {
      if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
      char text[INET_ADDRSTRLEN] = {0};
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text,
                sizeof(text));
      (std::strncmp(text, "127.", 4) == 0 ? loopback : outer).push_back(text);
    }
    freeifaddrs(list);
  }
  std::string out;
  for (const auto* group : {&outer, &loopback}) {
    for (const std::string& a : *group) out += (out.empty() ? "" : ",") + a;
  }
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<HostsNotice>> HostsNotice::start() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return invalid_argument(std::string("hosts notice: socket: ") + std::strerror(errno));
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(any);
  if (bind(fd, reinterpret_cast<sockaddr*>(&any), sizeof(any)) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&any), &len) != 0) {
    const std::string why = std::strerror(errno);
    close(fd);
    return invalid_argument("hosts notice: cannot listen: " + why);
  }
  return std::unique_ptr<HostsNotice>(
      new HostsNotice(fd, ipv4_addresses() + ":" + std::to_string(ntohs(any.sin_port))));
}

HostsNotice::HostsNotice(int fd, std::string address)
    : fd_(fd), address_(std::move(address)), server_([this] { serve(); }) {}

HostsNotice::~HostsNotice() {
  stop_.store(true);
  server_.join();
  close(fd_);
}

void HostsNotice::serve() {
  while (!stop_.load()) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    const int peer = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (peer < 0) continue;
    const std::string line = std::to_string(version_.load()) + "\n";
    (void)!send(peer, line.data(), line.size(), MSG_NOSIGNAL);
    close(peer);
  }
}

}  // namespace chorus::launch
