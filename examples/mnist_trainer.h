#pragma once
// What the Fashion-MNIST CNN examples share (mnist.cc with DistributedOptimizer,
// sharded_mnist.cc with ShardedOptimizer): their flags, the data, the epochs of training and
// the evaluation. Each program builds its own optimizer and checkpoints; the loop is theirs.

#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <utility>

#include "chorus/chorus.h"
#include "chorus/torch.h"
#include "fashion_cnn.h"
#include "unpacked_dataset.h"

namespace examples {

struct MnistFlags {
  int epochs = 2;
  int batch_size = 64;
  double lr = 0.001;
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::string cache_dir = default_cache_dir();
  std::string checkpoint = "mnist-checkpoint.pt";
  bool resume = false;
  bool adasum = false;  // mnist only
  bool fp16 = false;    // mnist only
  int powersgd = 0;     // mnist only: PowerSGD's rank (0: off)
  int64_t powersgd_start = 100;
  int64_t limit = 0;
  double min_accuracy = 0.0;
  uint64_t seed = 1;
  int slow_rank = -1;
  int slow_ms = 0;
  int stage = 2;  // sharded_mnist only
};

/// The flags of `usage` (the program's usage line and its own flags; --help prints it, then
/// the flags every example takes, and exits).
MnistFlags parse_mnist_flags(int argc, char** argv, const char* usage);

/// The rank's share of the test set, evaluated; returns {correct, count}, summed over ranks.
std::pair<int64_t, int64_t> evaluate(Cnn& model, const torch::Tensor& images,
                                     const torch::Tensor& labels);

/// `value` averaged over the ranks.
double mean_over_ranks(double value, const std::string& name);

/// Unpacks the data set (once per host) and shares the host's cores among its ranks;
/// returns the unpacked directory.
std::string prepare_mnist(const MnistFlags& flags);

/// Trains `model` from `first_epoch` to flags.epochs with `optimizer` (zero_grad() and
/// step() of a Chorus wrapper), evaluating after every epoch and calling save(epoch);
/// returns the exit status (1 when the last accuracy is below --min-accuracy).
template <class Optimizer, class Save>
int train_epochs(const MnistFlags& flags, const std::string& data, Cnn& model, Optimizer& optimizer,
                 int first_epoch, Save save) {
  const bool root = chorus::rank() == 0;
  auto train_set = torch::data::datasets::MNIST(data, torch::data::datasets::MNIST::Mode::kTrain)
                       .map(torch::data::transforms::Normalize<>(kPixelMean, kPixelStd))
                       .map(torch::data::transforms::Stack<>());
  const auto train_size = static_cast<int64_t>(train_set.size().value());
  const int64_t used = flags.limit > 0 ? std::min(flags.limit, train_size) : train_size;
  torch::data::datasets::MNIST test_set(data, torch::data::datasets::MNIST::Mode::kTest);
  if (root) {
    std::printf(
        "training a CNN on %lld Fashion-MNIST images over %d ranks (%d threads each), "
        "batch %d per rank, epochs %d..%d\n",
        static_cast<long long>(used), chorus::size(), torch::get_num_threads(), flags.batch_size,
        first_epoch, flags.epochs);
  }
  double accuracy = 0;
  for (int epoch = first_epoch; epoch <= flags.epochs; ++epoch) {
    torch::data::samplers::DistributedRandomSampler sampler(used, chorus::size(), chorus::rank());
    sampler.set_epoch(static_cast<size_t>(flags.seed * 1000 + epoch));
    auto loader = torch::data::make_data_loader(train_set, std::move(sampler),
                                                torch::data::DataLoaderOptions(flags.batch_size));
    const int64_t per_rank = (used + chorus::size() - 1) / chorus::size();
    const auto start = std::chrono::steady_clock::now();
    double loss_sum = 0;
    int64_t images = 0, steps = 0, next_report = per_rank / 4;
    for (auto& batch : *loader) {
      optimizer.zero_grad();
      if (chorus::rank() == flags.slow_rank) {
        std::this_thread::sleep_for(std::chrono::milliseconds(flags.slow_ms));
      }
      torch::Tensor loss =
          torch::nn::functional::cross_entropy(model->forward(batch.data), batch.target);
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>();
      images += batch.data.size(0);
      ++steps;
      if (root && images >= next_report && images < per_rank) {
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::printf("  epoch %d %3lld%%  loss %.4f  %.0f images/s\n", epoch,
                    static_cast<long long>(100 * images / per_rank), loss_sum / steps,
                    images * chorus::size() / s);
        std::fflush(stdout);
        next_report += per_rank / 4;
      }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double loss = mean_over_ranks(loss_sum / std::max<int64_t>(steps, 1), "epoch.loss");
    const double rate = mean_over_ranks(images / seconds, "epoch.rate") * chorus::size();
    auto [correct, count] = evaluate(model, test_set.images(), test_set.targets());
    accuracy = 100.0 * correct / count;
    save(epoch);
    if (root) {
      std::printf(
          "epoch %d  loss %.4f  test accuracy %.2f%% (%lld/%lld)  %.0f images/s  %.1f s  "
          "checkpoint %s\n",
          epoch, loss, accuracy, static_cast<long long>(correct), static_cast<long long>(count),
          rate, seconds, flags.checkpoint.c_str());
      std::fflush(stdout);
    }
  }
  if (first_epoch > flags.epochs) {
    auto [correct, count] = evaluate(model, test_set.images(), test_set.targets());
    accuracy = 100.0 * correct / count;
    if (root)
      std::printf("already trained for %d epochs: test accuracy %.2f%%\n", flags.epochs, accuracy);
  }
  if (accuracy < flags.min_accuracy) {
    if (root)
      std::fprintf(stderr, "test accuracy %.2f%% is below --min-accuracy %.2f%%\n", accuracy,
                   flags.min_accuracy);
    return 1;
  }
  return 0;
}

}  // namespace examples
