// A torch.distributed store as the rendezvous of a job without MPI (chorus/rendezvous.h):
// the store dist.init_process_group made (env://, tcp://, file://, or the script's own) is
// where Chorus's ranks meet and connect Gloo, under keys of their own.

#include <exception>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <utility>
#include <vector>

#include "chorus/torch/process_group.h"

namespace chorus::torch {
namespace {

class StoreRendezvous final : public chorus::Rendezvous {
 public:
  StoreRendezvous(c10::intrusive_ptr<::c10d::Store> store, int rank, int size)
      : store_(std::move(store)), rank_(rank), size_(size) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status set(const std::string& key, const std::string& value) override {
    try {
      store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
    } catch (const std::exception& e) {
      return failed("setting", key, e.what());
    }
    return {};
  }

  StatusOr<std::string> get(const std::string& key, std::chrono::milliseconds timeout) override {
    try {
      store_->wait({key}, timeout);
      const std::vector<uint8_t> value = store_->get(key);
      return std::string(value.begin(), value.end());
    } catch (const std::exception& e) {
      return failed("waiting for", key, e.what());
    }
  }

  StatusOr<bool> check(const std::string& key) override {
    try {
      return store_->check({key});
    } catch (const std::exception& e) {
      return failed("looking for", key, e.what());
    }
  }

 private:
  Status failed(const char* what, const std::string& key, const char* why) const {
    return Status(StatusCode::kAborted, "rank " + std::to_string(rank_) +
                                            ": torch.distributed's store failed " + what + " '" +
                                            key + "': " + why);
  }

  c10::intrusive_ptr<::c10d::Store> store_;
  int rank_;
  int size_;
};

}  // namespace

std::shared_ptr<chorus::Rendezvous> store_rendezvous(c10::intrusive_ptr<::c10d::Store> store,
                                                     int rank, int size) {
  return std::make_shared<StoreRendezvous>(std::move(store), rank, size);
}

}  // namespace chorus::torch
