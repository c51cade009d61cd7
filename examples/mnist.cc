// Data-parallel training of a small CNN on Fashion-MNIST with LibTorch and Chorus::torch:
// the program a LibTorch user writes, plus the few lines that make it data-parallel.
//
// Every rank holds a replica of the model; rank 0's initial weights are broadcast to all.
// Each epoch, LibTorch's DistributedRandomSampler gives every rank its own shard of a
// shuffle that all ranks agree on. DistributedOptimizer averages each gradient over the
// ranks from inside backward(), as soon as it is ready, and then runs Adam. Rank 0 writes a
// checkpoint after every epoch; --resume continues from it.
//
//   mpirun -np 4 ./mnist --epochs 2

#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>

#include "chorus/chorus.h"
#include "chorus/torch.h"
#include "fashion_cnn.h"
#include "trainer_main.h"
#include "unpacked_dataset.h"

namespace {

constexpr char kUsage[] =
    "usage: mnist [--epochs N] [--batch-size N] [--lr X] [--data-dir DIR] [--cache-dir DIR]\n"
    "             [--checkpoint PATH] [--resume] [--limit N] [--min-accuracy PCT] [--seed N]\n"
    "  --epochs N          epochs to reach, counting those of a resumed checkpoint (default 2)\n"
    "  --batch-size N      images per rank per step (default 64)\n"
    "  --lr X              Adam's learning rate for one rank, multiplied by the number of\n"
    "                      ranks (default 0.001)\n"
    "  --data-dir DIR      the four Fashion-MNIST .gz files\n"
    "                      (default /usr/share/datasets/fashion-mnist)\n"
    "  --cache-dir DIR     where they are unpacked (default ~/.cache/chorus/fashion-mnist)\n"
    "  --checkpoint PATH   written by rank 0 after every epoch (default mnist-checkpoint.pt)\n"
    "  --resume            start from the checkpoint when it exists\n"
    "  --limit N           train on the first N training images only (default: all 60000)\n"
    "  --min-accuracy PCT  exit with status 1 if the final test accuracy is below PCT\n"
    "  --seed N            seed of the initialization and of the shuffles (default 1)\n"
    "  --slow-rank R       rank R computes --slow-ms longer each step: a slow rank to find with\n"
    "  --slow-ms MS        CHORUS_TIMELINE and chorus-trace (docs/observability.md; default 0)\n";

struct Flags {
  int epochs = 2;
  int batch_size = 64;
  double lr = 0.001;
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::string cache_dir = examples::default_cache_dir();
  std::string checkpoint = "mnist-checkpoint.pt";
  bool resume = false;
  int64_t limit = 0;
  double min_accuracy = 0.0;
  uint64_t seed = 1;
  int slow_rank = -1;
  int slow_ms = 0;
};

Flags parse_flags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (flag == "--resume") {
      f.resume = true;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value\n" + kUsage);
    const std::string value = argv[++i];
    try {
      if (flag == "--epochs")
        f.epochs = std::stoi(value);
      else if (flag == "--batch-size")
        f.batch_size = std::stoi(value);
      else if (flag == "--lr")
        f.lr = std::stod(value);
      else if (flag == "--data-dir")
        f.data_dir = value;
      else if (flag == "--cache-dir")
        f.cache_dir = value;
      else if (flag == "--checkpoint")
        f.checkpoint = value;
      else if (flag == "--limit")
        f.limit = std::stoll(value);
      else if (flag == "--min-accuracy")
        f.min_accuracy = std::stod(value);
      else if (flag == "--seed")
        f.seed = std::stoull(value);
      else if (flag == "--slow-rank")
        f.slow_rank = std::stoi(value);
      else if (flag == "--slow-ms")
        f.slow_ms = std::stoi(value);
      else
        throw std::invalid_argument("unknown flag " + flag + "\n" + kUsage);
    } catch (const std::logic_error& e) {
      if (dynamic_cast<const std::invalid_argument*>(&e) &&
          std::string(e.what()).rfind("unknown", 0) == 0) {
        throw;
      }
      throw std::invalid_argument(flag + " needs a number, got '" + value + "'");
    }
  }
  if (f.epochs < 1 || f.batch_size < 1) {
    throw std::invalid_argument("--epochs and --batch-size must be positive");
  }
  return f;
}

// The rank's share of the test set, evaluated; returns {correct, count}, summed over ranks.
std::pair<int64_t, int64_t> evaluate(examples::Cnn& model, const torch::Tensor& images,
                                     const torch::Tensor& labels) {
  torch::NoGradGuard no_grad;
  model->eval();
  const int64_t n = images.size(0);
  const int64_t begin = n * chorus::rank() / chorus::size();
  const int64_t end = n * (chorus::rank() + 1) / chorus::size();
  int64_t correct = 0;
  for (int64_t i = begin; i < end; i += 500) {
    const int64_t rows = std::min<int64_t>(500, end - i);
    torch::Tensor x = (images.narrow(0, i, rows) - examples::kPixelMean) / examples::kPixelStd;
    correct += model->forward(x).argmax(1).eq(labels.narrow(0, i, rows)).sum().item<int64_t>();
  }
  model->train();
  torch::Tensor totals = torch::tensor({correct, end - begin}, torch::kInt64);
  chorus::AllreduceOptions sum;
  sum.op = chorus::ReduceOp::kSum;
  chorus::torch::allreduce_(totals, "eval.totals", sum);
  return {totals[0].item<int64_t>(), totals[1].item<int64_t>()};
}

double mean_over_ranks(double value, const std::string& name) {
  torch::Tensor t = torch::tensor({value}, torch::kFloat64);
  return chorus::torch::allreduce(t, name).item<double>();
}

int train(const Flags& flags) {
  const bool root = chorus::rank() == 0;
  const std::string data = [&] {
    auto dir = examples::unpack_fashion_mnist(flags.data_dir, flags.cache_dir);
    chorus::torch::throw_if_error(dir.status());
    return *dir;
  }();
  // With several ranks per host, share the host's cores among them.
  const int threads = std::max<int>(
      1, static_cast<int>(std::thread::hardware_concurrency()) / chorus::local_size());
  torch::set_num_threads(threads);

  torch::manual_seed(flags.seed);
  examples::Cnn model;
  torch::optim::Adam adam(model->parameters(),
                          torch::optim::AdamOptions(flags.lr * chorus::size()));
  int first_epoch = 1;
  if (flags.resume) {
    if (auto epoch = chorus::torch::load_checkpoint(flags.checkpoint, *model, adam)) {
      first_epoch = static_cast<int>(*epoch) + 1;
      if (root)
        std::printf("resumed from %s after epoch %d\n", flags.checkpoint.c_str(), first_epoch - 1);
    } else if (root) {
      std::printf("no checkpoint at %s: starting from scratch\n", flags.checkpoint.c_str());
    }
  }
  // Every rank starts from rank 0's weights and optimizer state.
  chorus::torch::broadcast_parameters(*model, 0);
  chorus::torch::broadcast_optimizer_state(adam, 0);
  chorus::torch::DistributedOptimizer optimizer(adam, chorus::torch::named_parameters(*model));

  auto train_set =
      torch::data::datasets::MNIST(data, torch::data::datasets::MNIST::Mode::kTrain)
          .map(torch::data::transforms::Normalize<>(examples::kPixelMean, examples::kPixelStd))
          .map(torch::data::transforms::Stack<>());
  const auto train_size = static_cast<int64_t>(train_set.size().value());
  const int64_t used = flags.limit > 0 ? std::min(flags.limit, train_size) : train_size;
  torch::data::datasets::MNIST test_set(data, torch::data::datasets::MNIST::Mode::kTest);
  if (root) {
    std::printf(
        "training a CNN on %lld Fashion-MNIST images over %d ranks (%d threads each), "
        "batch %d per rank, epochs %d..%d\n",
        static_cast<long long>(used), chorus::size(), threads, flags.batch_size, first_epoch,
        flags.epochs);
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
    chorus::torch::save_checkpoint(flags.checkpoint, *model, adam, epoch);
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

}  // namespace

int main(int argc, char** argv) {
  return examples::trainer_main("mnist", argc, argv, parse_flags, train);
}
