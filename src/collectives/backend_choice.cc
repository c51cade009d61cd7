#include "collectives/backend_choice.h"

#include <utility>

#include "base/logging.h"

namespace chorus {

BackendChoice::BackendChoice(std::string label, std::vector<Offer> offers)
    : label_(std::move(label)), offers_(std::move(offers)) {}

BackendChoice::BackendChoice(std::string label, Backend* own, std::string why)
    : label_(std::move(label)) {
  offers_.push_back({own, std::move(why), {}, {}});
}

BackendChoice::~BackendChoice() {
  for (Offer& o : offers_) {
    for (std::unique_ptr<Backend>& b : o.owned) b.reset();
  }
}

bool BackendChoice::offered_by(const std::string& provider) const {
  for (const Offer& o : offers_) {
    if (o.provider == provider) return true;
  }
  return false;
}

void BackendChoice::abandon() {
  for (Offer& o : offers_) {
    for (std::unique_ptr<Backend>& b : o.owned) static_cast<void>(b.release());
  }
}

Backend& BackendChoice::pick(Collective c, DataType dtype) const {
  const auto ci = static_cast<std::size_t>(c);
  Backend*& slot = picked_[ci][static_cast<std::size_t>(dtype)];
  if (slot) return *slot;
  const Offer* chosen = &offers_.back();
  for (const Offer& o : offers_) {
    if (o.backend->serves(c, dtype)) {
      chosen = &o;
      break;
    }
  }
  slot = chosen->backend;
  if (logged_[ci] != slot) {
    logged_[ci] = slot;
    log().debug("{}: {} of {} runs on {} ({})", label_, collective_name(c), dtype_name(dtype),
                slot->name(), chosen->why);
  }
  return *slot;
}

}  // namespace chorus
