#pragma once
/// \file
/// Where the ranks of a job without an MPI launcher find each other: a key-value store that
/// every rank reaches, and this rank's place in the job. chorus::init() makes one from
/// torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) when no MPI launcher
/// started the job; the torch.distributed backend hands Chorus torch's own store. A program
/// may pass its own through Options::rendezvous.

#include <chrono>
#include <string>

#include "chorus/export.h"
#include "chorus/status.h"

namespace chorus {

class CHORUS_API Rendezvous {
 public:
  virtual ~Rendezvous() = default;

  /// This rank's place in the job, 0 <= rank() < size().
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Stores `value` under `key`, for every rank to read. A key is set once.
  virtual Status set(const std::string& key, const std::string& value) = 0;
  /// The value under `key`, waiting until some rank has set it; ABORTED, naming the key,
  /// past `timeout`.
  virtual StatusOr<std::string> get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  /// Whether some rank has set `key`, at once.
  virtual StatusOr<bool> check(const std::string& key) = 0;
};

}  // namespace chorus
