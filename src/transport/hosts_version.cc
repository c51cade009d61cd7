#include "transport/hosts_version.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <vector>

namespace chorus {
namespace {

// The version line from one address, or a reason.
StatusOr<int64_t> ask_one(const std::string& ip, int port, int timeout_ms) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, ip.c_str(), &to.sin_addr) != 1) {
    return invalid_argument("'" + ip + "' is not an IPv4 address");
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Status(StatusCode::kInternal, std::string("socket: ") + std::strerror(errno));
  std::string line;
  Status why;
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0 && errno != EINPROGRESS) {
    why = Status(StatusCode::kInternal, ip + ": " + std::strerror(errno));
  }
  while (why.ok() && line.find('\n') == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) {
      why = Status(StatusCode::kInternal, ip + ": no answer");
      break;
    }
    char chunk[64];
    const ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n <= 0) {
      why = Status(StatusCode::kInternal,
                   ip + ": " + (n == 0 ? std::string("closed") : std::strerror(errno)));
      break;
    }
    line.append(chunk, static_cast<std::size_t>(n));
  }
  close(fd);
  if (!why.ok()) return why;
  char* end = nullptr;
  const long long version = std::strtoll(line.c_str(), &end, 10);
  if (end == line.c_str() || *end != '\n') {
    return Status(StatusCode::kInternal, ip + ": the answer is not a version");
  }
  return static_cast<int64_t>(version);
}

}  // namespace

StatusOr<int64_t> ask_hosts_version(const std::string& address, double timeout_seconds) {
  // The address that answered last is asked first.
  static thread_local std::string answered;
  const std::size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return invalid_argument("supervisor address '" + address + "' has no port");
  }
  const int port = std::atoi(address.c_str() + colon + 1);
  const int timeout_ms = static_cast<int>(timeout_seconds * 1000);
  std::vector<std::string> ips;
  std::istringstream list(address.substr(0, colon));
  for (std::string ip; std::getline(list, ip, ',');) {
    ips.insert(ip == answered ? ips.begin() : ips.end(), ip);
  }
  std::string tried;
  for (const std::string& ip : ips) {
    StatusOr<int64_t> v = ask_one(ip, port, timeout_ms);
    if (v.ok()) {
      answered = ip;
      return v;
    }
    tried += (tried.empty() ? "" : "; ") + v.status().message();
  }
  return Status(StatusCode::kInternal,
                "the supervisor at " + address + " did not answer (" + tried + ")");
}

}  // namespace chorus
