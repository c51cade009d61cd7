#pragma once
// The restart tests' reading of the elastic job's newest commit (tests/torch/restart.sh): read
// before elastic::run ends the job, which removes its commits.

#include <gtest/gtest.h>
#include <torch/serialize/input-archive.h>

#include <sstream>
#include <string>

#include "chorus/elastic.h"

namespace chorus::torch {

/// Loads the newest commit of the job CHORUS_ELASTIC_JOB names into `archive`; a failed
/// expectation where there is none.
inline void read_newest_commit(::torch::serialize::InputArchive& archive) {
  StatusOr<std::string> dir = ::chorus::elastic::commit_dir();
  ASSERT_TRUE(dir.ok() && !dir->empty()) << "CHORUS_ELASTIC_JOB is not set";
  auto newest = ::chorus::elastic::newest_commit(*dir);
  ASSERT_TRUE(newest.ok() && newest->has_value()) << "no commit in " << *dir;
  std::istringstream bytes((*newest)->bytes);
  archive.load_from(bytes);
}

}  // namespace chorus::torch
