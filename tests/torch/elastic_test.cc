// elastic::State's commits as copies in memory and their store off the training thread
// (docs/elastic.md): a restore gives back the committed bits after more training, for Adam
// and SGD with momentum; the bytes the writer stored load to the committed state; a newer
// commit replaces one that waits to be written; a failed write is reported with its commit.
// Run with CHORUS_ELASTIC_JOB and CHORUS_ELASTIC_DIR set (tests/torch/CMakeLists.txt).
#include "chorus/elastic.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "chorus/torch.h"
#include "newest_commit.h"

namespace {

namespace elastic = chorus::torch::elastic;

// Every tensor the model and the optimizer hold, by a name that does not depend on the
// tensors' addresses (parameter position and state field), copied.
std::map<std::string, torch::Tensor> tensors_of(torch::nn::Module& model,
                                                torch::optim::Optimizer& optimizer) {
  std::map<std::string, torch::Tensor> all;
  for (const auto& p : model.named_parameters()) all["param." + p.key()] = p.value().clone();
  const std::vector<torch::Tensor>& params = optimizer.param_groups()[0].params();
  for (std::size_t i = 0; i < params.size(); ++i) {
    auto it = optimizer.state().find(c10::guts::to_string(params[i].unsafeGetTensorImpl()));
    if (it == optimizer.state().end()) continue;
    const std::string at = "state." + std::to_string(i) + ".";
    if (auto* adam = dynamic_cast<torch::optim::AdamParamState*>(it->second.get())) {
      all[at + "exp_avg"] = adam->exp_avg().clone();
      all[at + "exp_avg_sq"] = adam->exp_avg_sq().clone();
      all[at + "step"] = torch::tensor(adam->step());
    } else if (auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(it->second.get())) {
      all[at + "momentum_buffer"] = sgd->momentum_buffer().clone();
    }
  }
  return all;
}

void expect_same_bits(const std::map<std::string, torch::Tensor>& expected,
                      const std::map<std::string, torch::Tensor>& actual) {
  ASSERT_EQ(expected.size(), actual.size());
  for (const auto& [name, tensor] : expected) {
    ASSERT_TRUE(actual.count(name)) << name << " is missing";
    EXPECT_TRUE(torch::equal(tensor, actual.at(name))) << name << " differs";
  }
}

// Each test's State numbers its commits from 1: the store goes when the test ends.
void remove_the_commits() {
  ASSERT_TRUE(chorus::elastic::flush_commits().ok());
  ASSERT_TRUE(chorus::barrier().wait().ok());
  chorus::StatusOr<std::string> dir = chorus::elastic::commit_dir();
  ASSERT_TRUE(dir.ok());
  if (!dir->empty()) EXPECT_TRUE(chorus::elastic::remove_commits(*dir).ok());
}

struct Trainer {
  explicit Trainer(uint64_t seed) {
    torch::manual_seed(seed);
    model = torch::nn::Sequential(torch::nn::Linear(8, 16), torch::nn::ReLU(),
                                  torch::nn::Linear(16, 4));
  }
  void step(torch::optim::Optimizer& optimizer) {
    optimizer.zero_grad();
    torch::Tensor x = torch::randn({5, 8});
    model->forward(x).pow(2).sum().backward();
    optimizer.step();
  }
  torch::nn::Sequential model{nullptr};
};

void restore_gives_committed_bits(Trainer& t, torch::optim::Optimizer& optimizer, double lr_after) {
  int64_t epoch = 3;
  elastic::State state;
  state.add("model", *t.model).add("optimizer", optimizer).add("epoch", epoch);
  for (int i = 0; i < 3; ++i) t.step(optimizer);
  state.commit();
  const auto committed = tensors_of(*t.model, optimizer);
  const double lr = optimizer.param_groups()[0].options().get_lr();
  // Twice: a restore leaves the committed copy as it was.
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 4; ++i) t.step(optimizer);
    epoch = 9;
    optimizer.param_groups()[0].options().set_lr(lr_after);
    ASSERT_FALSE(
        torch::equal(committed.at("param.0.weight"), t.model[0]->as<torch::nn::Linear>()->weight));
    state.restore();
    expect_same_bits(committed, tensors_of(*t.model, optimizer));
    EXPECT_EQ(epoch, 3);
    EXPECT_EQ(optimizer.param_groups()[0].options().get_lr(), lr);
  }
  remove_the_commits();
}

TEST(ElasticState, RestoreGivesTheCommittedBitsForAdam) {
  Trainer t(1);
  torch::optim::Adam adam(t.model->parameters(), torch::optim::AdamOptions(1e-2));
  restore_gives_committed_bits(t, adam, 0.5);
}

TEST(ElasticState, RestoreGivesTheCommittedBitsForSgdWithMomentum) {
  Trainer t(2);
  torch::optim::SGD sgd(t.model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  restore_gives_committed_bits(t, sgd, 0.01);
}

TEST(ElasticState, TheStoredCommitLoadsToTheCommittedState) {
  Trainer t(3);
  torch::optim::Adam adam(t.model->parameters(), torch::optim::AdamOptions(1e-2));
  int64_t epoch = 5;
  elastic::State state;
  state.add("model", *t.model).add("optimizer", adam).add("epoch", epoch);
  for (int i = 0; i < 2; ++i) t.step(adam);
  // The writer is kept busy with another store's commit until training changed the live
  // state, so that it serializes the commit's copy only then.
  chorus::StatusOr<std::string> dir = chorus::elastic::commit_dir();
  ASSERT_TRUE(dir.ok() && !dir->empty());
  const std::string busy = *dir + "-busy";
  std::promise<void> go;
  std::shared_future<void> gate = go.get_future().share();
  std::atomic<bool> started{false};
  ASSERT_TRUE(chorus::elastic::store_commit_async(busy, 1, [&] {
                started = true;
                gate.wait();
                return std::string("busy");
              }).ok());
  if (chorus::local_rank() == 0) {
    while (!started) std::this_thread::yield();
  }
  state.commit();
  const auto committed = tensors_of(*t.model, adam);
  for (int i = 0; i < 3; ++i) t.step(adam);
  epoch = 6;
  go.set_value();
  ASSERT_TRUE(chorus::elastic::flush_commits().ok());
  EXPECT_TRUE(chorus::elastic::remove_commits(busy).ok());

  torch::serialize::InputArchive top;
  chorus::torch::read_newest_commit(top);
  Trainer fresh(99);
  torch::optim::Adam fresh_adam(fresh.model->parameters(), torch::optim::AdamOptions(1e-2));
  torch::serialize::InputArchive model, optimizer;
  top.read("module.model", model);
  fresh.model->load(model);
  top.read("optimizer.optimizer", optimizer);
  fresh_adam.load(optimizer);
  expect_same_bits(committed, tensors_of(*fresh.model, fresh_adam));
  torch::Tensor stored_epoch;
  top.read("value.epoch", stored_epoch);
  EXPECT_EQ(stored_epoch.item<int64_t>(), 5);
  remove_the_commits();
}

TEST(CommitWriter, ANewerCommitReplacesOneThatWaits) {
  chorus::StatusOr<std::string> dir = chorus::elastic::commit_dir();
  ASSERT_TRUE(dir.ok() && !dir->empty()) << "CHORUS_ELASTIC_JOB is not set";
  const std::string store = *dir + "-replace";
  std::promise<void> go;
  std::shared_future<void> gate = go.get_future().share();
  std::atomic<bool> first_started{false}, second_made{false};
  const uint64_t replaced = chorus::elastic::commits_replaced();
  ASSERT_TRUE(chorus::elastic::store_commit_async(store, 1, [&] {
                first_started = true;
                gate.wait();
                return std::string("one");
              }).ok());
  if (chorus::local_rank() == 0) {
    while (!first_started) std::this_thread::yield();
  }
  // Commit 1 is being written: 2 waits, and 3 takes its place.
  ASSERT_TRUE(chorus::elastic::store_commit_async(store, 2, [&] {
                second_made = true;
                return std::string("two");
              }).ok());
  ASSERT_TRUE(
      chorus::elastic::store_commit_async(store, 3, [] { return std::string("three"); }).ok());
  go.set_value();
  ASSERT_TRUE(chorus::elastic::flush_commits().ok());
  EXPECT_FALSE(second_made.load());
  if (chorus::local_rank() == 0) EXPECT_EQ(chorus::elastic::commits_replaced(), replaced + 1);
  auto newest = chorus::elastic::newest_commit(store);
  ASSERT_TRUE(newest.ok() && newest->has_value());
  EXPECT_EQ((*newest)->number, 3u);
  EXPECT_EQ((*newest)->bytes, "three");
  ASSERT_TRUE(chorus::barrier().wait().ok());
  EXPECT_TRUE(chorus::elastic::remove_commits(store).ok());
}

TEST(CommitWriter, AFailedWriteIsReportedWithItsCommit) {
  // A file where the store's directory would be: the write cannot make it. Run last: the
  // failure stays latched for the rest of the process.
  chorus::StatusOr<std::string> dir = chorus::elastic::commit_dir();
  ASSERT_TRUE(dir.ok() && !dir->empty());
  const std::string blocker = *dir + "-blocked-" + std::to_string(chorus::rank());
  std::filesystem::remove_all(blocker);
  std::filesystem::create_directories(std::filesystem::path(blocker).parent_path());
  { std::ofstream(blocker) << "not a directory"; }
  ASSERT_TRUE(chorus::elastic::store_commit_async(blocker + "/store", 7, [] {
                return std::string("x");
              }).ok());
  chorus::Status s = chorus::elastic::flush_commits();
  if (chorus::local_rank() == 0) {
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("commit 7"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(blocker), std::string::npos) << s.message();
    // Reported again at the next commit.
    EXPECT_FALSE(chorus::elastic::store_commit_async(blocker + "/store", 8, [] {
                   return std::string("y");
                 }).ok());
  } else {
    EXPECT_TRUE(s.ok());
  }
  std::filesystem::remove_all(blocker);
}

}  // namespace
