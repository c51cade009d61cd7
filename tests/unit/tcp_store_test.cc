// Unit tests of the store a job without MPI meets in (src/transport/tcp_store.h): ranks as
// threads on loopback, a get that waits for a later set, a get that runs out naming its key,
// and rank 0's port already taken.
#include "transport/tcp_store.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace chorus {
namespace {

using std::chrono::milliseconds;

// A port nothing listens on now (bound, read back, released).
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

TEST(TcpStore, RanksSeeEachOthersKeysWhateverTheOrder) {
  const int port = free_port();
  constexpr int kSize = 4;
  std::vector<std::string> errors(kSize);
  std::atomic<int> finished{0};
  std::vector<std::thread> ranks;
  for (int r = kSize - 1; r >= 0; --r) {  // rank 0 starts last: the others retry
    ranks.emplace_back([&, r] {
      StatusOr<std::shared_ptr<TcpRendezvous>> store =
          TcpRendezvous::connect(r, kSize, "127.0.0.1", port, milliseconds(20000));
      if (!store.ok()) {
        errors[r] = store.status().to_string();
        finished.fetch_add(1);
        return;
      }
      if (Status s = (*store)->set("rank." + std::to_string(r), std::string(r + 1, 'a' + r));
          !s.ok()) {
        errors[r] = s.to_string();
      }
      for (int peer = 0; peer < kSize; ++peer) {
        StatusOr<std::string> v =
            (*store)->get("rank." + std::to_string(peer), milliseconds(20000));
        if (!v.ok() || *v != std::string(peer + 1, 'a' + peer)) {
          errors[r] = v.ok() ? "rank " + std::to_string(peer) + "'s value is '" + *v + "'"
                             : v.status().to_string();
          break;
        }
      }
      // Rank 0 serves the store: it stays until every other rank is through.
      finished.fetch_add(1);
      while (r == 0 && finished.load() < kSize) std::this_thread::sleep_for(milliseconds(1));
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < kSize; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(TcpStore, AGetRunsOutNamingItsKeyAndValuesMayHoldAnyBytes) {
  const int port = free_port();
  StatusOr<std::shared_ptr<TcpRendezvous>> store =
      TcpRendezvous::connect(0, 1, "127.0.0.1", port, milliseconds(5000));
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  const std::string bytes("\0\1\2 binary\xff", 11);
  ASSERT_TRUE((*store)->set("bytes", bytes).ok());
  StatusOr<std::string> v = (*store)->get("bytes", milliseconds(5000));
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(*v, bytes);
  StatusOr<bool> there = (*store)->check("bytes");
  ASSERT_TRUE(there.ok()) << there.status().to_string();
  EXPECT_TRUE(*there);
  there = (*store)->check("never.set");
  ASSERT_TRUE(there.ok()) << there.status().to_string();
  EXPECT_FALSE(*there);
  v = (*store)->get("never.set", milliseconds(200));
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kAborted);
  EXPECT_NE(v.status().message().find("gave no 'never.set'"), std::string::npos)
      << v.status().to_string();
}

TEST(TcpStore, RankZerosPortTakenIsNamed) {
  const int port = free_port();
  StatusOr<std::shared_ptr<TcpRendezvous>> first =
      TcpRendezvous::connect(0, 2, "127.0.0.1", port, milliseconds(5000));
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  StatusOr<std::shared_ptr<TcpRendezvous>> second =
      TcpRendezvous::connect(0, 2, "127.0.0.1", port, milliseconds(5000));
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("port " + std::to_string(port)), std::string::npos)
      << second.status().to_string();
  EXPECT_NE(second.status().message().find("CHORUS_STORE_PORT"), std::string::npos);
}

TEST(TcpStore, NoServerRunsOutNamingWhere) {
  const int port = free_port();
  StatusOr<std::shared_ptr<TcpRendezvous>> store =
      TcpRendezvous::connect(1, 2, "127.0.0.1", port, milliseconds(300));
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << store.status().to_string();
}

// A store whose host takes no more connections (its queue full: the kernel drops the SYNs, as
// a host that drops packets does): the connection gives up by its deadline, where a blocking
// connect would wait out the kernel's retries for minutes (the test's own timeout).
TEST(TcpStore, AStoreThatDropsConnectionsRunsOutByTheDeadline) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  ASSERT_EQ(listen(listener, 0), 0);
  // Fill the queue: connections never accepted, each done by the kernel alone.
  std::vector<int> queued;
  for (int i = 0; i < 4; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    queued.push_back(fd);
  }
  std::this_thread::sleep_for(milliseconds(100));
  const int port = ntohs(addr.sin_port);
  StatusOr<std::shared_ptr<TcpRendezvous>> store =
      TcpRendezvous::connect(1, 2, "127.0.0.1", port, milliseconds(500));
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("could not reach the job's store at 127.0.0.1:" +
                                          std::to_string(port)),
            std::string::npos)
      << store.status().to_string();
  for (int fd : queued) close(fd);
  close(listener);
}

}  // namespace
}  // namespace chorus
