#pragma once
// The key-value store of a job without an MPI launcher (chorus/rendezvous.h), when nothing
// else gives one: rank 0 serves it on a TCP port of MASTER_ADDR, and every rank (rank 0's
// too) is a client. A key is set once; a get waits until it is there. Only the ranks' setting
// up and the making of groups use it, so one thread serves every client with poll().
//
// The wire: a request is a byte ('s' set, 'g' get, 'c' check), a key and, for a set, a value;
// an answer to a get is the value, to a check "1" or "0". Each string is a 4-byte length (host
// order: every rank runs this code) and its bytes.
//
// Thread contract: a client is used by one thread at a time; the server runs its own.

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "chorus/rendezvous.h"

namespace chorus {

/// The store's server: listens on `port` (0: one the system picks) of every address of this
/// host from construction until destruction.
class TcpStoreServer {
 public:
  static StatusOr<std::unique_ptr<TcpStoreServer>> listen(int port);
  /// The port it listens on.
  int port() const;
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

 private:
  explicit TcpStoreServer(int fd);
  void serve();

  int listen_fd_;
  int wake_[2] = {-1, -1};  // a pipe that ends serve()
  std::thread thread_;
};

/// A rank's place in the job and its connection to the store at `host`:`port`; rank 0 also
/// serves it. Connecting retries for `connect_timeout` (rank 0 may start last).
class TcpRendezvous final : public Rendezvous {
 public:
  static StatusOr<std::shared_ptr<TcpRendezvous>> connect(int rank, int size,
                                                          const std::string& host, int port,
                                                          std::chrono::milliseconds timeout);
  /// A connection to a store that another program serves (an elastic job's supervisor),
  /// without a place in the job (rank() is -1); `who` names the caller in messages.
  static StatusOr<std::shared_ptr<TcpRendezvous>> connect_client(std::string who,
                                                                 const std::string& host, int port,
                                                                 std::chrono::milliseconds timeout);
  ~TcpRendezvous() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status set(const std::string& key, const std::string& value) override;
  StatusOr<std::string> get(const std::string& key, std::chrono::milliseconds timeout) override;
  StatusOr<bool> check(const std::string& key) override;

 private:
  StatusOr<std::string> request(char op, const std::string& key, std::chrono::milliseconds timeout);
  static StatusOr<std::shared_ptr<TcpRendezvous>> open(int rank, int size, std::string who,
                                                       const std::string& host, int port,
                                                       std::chrono::milliseconds timeout,
                                                       std::unique_ptr<TcpStoreServer> server);
  TcpRendezvous(int rank, int size, std::string who, std::string where, int fd,
                std::unique_ptr<TcpStoreServer> server);

  int rank_;
  std::string who_;  // "rank 3", for messages
  int size_;
  std::string where_;  // host:port, for messages
  int fd_;
  std::unique_ptr<TcpStoreServer> server_;
};

}  // namespace chorus
