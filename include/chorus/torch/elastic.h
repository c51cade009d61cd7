#pragma once
/// \file
/// Elastic training for LibTorch trainers (docs/elastic.md): the state that survives the
/// loss of ranks and hosts, its commits, and the run loop, as chorus.torch.elastic offers
/// Python scripts. Launch the trainer with `chorusrun --max-restarts N`: a job that loses a
/// rank is relaunched on the hosts left and resumes from the newest commit some node holds;
/// hosts the discovery script adds join at the next commit.
///
///     chorus::torch::elastic::ElasticSampler sampler(dataset_size);
///     int64_t epoch = 1;
///     chorus::torch::elastic::State state;
///     state.add("model", *model).add("optimizer", adam).add("sampler", sampler)
///          .add("epoch", epoch);
///     state.register_reset_callback([&] { /* scale the learning rate by size() */ });
///     return chorus::torch::elastic::run(state, [&](chorus::torch::elastic::State& s) {
///       for (; epoch <= epochs; sampler.set_epoch(++epoch), s.commit()) {
///         for (... batches of sampler.indices() ...) { step; sampler.record_batch(n); commit now
///         and then; }
///       }
///     });

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "chorus/torch/distributed_optimizer.h"
#include "chorus/torch/sharded_optimizer.h"

namespace chorus::torch::elastic {

/// The status a worker's main() returns when it stopped for added hosts; chorusrun then
/// relaunches the job on them (launch/supervisor.h).
inline constexpr int kHostsUpdatedStatus = 85;

/// The status a worker's main() returns when chorusrun dropped it from the job during a reset
/// in place (its host left the job); chorusrun expects it.
inline constexpr int kLeftJobStatus = 86;

/// Thrown by State::commit() on every rank when chorusrun found hosts to grow onto.
class HostsUpdated : public std::runtime_error {
 public:
  HostsUpdated() : std::runtime_error("hosts were added to the elastic job") {}
};

/// The samples of an epoch, split among the ranks so that a relaunch on another number of
/// ranks goes on where the last commit left: the epoch's order is a fixed shuffle of
/// 0..size-1 (seeded by seed + epoch), and the processed count is the job's, not the rank's
/// (record_batch counts a batch on every rank). indices() deals the rest of the order
/// round-robin to the ranks, padded to an even split.
class ElasticSampler {
 public:
  explicit ElasticSampler(int64_t dataset_size, bool shuffle = true, uint64_t seed = 0);

  /// Starts `epoch` with nothing processed; call it when an epoch ends.
  void set_epoch(int64_t epoch);
  /// Counts `batch_size` samples on every rank as processed.
  void record_batch(int64_t batch_size);
  /// This rank's samples of the rest of the epoch, for the job's size() now.
  std::vector<int64_t> indices() const;

  int64_t epoch() const { return epoch_; }
  int64_t processed() const { return processed_; }
  /// What a commit holds: the epoch and the processed count.
  void load(int64_t epoch, int64_t processed);

 private:
  int64_t size_;
  bool shuffle_;
  uint64_t seed_;
  int64_t epoch_ = 0;
  int64_t processed_ = 0;
};

/// What a training function carries across restarts: modules, optimizers, samplers and
/// integer values, each under a name. Objects are referenced, not copied; they must outlive
/// the state. The same names in the same order on every rank.
class State {
 public:
  State& add(const std::string& name, ::torch::nn::Module& module);
  State& add(const std::string& name, ::torch::optim::Optimizer& optimizer);
  /// Kept consolidated (ShardedOptimizer::save), so that a relaunch on another number of
  /// ranks reshards it; a commit then gathers the state over the optimizer's set.
  State& add(const std::string& name, ShardedOptimizer& optimizer);
  /// The wrapped optimizer and, with PowerSGD, its step count and warm-started Qs
  /// (DistributedOptimizer::save); each rank's error feedback restarts from zero.
  State& add(const std::string& name, DistributedOptimizer& optimizer);
  State& add(const std::string& name, ElasticSampler& sampler);
  State& add(const std::string& name, int64_t& value);
  /// A random number generator's state (the default CPU one:
  /// at::detail::getDefaultCPUGenerator()): a trainer whose steps draw random numbers
  /// (dropout, augmentation) keeps it so that a reset or relaunch from a commit draws what
  /// the job would have drawn from there, and the weights come out the same bits.
  State& add(const std::string& name, ::at::Generator generator);

  /// Called after a relaunch resumed the state, before training goes on.
  void register_reset_callback(std::function<void()> callback);

  /// Saves the state in memory (a copy of its tensors and values) and, in a job chorusrun
  /// supervises, hands it to the writer that stores its bytes in the node's commit store off
  /// this thread (chorus::elastic::store_commit_async); then throws HostsUpdated on every rank
  /// if chorusrun found hosts to grow onto. Throws chorus::Error for an earlier commit that
  /// could not be stored. Collective.
  void commit();
  /// Returns to the state saved last.
  void restore();
  /// Makes every rank's state rank 0's. Collective.
  void sync();

  /// The newest commit's number (0 before the first).
  uint64_t commit_number() const { return number_; }

 private:
  friend int run(State& state, const std::function<void(State&)>& train);
  // A commit's copy of the state (elastic.cc): tensors and values in memory it owns, or the
  // serialized bytes where the state cannot be copied as tensors.
  struct Snapshot;
  // Copies the live state, reusing `reuse`'s memory where the shapes match.
  std::shared_ptr<Snapshot> take_snapshot(Snapshot* reuse) const;
  // The bytes of a commit, in the format load() reads; any thread.
  static std::string serialize(const Snapshot& snapshot);
  // The live state's bytes (collective when a ShardedOptimizer is kept).
  std::string serialize_live() const;
  void restore_from(const Snapshot& snapshot);
  void load(const std::string& bytes);
  // Loads the newest commit a node holds; whether there was one. Collective.
  bool resume_from_newest_commit();
  // After a reset in place: the newest commit some rank holds in memory, restored on every
  // rank; whether there was one (else the state is the one run() started with). Collective.
  bool restore_newest_held_commit();

  std::vector<std::pair<std::string, ::torch::nn::Module*>> modules_;
  std::vector<std::pair<std::string, ::torch::optim::Optimizer*>> optimizers_;
  std::vector<std::pair<std::string, ShardedOptimizer*>> sharded_;
  std::vector<std::pair<std::string, DistributedOptimizer*>> distributed_;
  std::vector<std::pair<std::string, ElasticSampler*>> samplers_;
  std::vector<std::pair<std::string, int64_t*>> values_;
  std::vector<std::pair<std::string, ::at::Generator>> generators_;
  std::vector<std::function<void()>> reset_callbacks_;
  // The state the last commit, sync or resume saved; never changed once made, since the
  // store's writer may be serializing it.
  std::shared_ptr<Snapshot> saved_;
  // The one before, whose memory the next commit reuses once no writer holds it.
  std::shared_ptr<Snapshot> spare_;
  uint64_t number_ = 0;
};

/// Runs `train(state)` as elastic training: first the workers agree on the newest commit a
/// node holds and load it (then the reset callbacks run), and every rank takes rank 0's
/// state. Returns 0 once `train` returned on every rank (the node's commits are then
/// removed).
///
/// In a job that resets in place (chorusrun --gloo; chorus::elastic::resets_in_place()), a
/// failed collective (chorus::Error) or HostsUpdated resets the workers in place
/// (chorus::elastic::reset): the survivors and the added hosts' workers form the next round,
/// take the newest commit any of them holds in memory, run the reset callbacks and call
/// `train` again. Returns kLeftJobStatus when chorusrun dropped this worker from the job.
///
/// Elsewhere (jobs on MPI), a failed collective throws chorus::Error: the process ends, and
/// chorusrun relaunches the job from the newest stored commit; HostsUpdated returns
/// kHostsUpdatedStatus (main() returns it to chorusrun, which relaunches on the added hosts).
int run(State& state, const std::function<void(State&)>& train);

}  // namespace chorus::torch::elastic
