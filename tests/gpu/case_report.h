#pragma once
// What the GPU case programs (defects_test.cc, device_defects_test.cc) print: each rank's
// lines on stderr, unbuffered (a case may leave with _Exit), "rank R: CASE FAILED: ..." for a
// broken promise, which the CTest rows look for.

#include <cstdio>
#include <string>

#include "chorus/chorus.h"

namespace chorus::gpu_cases {

inline void say(int r, const std::string& line) {
  std::fprintf(stderr, "rank %d: %s\n", r, line.c_str());
}

inline int fail(int r, const std::string& what) {
  std::fprintf(stderr, "rank %d: CASE FAILED: %s\n", r, what.c_str());
  return 1;
}

inline bool has(const Status& s, const std::string& part) {
  return s.message().find(part) != std::string::npos;
}

}  // namespace chorus::gpu_cases
