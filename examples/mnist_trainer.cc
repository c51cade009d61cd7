#include "mnist_trainer.h"

#include <stdexcept>

namespace examples {

namespace {

// The flags every Fashion-MNIST example takes, printed after its own usage.
constexpr char kCommonFlags[] =
    "  --epochs N          epochs to reach, counting those of a resumed checkpoint (default 2)\n"
    "  --batch-size N      images per rank per step (default 64)\n"
    "  --lr X              Adam's learning rate for one rank, multiplied by the number of\n"
    "                      ranks (default 0.001)\n"
    "  --data-dir DIR      the four Fashion-MNIST .gz files\n"
    "                      (default /usr/share/datasets/fashion-mnist)\n"
    "  --cache-dir DIR     where they are unpacked (default ~/.cache/chorus/fashion-mnist)\n"
    "  --limit N           train on the first N training images only (default: all 60000)\n"
    "  --min-accuracy PCT  exit with status 1 if the final test accuracy is below PCT\n"
    "  --seed N            seed of the initialization and of the shuffles (default 1)\n";

}  // namespace

MnistFlags parse_mnist_flags(int argc, char** argv, const char* usage) {
  MnistFlags f;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(usage, stdout);
      std::fputs(kCommonFlags, stdout);
      std::exit(0);
    }
    if (flag == "--resume") {
      f.resume = true;
      continue;
    }
    const bool mine = std::string(usage).find(flag) != std::string::npos;  // the program's own
    if (flag == "--adasum" && mine) {
      f.adasum = true;
      continue;
    }
    if (flag == "--fp16" && mine) {
      f.fp16 = true;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value\n" + usage);
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
      else if (flag == "--stage" && mine)
        f.stage = std::stoi(value);
      else if (flag == "--powersgd" && mine)
        f.powersgd = std::stoi(value);
      else if (flag == "--powersgd-start" && mine)
        f.powersgd_start = std::stoll(value);
      else
        throw std::invalid_argument("unknown flag " + flag + "\n" + usage);
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

std::pair<int64_t, int64_t> evaluate(Cnn& model, const torch::Tensor& images,
                                     const torch::Tensor& labels) {
  torch::NoGradGuard no_grad;
  model->eval();
  const int64_t n = images.size(0);
  const int64_t begin = n * chorus::rank() / chorus::size();
  const int64_t end = n * (chorus::rank() + 1) / chorus::size();
  int64_t correct = 0;
  for (int64_t i = begin; i < end; i += 500) {
    const int64_t rows = std::min<int64_t>(500, end - i);
    torch::Tensor x = (images.narrow(0, i, rows) - kPixelMean) / kPixelStd;
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

std::string prepare_mnist(const MnistFlags& flags) {
  auto dir = unpack_fashion_mnist(flags.data_dir, flags.cache_dir);
  chorus::torch::throw_if_error(dir.status());
  // With several ranks per host, share the host's cores among them.
  const int threads = std::max<int>(
      1, static_cast<int>(std::thread::hardware_concurrency()) / chorus::local_size());
  torch::set_num_threads(threads);
  return *dir;
}

}  // namespace examples
