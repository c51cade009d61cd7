#pragma once
// The node-local store of an elastic job's committed training state (docs/elastic.md): one
// file per commit in a directory of node-local memory (/dev/shm), each written whole to a
// temporary file and renamed into place, with a header that names it (the commit number,
// the size and a checksum of the bytes). The store keeps the newest few (two by default,
// CHORUS_ELASTIC_KEEP): a writer killed midway leaves the previous commit in force, and a file
// whose header, size or checksum does not match is never returned. The files outlive the processes
// that wrote them, which is the point: the next launch of the job on this node reads them.
//
// Thread contract: none; one writer per directory (the node's first local rank).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chorus/status.h"

namespace chorus {

struct Commit {
  uint64_t number = 0;
  std::string bytes;
};

class CommitStore {
 public:
  /// Commits live in `dir`, made on the first write; `keep` (>= 1) are kept.
  explicit CommitStore(std::string dir, int keep = 2) : dir_(std::move(dir)), keep_(keep) {}

  const std::string& dir() const { return dir_; }
  /// Stores commit `number`, which must be newer than every commit stored, then removes all
  /// but the newest `keep`.
  Status write(uint64_t number, std::string_view bytes);
  /// Removes the directory and every commit in it (the training they served finished).
  Status remove_all();
  /// Removes the commits numbered above `number` (a job resumed at `number` writes them again;
  /// files the job did not agree on, torn ones included, must not stand in its way).
  Status drop_after(uint64_t number);
  /// The newest commit whose file is whole and matches its checksum; none in an empty or
  /// missing directory. Files that are not commits are ignored.
  StatusOr<std::optional<Commit>> newest() const;

 private:
  // The committed numbers in the directory, newest first (from the file names alone).
  StatusOr<std::vector<uint64_t>> numbers() const;
  std::string path(uint64_t number) const;

  std::string dir_;
  int keep_;
};

}  // namespace chorus
