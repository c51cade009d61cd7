#pragma once
// One process set's backends for one memory (host, or its GPU), in the order the settings
// prefer them, and the one choice of which runs each batch: the first that serves the
// batch's collective and dtype (Backend::serves). The last one offered, the set's own
// backend, serves everything, so every batch has one. Every member offers the same backends
// in the same order (they follow from settings and the rank map, which every member shares),
// so every member picks the same for each batch and the calls line up.
//
// The log says, at debug level, which backend each collective first runs on and why it was
// offered, and again whenever another dtype of it runs elsewhere.

#include <array>
#include <string>
#include <vector>

#include "collectives/backend.h"

namespace chorus {

class BackendChoice {
 public:
  /// `label` names the set in the log; `own` serves everything and is picked last; `why`
  /// says what it is ("the set's MPI communicator").
  BackendChoice(std::string label, Backend* own, std::string why);

  /// Offers `b` before the backends offered so far, so the latest preferred is tried first,
  /// with `why` it is offered (logged at its first pick).
  void prefer(Backend* b, std::string why);
  /// The backend that runs `c` on `dtype`.
  Backend& pick(Collective c, DataType dtype) const;
  /// The set's own backend, which serves everything.
  Backend& own() const { return *offers_.back().backend; }

 private:
  struct Offer {
    Backend* backend;
    std::string why;
  };

  std::string label_;
  std::vector<Offer> offers_;  // in the order they are tried
  // The pick per collective and dtype, made once; and per collective the backend last
  // logged, so that the log says only what changes.
  mutable std::array<std::array<Backend*, kNumDataTypes>, kNumCollectives> picked_{};
  mutable std::array<Backend*, kNumCollectives> logged_{};
};

}  // namespace chorus
