#include "core/host_rounds.h"

namespace chorus {

Status HostRounds::start_and(std::vector<uint64_t>* bits) {
  on_board_ = bits->size() <= Doorbells::kRoundWords;
  if (!on_board_) return inner_->start_and(bits);
  bits_ = bits;
  board_->publish(++round_, *bits);
  return {};
}

StatusOr<bool> HostRounds::test_and() {
  if (!on_board_) return inner_->test_and();
  return board_->and_round(round_, bits_);
}

}  // namespace chorus
