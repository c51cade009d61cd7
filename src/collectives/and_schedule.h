#pragma once
// The steps of the control round's AND among `size` members (transport/control_transport.h),
// a recursive doubling that the MPI and the Gloo control transports both run: members beyond
// the largest power of two p fold in first (member p + i sends its bits to member i, which
// combines them), the p core members exchange with member ^ 2^k at steps k = 0 .. log2(p)-1,
// and the folded members get the result back. Pure: it says who talks to whom, and whose bits
// have reached a member at a given step; the transports move the bytes.

#include <vector>

namespace chorus {

class AndSchedule {
 public:
  static constexpr int kFoldIn = -1;   // extras send, their partners receive and combine
  static constexpr int kFoldOut = -2;  // partners send the result, extras receive it
  static constexpr int kDone = -3;
  // Steps 0 .. log2(p)-1 are the exchanges with rank ^ (1 << step).

  AndSchedule(int rank, int size) : rank_(rank), size_(size) {
    while (pow2_ * 2 <= size_) pow2_ *= 2;
  }

  /// A member beyond p, which folds in and out.
  bool extra() const { return rank_ >= pow2_; }
  /// A core member with an extra to fold in.
  bool has_extra() const { return rank_ + pow2_ < size_; }
  /// The partner of a fold: the core member of an extra, the extra of a core member.
  int fold_partner() const { return extra() ? rank_ - pow2_ : rank_ + pow2_; }
  /// The partner of exchange step `step` (>= 0).
  int exchange_partner(int step) const { return rank_ ^ (1 << step); }

  /// The step after `step`.
  int next(int step) const {
    if (step == kFoldIn) return extra() || pow2_ == 1 ? kFoldOut : 0;
    if (step == kFoldOut) return kDone;
    if ((1 << (step + 1)) < pow2_) return step + 1;
    return kFoldOut;
  }

  /// The members whose bits have not reached this one during `step`: while it folds in (or,
  /// as an extra, until the result comes back), every other member; at exchange step k, all
  /// but the members of its aligned block of 2^k and their extras; when done, none.
  std::vector<int> missing(int step) const {
    const bool alone = step == kFoldIn || (extra() && step != kDone);
    const int block = step >= 0 ? 1 << step : pow2_;
    const int base = core(rank_) & ~(block - 1);
    std::vector<int> out;
    for (int r = 0; r < size_; ++r) {
      const bool heard = r == rank_ || (!alone && core(r) >= base && core(r) < base + block);
      if (!heard) out.push_back(r);
    }
    return out;
  }

 private:
  int core(int r) const { return r >= pow2_ ? r - pow2_ : r; }

  int rank_;
  int size_;
  int pow2_ = 1;
};

}  // namespace chorus
