#pragma once
// Why collectives are stuck, from what one moment shows of a process set: which ranks
// submitted each stuck tensor, what every rank has submitted that is not complete, and how
// long each rank has submitted nothing. A pure function, so that the coordinator (live, on
// rank 0 of the set) and chorus-trace (afterwards, from every rank's flight record) classify
// alike, and tests make each class on purpose.
//
// The classes, each said in one line with the fix a user would try:
//  - kNameMismatch: a rank that lacks the tensor submitted one whose name differs only by a
//    prefix or by case ("layer1.weight" against "module.layer1.weight"): a naming bug.
//  - kOrderDeadlock: a rank that lacks tensor X submitted Y, which ranks that submitted X
//    lack: the ranks submit in different orders with a blocking wait between.
//  - kNeverSubmitted: a rank that lacks the tensor submitted others meanwhile, none of them
//    waited for by the ranks that hold it: it never submitted this one.
//  - kRankStopped: a rank that lacks the tensor has nothing outstanding at all: it stopped
//    taking part (stuck outside Chorus, or its loop ended early).
// A stuck tensor gets the first class that holds for some rank it waits for, in that order.

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/message.h"

namespace chorus {

enum class StallClass : uint8_t {
  kNameMismatch = 1,
  kOrderDeadlock = 2,
  kNeverSubmitted = 3,
  kRankStopped = 4,
};
const char* stall_class_name(StallClass c);
/// The exit status of a job that CHORUS_STALL_SHUTDOWN_SECONDS ends for this class: 80 + its
/// number (81 names, 82 order, 83 never submitted, 84 stopped).
int stall_exit_status(StallClass c);

struct StallView {
  struct Stuck {
    std::string name;
    OpType op = OpType::kAllreduce;
    double waited_seconds = 0;
    std::vector<bool> submitted;  ///< index = rank in the set
  };
  int size = 0;
  std::vector<Stuck> stuck;
  /// Per rank: the names it submitted that are not complete, stuck or not.
  std::vector<std::vector<std::string>> outstanding;
  /// Per rank: seconds since it last submitted anything; negative where unknown.
  std::vector<double> idle_seconds;
};

struct StallFinding {
  StallClass cls;
  std::vector<std::string> tensors;  ///< the stuck tensors of this class, sorted
  std::string line;                  ///< what happened and the fix, one line
};

/// One finding per class present, in class order.
std::vector<StallFinding> classify_stalls(const StallView& view);

/// Whether two different names differ only by a prefix ending at '.', '/' or ':' (one is the
/// other's tail), or by case.
bool names_look_alike(const std::string& a, const std::string& b);

}  // namespace chorus
