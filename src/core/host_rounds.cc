#include "core/host_rounds.h"

#include <string>
#include <vector>

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

Status HostRounds::start_share(const std::vector<uint64_t>& mine) {
  if (mine.size() > Doorbells::kRoundWords) {
    return internal_error("a share round of " + std::to_string(mine.size()) +
                          " words does not fit the host's board");
  }
  on_board_ = true;
  shared_words_ = mine.size();
  board_->publish(++round_, mine);
  return {};
}

StatusOr<bool> HostRounds::test_share(std::vector<std::vector<uint64_t>>* all) {
  return board_->share_round(round_, shared_words_, all);
}

std::vector<int> HostRounds::missing() const {
  if (!on_board_) return inner_->missing();
  return board_->behind(round_);
}

// On the board the ranks that have not arrived are known exactly; the others still hear that
// this rank is here, should one of them wait in the set's own transport.
std::vector<int> HostRounds::absent() {
  if (!on_board_) return inner_->absent();
  inner_->announce();
  return missing();
}

// The board's slots are the set's ranks (one host, in rank order): each records its process.
// Where none of them exited, the set's own transport tells what it knows.
std::string HostRounds::exited(const std::vector<int>& ranks) const {
  std::string out;
  for (int r : ranks) {
    if (!board_->exited(r)) continue;
    out += (out.empty() ? "rank " : ", rank ") + std::to_string(inner_->job_rank(r)) + " (pid " +
           std::to_string(board_->pid(r)) + ")";
  }
  return out.empty() ? inner_->exited(ranks) : out;
}

}  // namespace chorus
