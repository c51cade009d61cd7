// Data-parallel training of a 784-256-10 MLP on Fashion-MNIST over Chorus, in plain C++.
//
// Every rank holds a full replica of the model. Rank 0 initializes it and broadcasts it, so
// all replicas start identical. Each epoch, every rank shuffles the training set with the
// same seed and takes the images at positions rank, rank + size, ... of that order: the
// shards are disjoint and cover the set. After each minibatch, the gradients are averaged
// over the ranks, one asynchronous allreduce per parameter submitted from inside backward()
// as soon as that gradient is ready (last layer first), so the reduction of the later layers
// overlaps the computation of the earlier ones. Every replica then applies the same averaged
// gradient, which keeps them identical (checked at the end): the same as one model trained
// with a minibatch of batch_size * size images.
//
//   mpirun -np 4 ./fashion_mnist_mlp --epochs 2

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "chorus/chorus.h"
#include "idx_reader.h"
#include "mlp.h"

namespace {

using chorus::Status;
using chorus::StatusOr;
using examples::LabelledImages;
using examples::Mlp;
using examples::Parameter;

constexpr char kUsage[] =
    "usage: fashion_mnist_mlp [--epochs N] [--batch-size N] [--lr X] [--data-dir DIR]\n"
    "                         [--limit N] [--min-accuracy PCT] [--seed N]\n"
    "  --epochs N          passes over the training set (default 2)\n"
    "  --batch-size N      images per rank per step (default 64)\n"
    "  --lr X              initial learning rate of SGD with momentum 0.9, decayed to 0\n"
    "                      along a cosine over the run (default 0.05)\n"
    "  --data-dir DIR      the four Fashion-MNIST .gz files\n"
    "                      (default /usr/share/datasets/fashion-mnist)\n"
    "  --limit N           train on the first N training images only (default: all 60000)\n"
    "  --min-accuracy PCT  exit with status 1 if the final test accuracy is below PCT\n"
    "  --seed N            seed of the initialization and of the shuffles (default 1)\n";

constexpr float kMomentum = 0.9f;
// Mean and standard deviation of the Fashion-MNIST training pixels (scaled to [0, 1]):
// standardized inputs let SGD converge markedly faster than raw ones.
constexpr float kPixelMean = 0.2860f;
constexpr float kPixelStd = 0.3530f;
// Test images per forward pass during evaluation.
constexpr int kEvalBatch = 256;

struct Flags {
  int epochs = 2;
  int batch_size = 64;
  float lr = 0.05f;
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int64_t limit = 0;  // 0: every training image
  double min_accuracy = 0.0;
  uint64_t seed = 1;
  bool help = false;
};

template <class T>
Status parse_number(std::string_view flag, std::string_view text, T* out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return chorus::invalid_argument(std::string(flag) + " needs a number, got '" +
                                    std::string(text) + "'");
  }
  return {};
}

StatusOr<Flags> parse_flags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      f.help = true;
      continue;
    }
    // Both "--flag value" and "--flag=value".
    std::string_view flag = arg;
    std::string_view value;
    if (std::size_t eq = arg.find('='); eq != std::string_view::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return chorus::invalid_argument(std::string(arg) + " needs a value");
    }
    Status s;
    if (flag == "--epochs") {
      s = parse_number(flag, value, &f.epochs);
    } else if (flag == "--batch-size") {
      s = parse_number(flag, value, &f.batch_size);
    } else if (flag == "--lr") {
      s = parse_number(flag, value, &f.lr);
    } else if (flag == "--data-dir") {
      f.data_dir = value;
    } else if (flag == "--limit") {
      s = parse_number(flag, value, &f.limit);
    } else if (flag == "--min-accuracy") {
      s = parse_number(flag, value, &f.min_accuracy);
    } else if (flag == "--seed") {
      s = parse_number(flag, value, &f.seed);
    } else {
      return chorus::invalid_argument("unknown flag " + std::string(flag));
    }
    if (!s.ok()) return s;
  }
  if (f.epochs < 1) return chorus::invalid_argument("--epochs must be at least 1");
  if (f.batch_size < 1) return chorus::invalid_argument("--batch-size must be at least 1");
  if (!(f.lr > 0.0f)) return chorus::invalid_argument("--lr must be positive");
  if (f.limit < 0) return chorus::invalid_argument("--limit must not be negative");
  return f;
}

StatusOr<LabelledImages> load_split(const std::string& dir, const std::string& split) {
  const std::string images = dir + "/" + split + "-images-idx3-ubyte.gz";
  const std::string labels = dir + "/" + split + "-labels-idx1-ubyte.gz";
  for (const std::string& path : {images, labels}) {
    if (!std::filesystem::exists(path)) {
      return chorus::invalid_argument(
          "Fashion-MNIST file " + path +
          " not found: install it with `apt-get install dataset-fashion-mnist`, or point "
          "--data-dir at a directory holding the four Fashion-MNIST .gz files");
    }
  }
  StatusOr<LabelledImages> set = examples::read_idx_images(images, labels);
  if (set.ok() && set->image_size() != Mlp::kInputs) {
    return chorus::invalid_argument(images + " holds " + std::to_string(set->rows) + " x " +
                                    std::to_string(set->cols) + " images, not 28 x 28");
  }
  return set;
}

// Copies the images `indices` of `set` into `x` as standardized floats, their labels into `y`.
void gather(const LabelledImages& set, const int64_t* indices, int n, float* x, uint8_t* y) {
  constexpr float kScale = 1.0f / (255.0f * kPixelStd);
  constexpr float kShift = kPixelMean / kPixelStd;
  for (int i = 0; i < n; ++i) {
    const uint8_t* src = set.pixels.data() + indices[i] * Mlp::kInputs;
    float* dst = x + static_cast<std::ptrdiff_t>(i) * Mlp::kInputs;
    for (int p = 0; p < Mlp::kInputs; ++p) dst[p] = static_cast<float>(src[p]) * kScale - kShift;
    y[i] = set.labels[static_cast<std::size_t>(indices[i])];
  }
}

chorus::TensorRef int64_ref(int64_t* value) {
  return {value, chorus::DataType::kInt64, {1}, chorus::Device::cpu()};
}

// Waits for every handle, even after one failed: the tensors they use must not be freed or
// reused while Chorus still works on them. Returns the first failure.
Status wait_all(std::vector<chorus::Handle>& handles) {
  Status first;
  for (const chorus::Handle& h : handles) {
    Status s = h.wait();
    if (first.ok() && !s.ok()) first = s;
  }
  handles.clear();
  return first;
}

// The average over the ranks of one number (every rank must call it, in the same order).
StatusOr<double> average_over_ranks(const std::string& name, double value) {
  chorus::TensorRef t{&value, chorus::DataType::kFloat64, {1}, chorus::Device::cpu()};
  chorus::AllreduceOptions options;
  options.op = chorus::ReduceOp::kAverage;
  if (Status s = chorus::allreduce(name, t, t, options).wait(); !s.ok()) return s;
  return value;
}

// Test accuracy in percent: each rank evaluates a contiguous slice of the test set, the
// counts of correct answers are summed over the ranks.
StatusOr<double> evaluate(Mlp& model, const LabelledImages& test) {
  const int rank = chorus::rank();
  const int size = chorus::size();
  const int64_t begin = test.count * rank / size;
  const int64_t end = test.count * (rank + 1) / size;
  std::vector<int64_t> indices(static_cast<std::size_t>(end - begin));
  std::iota(indices.begin(), indices.end(), begin);
  std::vector<float> x(static_cast<std::size_t>(kEvalBatch) * Mlp::kInputs);
  std::vector<uint8_t> y(kEvalBatch);
  int64_t correct = 0;
  for (int64_t i = 0; i < end - begin; i += kEvalBatch) {
    const int n = static_cast<int>(std::min<int64_t>(kEvalBatch, end - begin - i));
    gather(test, indices.data() + i, n, x.data(), y.data());
    correct += model.count_correct(x.data(), y.data(), n);
  }
  chorus::AllreduceOptions sum;
  sum.op = chorus::ReduceOp::kSum;
  chorus::TensorRef t = int64_ref(&correct);
  if (Status s = chorus::allreduce("eval.correct", t, t, sum).wait(); !s.ok()) return s;
  return 100.0 * static_cast<double>(correct) / static_cast<double>(test.count);
}

// Every replica must hold the same parameters, bit for bit, if the averaged gradients were
// the same on every rank. Compares a hash of them across ranks (min and max must agree).
Status check_replicas_identical(Mlp& model) {
  uint64_t hash = 14695981039346656037ull;  // FNV-1a, 64 bits
  for (Parameter* p : model.parameters()) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(p->value.data());
    for (std::size_t i = 0; i < p->value.size() * sizeof(float); ++i) {
      hash = (hash ^ bytes[i]) * 1099511628211ull;
    }
  }
  int64_t lowest = static_cast<int64_t>(hash);
  int64_t highest = lowest;
  chorus::AllreduceOptions min_op;
  min_op.op = chorus::ReduceOp::kMin;
  chorus::AllreduceOptions max_op;
  max_op.op = chorus::ReduceOp::kMax;
  std::vector<chorus::Handle> handles = {
      chorus::allreduce("check.hash.min", int64_ref(&lowest), int64_ref(&lowest), min_op),
      chorus::allreduce("check.hash.max", int64_ref(&highest), int64_ref(&highest), max_op)};
  if (Status s = wait_all(handles); !s.ok()) return s;
  if (lowest != highest) {
    return chorus::internal_error(
        "the model replicas diverged: their parameters differ across ranks after training");
  }
  return {};
}

// Cosine annealing (Loshchilov & Hutter 2017) from `lr` at step 0 to 0 after `total` steps:
// the late small steps settle the noisy minibatch updates, worth about a point of accuracy.
float cosine_lr(float lr, int64_t step, int64_t total) {
  const double pi = std::acos(-1.0);
  const double t = static_cast<double>(step) / static_cast<double>(total);
  return static_cast<float>(lr * 0.5 * (1.0 + std::cos(pi * t)));
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Trains and returns the final test accuracy in percent. Rank 0 prints the progress.
StatusOr<double> train(const Flags& flags) {
  const int rank = chorus::rank();
  const int size = chorus::size();
  const bool lead = rank == 0;

  StatusOr<LabelledImages> train_set = load_split(flags.data_dir, "train");
  if (!train_set.ok()) return train_set.status();
  StatusOr<LabelledImages> test_set = load_split(flags.data_dir, "t10k");
  if (!test_set.ok()) return test_set.status();
  const int64_t n_train =
      flags.limit > 0 ? std::min(flags.limit, train_set->count) : train_set->count;

  // Every rank must run the same number of steps, or the collectives would not match: the
  // smallest shard holds floor(n_train / size) images; the rest of a larger one is skipped.
  const int64_t steps = n_train / size / flags.batch_size;
  if (steps == 0) {
    return chorus::invalid_argument(std::to_string(n_train) + " training images are too few for " +
                                    std::to_string(size) + " ranks with --batch-size " +
                                    std::to_string(flags.batch_size));
  }

  Mlp model(std::max(flags.batch_size, kEvalBatch));
  if (lead) model.init_he(flags.seed);
  std::vector<chorus::Handle> handles;
  for (Parameter* p : model.parameters()) {
    handles.push_back(chorus::broadcast("init." + p->name, p->value_ref(), /*root=*/0));
  }
  if (Status s = wait_all(handles); !s.ok()) return s;

  if (lead) {
    std::printf("Fashion-MNIST, MLP %d-%d-%d, %d rank(s), %" PRId64 " training and %" PRId64
                " test images\n",
                Mlp::kInputs, Mlp::kHidden, Mlp::kClasses, size, n_train, test_set->count);
    std::printf("%" PRId64 " steps/epoch of %d x %d images, lr %g (cosine decay), momentum %g\n",
                steps, size, flags.batch_size, static_cast<double>(flags.lr),
                static_cast<double>(kMomentum));
    std::fflush(stdout);
  }

  std::vector<int64_t> order(static_cast<std::size_t>(n_train));
  std::vector<int64_t> shard;
  std::vector<float> x(static_cast<std::size_t>(flags.batch_size) * Mlp::kInputs);
  std::vector<uint8_t> y(static_cast<std::size_t>(flags.batch_size));
  chorus::AllreduceOptions average;
  average.op = chorus::ReduceOp::kAverage;
  auto reduce_gradient = [&](Parameter& p) {
    handles.push_back(chorus::allreduce("grad." + p.name, p.grad_ref(), p.grad_ref(), average));
  };
  const auto run_start = std::chrono::steady_clock::now();
  double accuracy = 0.0;

  for (int epoch = 1; epoch <= flags.epochs; ++epoch) {
    const auto epoch_start = std::chrono::steady_clock::now();
    // The same permutation on every rank (same seed, same standard library); this rank's
    // shard is every size-th image of it.
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937_64(flags.seed * 1000003 + epoch));
    shard.clear();
    for (int64_t i = rank; i < n_train; i += size) shard.push_back(order[i]);

    double loss_sum = 0.0;
    double wait_seconds = 0.0;
    double window_loss = 0.0;
    int64_t window_start = 0;
    int quarter = 1;  // progress lines after 25%, 50% and 75% of the steps
    for (int64_t step = 0; step < steps; ++step) {
      gather(*train_set, shard.data() + step * flags.batch_size, flags.batch_size, x.data(),
             y.data());
      const float loss = model.forward(x.data(), y.data(), flags.batch_size);
      model.backward(x.data(), y.data(), flags.batch_size, reduce_gradient);
      // Only the part of the reductions that backward() did not hide is spent here.
      const auto wait_start = std::chrono::steady_clock::now();
      if (Status s = wait_all(handles); !s.ok()) return s;
      wait_seconds += seconds_since(wait_start);
      model.sgd_step(cosine_lr(flags.lr, (epoch - 1) * steps + step, flags.epochs * steps),
                     kMomentum);
      loss_sum += loss;
      window_loss += loss;
      if (quarter < 4 && step + 1 == steps * quarter / 4) {
        if (lead) {
          std::printf("  epoch %d: step %" PRId64 "/%" PRId64 " (%d%%), rank 0 loss %.4f\n", epoch,
                      step + 1, steps, 25 * quarter,
                      window_loss / static_cast<double>(step + 1 - window_start));
          std::fflush(stdout);
        }
        window_loss = 0.0;
        window_start = step + 1;
        ++quarter;
      }
    }
    const double train_seconds = seconds_since(epoch_start);

    StatusOr<double> mean_loss = average_over_ranks("train.loss", loss_sum / steps);
    if (!mean_loss.ok()) return mean_loss.status();
    StatusOr<double> acc = evaluate(model, *test_set);
    if (!acc.ok()) return acc.status();
    accuracy = *acc;
    if (lead) {
      const double images = static_cast<double>(steps) * flags.batch_size * size;
      std::printf(
          "epoch %d/%d: train loss %.4f, test accuracy %.2f%%, %.0f images/s, "
          "train %.2f s (rank 0 waited %.2f s for gradients), wall %.2f s\n",
          epoch, flags.epochs, *mean_loss, accuracy, images / train_seconds, train_seconds,
          wait_seconds, seconds_since(epoch_start));
      std::fflush(stdout);
    }
  }
  if (Status s = check_replicas_identical(model); !s.ok()) return s;
  if (lead) {
    std::printf("total wall time %.2f s\n", seconds_since(run_start));
    std::printf("final test accuracy: %.2f%%\n", accuracy);
  }
  return accuracy;
}

}  // namespace

int main(int argc, char** argv) {
  if (Status s = chorus::init(); !s.ok()) {
    std::fprintf(stderr, "fashion_mnist_mlp: chorus::init failed: %s\n", s.to_string().c_str());
    return 1;
  }
  const int rank = chorus::rank();

  int code = 0;
  StatusOr<Flags> flags = parse_flags(argc, argv);
  if (!flags.ok()) {
    if (rank == 0) {
      std::fprintf(stderr, "fashion_mnist_mlp: %s\n%s", flags.status().message().c_str(), kUsage);
    }
    code = 2;
  } else if (flags->help) {
    if (rank == 0) std::fputs(kUsage, stdout);
  } else {
    StatusOr<double> accuracy = train(*flags);
    if (!accuracy.ok()) {
      std::fprintf(stderr, "fashion_mnist_mlp: rank %d: %s\n", rank,
                   accuracy.status().to_string().c_str());
      code = 1;
    } else if (*accuracy < flags->min_accuracy) {
      if (rank == 0) {
        std::fprintf(stderr, "fashion_mnist_mlp: test accuracy %.2f%% is below --min-accuracy %g\n",
                     *accuracy, flags->min_accuracy);
      }
      code = 1;
    }
  }

  if (Status s = chorus::shutdown(); !s.ok()) {
    std::fprintf(stderr, "fashion_mnist_mlp: rank %d: chorus::shutdown failed: %s\n", rank,
                 s.to_string().c_str());
    code = 1;
  }
  return code;
}
