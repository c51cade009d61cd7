#pragma once
// The main() of the LibTorch examples: flags, chorus::init(), the training, and
// chorus::shutdown(), each failure reported with the program's name (and the rank) and an
// exit status: 2 for bad flags or a failed init, 1 for a training that threw.

#include <cstdio>
#include <exception>

#include "chorus/chorus.h"

namespace examples {

template <class Parse, class Train>
int trainer_main(const char* program, int argc, char** argv, Parse parse, Train train) {
  decltype(parse(argc, argv)) flags;
  try {
    flags = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 2;
  }
  if (chorus::Status s = chorus::init(); !s.ok()) {
    std::fprintf(stderr, "%s: chorus::init failed: %s\n", program, s.to_string().c_str());
    return 2;
  }
  int rc = 0;
  try {
    rc = train(flags);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: rank %d: %s\n", program, chorus::rank(), e.what());
    rc = 1;
  }
  chorus::shutdown();
  return rc;
}

}  // namespace examples
