#include "chorus/torch/elastic.h"

#include <torch/serialize.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <random>

#include "chorus/chorus.h"
#include "chorus/elastic.h"
#include "chorus/torch/state.h"
#include "chorus/torch/tensor_ops.h"
#include "optimizer_archive.h"

namespace chorus::torch::elastic {

using ::torch::Tensor;
using ::torch::serialize::InputArchive;
using ::torch::serialize::OutputArchive;

ElasticSampler::ElasticSampler(int64_t dataset_size, bool shuffle, uint64_t seed)
    : size_(dataset_size), shuffle_(shuffle), seed_(seed) {}

void ElasticSampler::set_epoch(int64_t epoch) { load(epoch, 0); }

void ElasticSampler::record_batch(int64_t batch_size) {
  processed_ += batch_size * ::chorus::size();
}

void ElasticSampler::load(int64_t epoch, int64_t processed) {
  epoch_ = epoch;
  processed_ = processed;
}

std::vector<int64_t> ElasticSampler::indices() const {
  std::vector<int64_t> order(static_cast<std::size_t>(size_));
  for (int64_t i = 0; i < size_; ++i) order[static_cast<std::size_t>(i)] = i;
  if (shuffle_) {
    // Fisher-Yates with a seeded generator of fixed definition: the same order on every rank
    // and every standard library.
    std::mt19937_64 random(seed_ + static_cast<uint64_t>(epoch_));
    for (std::size_t i = order.size(); i > 1; --i) {
      std::swap(order[i - 1], order[static_cast<std::size_t>(random() % i)]);
    }
  }
  const std::size_t done = static_cast<std::size_t>(std::min(processed_, size_));
  const std::size_t left = order.size() - done;
  const std::size_t ranks = static_cast<std::size_t>(::chorus::size());
  const std::size_t each = (left + ranks - 1) / ranks;
  std::vector<int64_t> mine;
  for (std::size_t k = 0; k < each && left > 0; ++k) {
    // Position rank + k * ranks of the rest, wrapping round to pad the last turn.
    const std::size_t at = (static_cast<std::size_t>(::chorus::rank()) + k * ranks) % left;
    mine.push_back(order[done + at]);
  }
  return mine;
}

State& State::add(const std::string& name, ::torch::nn::Module& module) {
  modules_.emplace_back(name, &module);
  return *this;
}

State& State::add(const std::string& name, ::torch::optim::Optimizer& optimizer) {
  optimizers_.emplace_back(name, &optimizer);
  return *this;
}

State& State::add(const std::string& name, ShardedOptimizer& optimizer) {
  sharded_.emplace_back(name, &optimizer);
  return *this;
}

State& State::add(const std::string& name, DistributedOptimizer& optimizer) {
  distributed_.emplace_back(name, &optimizer);
  return *this;
}

State& State::add(const std::string& name, ElasticSampler& sampler) {
  samplers_.emplace_back(name, &sampler);
  return *this;
}

State& State::add(const std::string& name, int64_t& value) {
  values_.emplace_back(name, &value);
  return *this;
}

void State::register_reset_callback(std::function<void()> callback) {
  reset_callbacks_.push_back(std::move(callback));
}

std::string State::serialize() const {
  OutputArchive top;
  for (const auto& [name, module] : modules_) {
    OutputArchive a;
    module->save(a);
    top.write("module." + name, a);
  }
  for (const auto& [name, optimizer] : optimizers_) {
    OutputArchive a;
    optimizer->save(a);
    top.write("optimizer." + name, a);
  }
  for (const auto& [name, optimizer] : sharded_) {
    OutputArchive a;
    optimizer->save(a, /*consolidated=*/true);
    top.write("sharded." + name, a);
  }
  for (const auto& [name, optimizer] : distributed_) {
    OutputArchive a;
    optimizer->save(a);
    top.write("distributed." + name, a);
  }
  for (const auto& [name, sampler] : samplers_) {
    top.write("sampler." + name, ::torch::tensor({sampler->epoch(), sampler->processed()}));
  }
  for (const auto& [name, value] : values_) top.write("value." + name, ::torch::tensor(*value));
  // Straight into one string, grown to the size of the last commit at once: a stream would
  // copy a state of hundreds of MB several times over as it grows.
  std::string out;
  out.reserve(saved_.size() + saved_.size() / 16);
  top.save_to([&out](const void* data, std::size_t size) {
    out.append(static_cast<const char*>(data), size);
    return size;
  });
  return out;
}

void State::load(const std::string& bytes) {
  c10::optional<::torch::Device> device;  // the first module's (std::optional in LibTorch 2)
  for (const auto& [name, module] : modules_) {
    for (const Tensor& p : module->parameters()) {
      device = p.device();
      break;
    }
    if (device) break;
  }
  InputArchive top;
  top.load_from(bytes.data(), bytes.size(), device);
  for (const auto& [name, module] : modules_) {
    InputArchive a;
    top.read("module." + name, a);
    module->load(a);
  }
  for (const auto& [name, optimizer] : optimizers_) {
    InputArchive a;
    top.read("optimizer." + name, a);
    load_optimizer(*optimizer, a);
  }
  for (const auto& [name, optimizer] : sharded_) {
    InputArchive a;
    top.read("sharded." + name, a);
    optimizer->load(a);
  }
  for (const auto& [name, optimizer] : distributed_) {
    InputArchive a;
    top.read("distributed." + name, a);
    optimizer->load(a);
  }
  for (const auto& [name, sampler] : samplers_) {
    Tensor t;
    top.read("sampler." + name, t);
    sampler->load(t[0].item<int64_t>(), t[1].item<int64_t>());
  }
  for (const auto& [name, value] : values_) {
    Tensor t;
    top.read("value." + name, t);
    *value = t.item<int64_t>();
  }
}

void State::commit() {
  saved_ = serialize();
  ++number_;
  StatusOr<std::string> dir = ::chorus::elastic::commit_dir();
  throw_if_error(dir.status());
  if (!dir->empty()) throw_if_error(::chorus::elastic::store_commit(*dir, number_, saved_));
  StatusOr<bool> added = ::chorus::elastic::hosts_added();
  throw_if_error(added.status());
  if (*added) throw HostsUpdated();
}

void State::restore() {
  if (!saved_.empty()) load(saved_);
}

void State::sync() {
  // A sharded optimizer's state is gathered by every rank, so all of them serialize then.
  std::string bytes = rank() == 0 || !sharded_.empty() ? serialize() : std::string();
  Tensor length = ::torch::tensor({static_cast<int64_t>(bytes.size())}, ::torch::kInt64);
  broadcast_(length, 0, "elastic.sync.length");
  bytes.resize(static_cast<std::size_t>(length.item<int64_t>()));
  Tensor data =
      ::torch::from_blob(bytes.data(), {static_cast<int64_t>(bytes.size())}, ::torch::kUInt8);
  broadcast_(data, 0, "elastic.sync");
  if (rank() != 0) load(bytes);
  saved_ = std::move(bytes);
}

bool State::resume_from_newest_commit() {
  StatusOr<std::string> dir = ::chorus::elastic::commit_dir();
  throw_if_error(dir.status());
  if (dir->empty()) return false;
  const auto start = std::chrono::steady_clock::now();
  StatusOr<std::optional<::chorus::elastic::CommittedState>> newest =
      ::chorus::elastic::newest_commit(*dir);
  throw_if_error(newest.status());
  if (!*newest) return false;
  load((*newest)->bytes);
  saved_ = std::move((*newest)->bytes);
  number_ = (*newest)->number;
  if (rank() == 0) {
    std::fprintf(stderr, "chorus.elastic: resumed from commit %llu (%.1f MB) in %.2f s\n",
                 static_cast<unsigned long long>(number_), saved_.size() / 1e6,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return true;
}

bool State::restore_newest_held_commit() {
  StatusOr<::chorus::elastic::CommittedState> held =
      ::chorus::elastic::newest_held_commit(number_, [this] { return saved_; });
  throw_if_error(held.status());
  number_ = held->number;
  if (!held->bytes.empty()) {
    saved_ = std::move(held->bytes);
    load(saved_);
  } else {
    restore();
  }
  return held->number > 0;
}

namespace {

// Resets this worker in place, again after a failure during the reset itself (at most a few
// times in a row); false when chorusrun dropped it from the job.
bool reset_in_place(const std::string& why) {
  std::fprintf(stderr, "chorus.elastic: rank %d resets in place: %s\n", rank(), why.c_str());
  constexpr int kMostTries = 5;
  for (int tries = 1;; ++tries) {
    const auto start = std::chrono::steady_clock::now();
    const Status s = ::chorus::elastic::reset();
    if (s.ok()) {
      std::fprintf(stderr, "chorus.elastic: rank %d of %d after the reset (%.2f s)\n", rank(),
                   size(),
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      return true;
    }
    if (s.code() == StatusCode::kFailedPrecondition) {
      std::fprintf(stderr, "chorus.elastic: %s\n", s.message().c_str());
      return false;
    }
    if (tries == kMostTries) throw_if_error(s);
    std::fprintf(stderr, "chorus.elastic: the reset failed (%s); resetting again\n",
                 s.to_string().c_str());
  }
}

}  // namespace

int run(State& state, const std::function<void(State&)>& train) {
  const bool in_place = ::chorus::elastic::resets_in_place();
  // A worker that joins a job resetting in place after its first round (an added host's)
  // takes the state the others agree on after their reset, as they do.
  bool was_reset = in_place && ::chorus::elastic::start_number() > 1;
  if (!was_reset && state.resume_from_newest_commit()) {
    for (const auto& callback : state.reset_callbacks_) callback();
  }
  bool synced = false;
  for (;;) {
    try {
      if (was_reset) {
        // Every rank takes the same state: the newest commit some rank holds, or where none
        // was made, the state every rank started from (added workers take it from rank 0).
        was_reset = false;
        if (state.restore_newest_held_commit()) {
          if (rank() == 0) {
            std::fprintf(stderr, "chorus.elastic: resumed in place from commit %llu\n",
                         static_cast<unsigned long long>(state.number_));
          }
          for (const auto& callback : state.reset_callbacks_) callback();
        } else {
          synced = false;
        }
      }
      // sync() also saves the state, which a reset before the first commit returns to.
      if (!synced) state.sync();
      synced = true;
      train(state);
      break;
    } catch (const HostsUpdated&) {
      // Every rank threw it at the same commit, which every node stored.
      if (!in_place) return kHostsUpdatedStatus;
      if (!reset_in_place("hosts were added")) return kLeftJobStatus;
    } catch (const ::chorus::Error& e) {
      if (!in_place) throw;
      if (!reset_in_place(e.what())) return kLeftJobStatus;
    }
    was_reset = true;
  }
  throw_if_error(barrier().wait());
  StatusOr<std::string> dir = ::chorus::elastic::commit_dir();
  throw_if_error(dir.status());
  if (!dir->empty()) throw_if_error(::chorus::elastic::remove_commits(*dir));
  return 0;
}

}  // namespace chorus::torch::elastic
