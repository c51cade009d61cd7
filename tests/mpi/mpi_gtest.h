// The body of the multi-rank gtest programs' main(): one chorus::init() for the whole run,
// every rank runs every test in the same order, and a failure on any rank fails the job
// (mpirun returns non-zero). Ranks other than 0 print only failures. Returns main's status.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>

#include "chorus/chorus.h"

inline int run_gtest_on_every_rank(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  chorus::Status s = chorus::init();
  if (!s.ok()) {
    std::fprintf(stderr, "chorus::init failed: %s\n", s.to_string().c_str());
    return 2;
  }
  if (chorus::rank() != 0) ::testing::GTEST_FLAG(brief) = true;
  int rc = RUN_ALL_TESTS();
  s = chorus::shutdown();
  if (!s.ok()) {
    std::fprintf(stderr, "chorus::shutdown failed: %s\n", s.to_string().c_str());
    return 3;
  }
  return rc;
}
