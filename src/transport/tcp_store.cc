#include "transport/tcp_store.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

namespace chorus {
namespace {

std::string system_error(const std::string& what) { return what + ": " + std::strerror(errno); }

void put_string(std::string* out, const std::string& s) {
  const auto len = static_cast<uint32_t>(s.size());
  out->append(reinterpret_cast<const char*>(&len), sizeof len);
  out->append(s);
}

// Writes all of `data` (blocking); false where the peer is gone.
bool write_all(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// Takes one string off the front of `in` at `*at`; false where it is not all there yet.
bool take_string(const std::string& in, std::size_t* at, std::string* out) {
  uint32_t len = 0;
  if (in.size() < *at + sizeof len) return false;
  std::memcpy(&len, in.data() + *at, sizeof len);
  if (in.size() < *at + sizeof len + len) return false;
  out->assign(in, *at + sizeof len, len);
  *at += sizeof len + len;
  return true;
}

}  // namespace

// --- the server ------------------------------------------------------------------------

StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::listen(int port) {
  // IPv6 with IPv4 clients too, or IPv4 alone where the host has no IPv6.
  int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const bool v6 = fd >= 0;
  if (!v6) fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status(StatusCode::kInternal, system_error("the store's socket"));
  const int on = 1, off = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  if (v6) {
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_any;
    a->sin6_port = htons(static_cast<uint16_t>(port));
    addr_len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_ANY);
    a->sin_port = htons(static_cast<uint16_t>(port));
    addr_len = sizeof *a;
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), addr_len) != 0 || ::listen(fd, 1024) != 0) {
    const std::string why = system_error("port " + std::to_string(port));
    ::close(fd);
    return Status(StatusCode::kFailedPrecondition,
                  "rank 0 cannot serve the job's store on " + why +
                      " (another program holds it? CHORUS_STORE_PORT chooses another)");
  }
  return std::unique_ptr<TcpStoreServer>(new TcpStoreServer(fd));
}

int TcpStoreServer::port() const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  return ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                          : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

TcpStoreServer::TcpStoreServer(int fd) : listen_fd_(fd) {
  if (::pipe2(wake_, O_CLOEXEC) != 0) wake_[0] = wake_[1] = -1;
  thread_ = std::thread(&TcpStoreServer::serve, this);
}

TcpStoreServer::~TcpStoreServer() {
  if (wake_[1] >= 0) {
    const char byte = 0;
    (void)!::write(wake_[1], &byte, 1);
  }
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  for (int fd : wake_) {
    if (fd >= 0) ::close(fd);
  }
}

// One loop: accept clients, read their requests, answer the gets whose keys are there, and
// keep the others until a set brings their key.
void TcpStoreServer::serve() {
  struct Client {
    int fd;
    std::string in;
  };
  std::vector<Client> clients;
  std::map<std::string, std::string> values;
  std::multimap<std::string, int> waiting;  // key -> the client that asked
  auto answer = [](int fd, const std::string& value) {
    std::string out;
    put_string(&out, value);
    write_all(fd, out);
  };
  for (;;) {
    std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const Client& c : clients) fds.push_back({c.fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) return;
    if (fds[0].revents != 0) break;
    if (fds[1].revents & POLLIN) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        const int on = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        clients.push_back({fd, {}});
      }
    }
    for (std::size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Client& c = clients[i - 2];
      char buf[65536];
      const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        for (auto it = waiting.begin(); it != waiting.end();) {
          it = it->second == c.fd ? waiting.erase(it) : std::next(it);
        }
        ::close(c.fd);
        c.fd = -1;
        continue;
      }
      c.in.append(buf, static_cast<std::size_t>(n));
      std::size_t at = 0;
      while (at < c.in.size()) {
        std::size_t next = at + 1;
        std::string key, value;
        if (!take_string(c.in, &next, &key)) break;
        if (c.in[at] == 's') {
          if (!take_string(c.in, &next, &value)) break;
          auto [first, last] = waiting.equal_range(key);
          for (auto it = first; it != last; ++it) answer(it->second, value);
          waiting.erase(first, last);
          values.emplace(key, std::move(value));
        } else if (c.in[at] == 'c') {
          answer(c.fd, values.count(key) ? "1" : "0");
        } else {
          auto found = values.find(key);
          if (found != values.end()) {
            answer(c.fd, found->second);
          } else {
            waiting.emplace(key, c.fd);
          }
        }
        at = next;
      }
      c.in.erase(0, at);
    }
    std::erase_if(clients, [](const Client& c) { return c.fd < 0; });
  }
  for (const Client& c : clients) ::close(c.fd);
}

// --- a rank's connection ---------------------------------------------------------------

namespace {

// connect() that gives up at `deadline`: a blocking connect to a host that drops the packets
// waits out the kernel's SYN retries, minutes past any deadline. The socket is blocking again
// on success. False, with `error` set, otherwise.
bool connect_by(int fd, const sockaddr* addr, socklen_t len,
                std::chrono::steady_clock::time_point deadline, std::string* error) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    *error = std::strerror(errno);
    return false;
  }
  if (::connect(fd, addr, len) != 0) {
    if (errno != EINPROGRESS) {
      *error = std::strerror(errno);
      return false;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLOUT, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(1, left.count())));
    if (ready <= 0) {
      *error = ready == 0 ? "no answer in time" : std::strerror(errno);
      return false;
    }
    int so_error = 0;
    socklen_t so_len = sizeof so_error;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &so_len) != 0 || so_error != 0) {
      *error = std::strerror(so_error != 0 ? so_error : errno);
      return false;
    }
  }
  if (::fcntl(fd, F_SETFL, flags) < 0) {
    *error = std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace

StatusOr<std::shared_ptr<TcpRendezvous>> TcpRendezvous::connect(int rank, int size,
                                                                const std::string& host, int port,
                                                                std::chrono::milliseconds timeout) {
  std::unique_ptr<TcpStoreServer> server;
  if (rank == 0) {
    StatusOr<std::unique_ptr<TcpStoreServer>> made = TcpStoreServer::listen(port);
    if (!made.ok()) return made.status();
    server = std::move(made).value();
  }
  return open(rank, size, "rank " + std::to_string(rank), host, port, timeout, std::move(server));
}

StatusOr<std::shared_ptr<TcpRendezvous>> TcpRendezvous::connect_client(
    std::string who, const std::string& host, int port, std::chrono::milliseconds timeout) {
  return open(-1, 0, std::move(who), host, port, timeout, nullptr);
}

StatusOr<std::shared_ptr<TcpRendezvous>> TcpRendezvous::open(
    int rank, int size, std::string who, const std::string& host, int port,
    std::chrono::milliseconds timeout, std::unique_ptr<TcpStoreServer> server) {
  const std::string where = host + ":" + std::to_string(port);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last = "no answer";
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
    if (rc == EAI_AGAIN && std::chrono::steady_clock::now() < deadline) {  // the resolver, for now
      last = gai_strerror(rc);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (rc != 0) {
      return Status(StatusCode::kInvalidArgument, "the job's store: MASTER_ADDR='" + host +
                                                      "' does not resolve: " + gai_strerror(rc));
    }
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (connect_by(fd, a->ai_addr, a->ai_addrlen, deadline, &last)) {
        ::freeaddrinfo(found);
        const int on = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        return std::shared_ptr<TcpRendezvous>(
            new TcpRendezvous(rank, size, std::move(who), where, fd, std::move(server)));
      }
      ::close(fd);
    }
    ::freeaddrinfo(found);
    if (std::chrono::steady_clock::now() > deadline) {
      return Status(StatusCode::kAborted, who + " could not reach the job's store at " + where +
                                              (rank >= 0 ? " (served by rank 0)" : "") +
                                              " within " + std::to_string(timeout.count() / 1000) +
                                              " s: " + last);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

TcpRendezvous::TcpRendezvous(int rank, int size, std::string who, std::string where, int fd,
                             std::unique_ptr<TcpStoreServer> server)
    : rank_(rank),
      who_(std::move(who)),
      size_(size),
      where_(std::move(where)),
      fd_(fd),
      server_(std::move(server)) {}

TcpRendezvous::~TcpRendezvous() {
  if (fd_ >= 0) ::close(fd_);
}

Status TcpRendezvous::set(const std::string& key, const std::string& value) {
  std::string out(1, 's');
  put_string(&out, key);
  put_string(&out, value);
  if (fd_ < 0 || !write_all(fd_, out)) {
    return Status(StatusCode::kAborted,
                  who_ + " lost the job's store at " + where_ + " setting '" + key + "'");
  }
  return {};
}

StatusOr<bool> TcpRendezvous::check(const std::string& key) {
  StatusOr<std::string> answer = request('c', key, std::chrono::seconds(30));
  if (!answer.ok()) return answer.status();
  return *answer == "1";
}

StatusOr<std::string> TcpRendezvous::get(const std::string& key,
                                         std::chrono::milliseconds timeout) {
  return request('g', key, timeout);
}

// A request that ran out leaves its answer on the way: the connection is closed after it, and
// the rank fails (every use of the store is part of setting up, of making a group, or of a
// failure's roll call).
StatusOr<std::string> TcpRendezvous::request(char op, const std::string& key,
                                             std::chrono::milliseconds timeout) {
  std::string out(1, op);
  put_string(&out, key);
  auto fail = [&](const std::string& why) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    return Status(StatusCode::kAborted,
                  who_ + ": the job's store at " + where_ + " gave no '" + key + "': " + why);
  };
  if (fd_ < 0 || !write_all(fd_, out)) return fail("the connection is lost");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string in;
  std::size_t at = 0;
  std::string value;
  while (!take_string(in, &at, &value)) {
    at = 0;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd_, POLLIN, 0};
    const int ready = left.count() > 0 ? ::poll(&p, 1, static_cast<int>(left.count())) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      return fail("no rank set it within " + std::to_string(timeout.count() / 1000) + " s");
    }
    char buf[65536];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return fail(rank_ >= 0 ? "the store closed the connection (rank 0 gone?)"
                             : "the store closed the connection (its server gone?)");
    }
    in.append(buf, static_cast<std::size_t>(n));
  }
  return value;
}

}  // namespace chorus
