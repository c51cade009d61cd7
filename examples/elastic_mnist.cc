// Elastic data-parallel training of the Fashion-MNIST CNN with LibTorch and
// chorus::torch::elastic: the trainer of examples/mnist.cc, made to survive the loss of
// ranks and hosts. Its state (model, Adam, sampler, epoch) is committed every few batches;
// launched by the supervisor, a job that loses a rank is relaunched on the hosts left and
// resumes from the newest commit a node holds, and hosts the discovery script adds join at
// the next commit.
//
//   chorusrun --max-restarts 3 --min-np 2 -H a:2,b:2,c:2 ./elastic_mnist --epochs 2
//
// If every node was lost, the epoch checkpoint (--checkpoint) is the fallback.

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>

#include "chorus/chorus.h"
#include "chorus/elastic.h"
#include "chorus/torch.h"
#include "fashion_cnn.h"
#include "trainer_main.h"
#include "unpacked_dataset.h"

namespace {

namespace elastic = chorus::torch::elastic;

constexpr char kUsage[] =
    "usage: elastic_mnist [--epochs N] [--batch-size N] [--lr X] [--limit N]\n"
    "                     [--batches-per-commit N] [--checkpoint PATH] [--sample-log DIR]\n"
    "                     [--data-dir DIR] [--cache-dir DIR] [--seed N]\n"
    "  --epochs N              epochs to train (default 2)\n"
    "  --batch-size N          images per rank per step (default 32)\n"
    "  --lr X                  Adam's learning rate for one rank, times the ranks (0.001)\n"
    "  --limit N               train on the first N training images (default: all 60000)\n"
    "  --batches-per-commit N  commit the state every N batches (default 20)\n"
    "  --log-interval N        rank 0 prints the loss every N batches (default 50)\n"
    "  --checkpoint PATH       rank 0 writes each finished epoch here; the fallback when no\n"
    "                          node holds a commit\n"
    "  --sample-log DIR        each rank records the samples of every batch it trained\n"
    "                          (rank<R>.log), to check a resumed epoch\n"
    "  --data-dir DIR          the four Fashion-MNIST .gz files\n"
    "                          (default /usr/share/datasets/fashion-mnist)\n"
    "  --cache-dir DIR         where they are unpacked (default ~/.cache/chorus/fashion-mnist)\n"
    "  --seed N                seed of the initialization and of the shuffles (default 1)\n";

struct Flags {
  int64_t epochs = 2;
  int64_t batch_size = 32;
  double lr = 0.001;
  int64_t limit = 0;
  int64_t batches_per_commit = 20;
  int64_t log_interval = 50;
  std::string checkpoint;
  std::string sample_log;
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::string cache_dir = examples::default_cache_dir();
  uint64_t seed = 1;
};

Flags parse_flags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value\n" + kUsage);
    const std::string value = argv[++i];
    if (flag == "--epochs") {
      f.epochs = std::stoll(value);
    } else if (flag == "--batch-size") {
      f.batch_size = std::stoll(value);
    } else if (flag == "--lr") {
      f.lr = std::stod(value);
    } else if (flag == "--limit") {
      f.limit = std::stoll(value);
    } else if (flag == "--batches-per-commit") {
      f.batches_per_commit = std::stoll(value);
    } else if (flag == "--log-interval") {
      f.log_interval = std::stoll(value);
    } else if (flag == "--checkpoint") {
      f.checkpoint = value;
    } else if (flag == "--sample-log") {
      f.sample_log = value;
    } else if (flag == "--data-dir") {
      f.data_dir = value;
    } else if (flag == "--cache-dir") {
      f.cache_dir = value;
    } else if (flag == "--seed") {
      f.seed = std::stoull(value);
    } else {
      throw std::invalid_argument("unknown flag " + flag + "\n" + kUsage);
    }
  }
  if (f.epochs < 1 || f.batch_size < 1 || f.batches_per_commit < 1 || f.log_interval < 1) {
    throw std::invalid_argument(
        "--epochs, --batch-size, --batches-per-commit and --log-interval must be positive");
  }
  return f;
}

// FNV-1a over every parameter's bytes, in order: equal weights print the same number.
uint64_t weights_digest(torch::nn::Module& model) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const torch::Tensor& p : model.parameters()) {
    const torch::Tensor c = p.detach().contiguous().cpu();
    const auto* bytes = static_cast<const unsigned char*>(c.data_ptr());
    for (int64_t i = 0; i < c.numel() * static_cast<int64_t>(c.element_size()); ++i) {
      h = (h ^ bytes[i]) * 0x100000001b3ull;
    }
  }
  return h;
}

int train(const Flags& flags) {
  const bool root = chorus::rank() == 0;
  auto data = examples::unpack_fashion_mnist(flags.data_dir, flags.cache_dir);
  chorus::torch::throw_if_error(data.status());
  torch::set_num_threads(1);  // ranks share the host's cores
  torch::manual_seed(flags.seed);

  examples::Cnn model;
  torch::optim::Adam adam(model->parameters(),
                          torch::optim::AdamOptions(flags.lr * chorus::size()));
  int64_t epoch = 1;
  if (!flags.checkpoint.empty()) {
    if (auto done = chorus::torch::load_checkpoint(flags.checkpoint, *model, adam)) {
      epoch = *done + 1;
      if (root)
        std::printf("resumed from the checkpoint of epoch %lld\n", static_cast<long long>(*done));
    }
  }
  chorus::torch::DistributedOptimizer optimizer(adam, chorus::torch::named_parameters(*model));

  torch::data::datasets::MNIST train_set(*data, torch::data::datasets::MNIST::Mode::kTrain);
  const int64_t available = train_set.images().size(0);
  const int64_t used = flags.limit > 0 ? std::min(flags.limit, available) : available;
  // The images used, normalized once: the whole set is 188 MB of floats per rank.
  const torch::Tensor images =
      (train_set.images().narrow(0, 0, used) - examples::kPixelMean) / examples::kPixelStd;
  const torch::Tensor labels = train_set.targets().narrow(0, 0, used);

  elastic::ElasticSampler sampler(used, /*shuffle=*/true, flags.seed);
  sampler.set_epoch(epoch);
  elastic::State state;
  // The dropout's draws: a job reset or relaunched from a commit draws what this one would.
  state.add("model", *model).add("optimizer", adam).add("sampler", sampler).add("epoch", epoch);
  state.add("rng", at::detail::getDefaultCPUGenerator());
  state.register_reset_callback([&] {
    for (auto& group : adam.param_groups()) {
      static_cast<torch::optim::AdamOptions&>(group.options()).lr(flags.lr * chorus::size());
    }
  });

  std::unique_ptr<std::ofstream> sample_log;
  if (!flags.sample_log.empty()) {
    std::filesystem::create_directories(flags.sample_log);
    sample_log = std::make_unique<std::ofstream>(
        flags.sample_log + "/rank" + std::to_string(chorus::rank()) + ".log", std::ios::app);
  }

  const int rc = elastic::run(state, [&](elastic::State& s) {
    while (epoch <= flags.epochs) {
      const std::vector<int64_t> mine = sampler.indices();
      for (std::size_t first = 0, b = 0; first < mine.size(); first += flags.batch_size, ++b) {
        const std::size_t n = std::min<std::size_t>(flags.batch_size, mine.size() - first);
        const std::vector<int64_t> taken(mine.begin() + first, mine.begin() + first + n);
        const torch::Tensor index = torch::tensor(taken, torch::kInt64);
        optimizer.zero_grad();
        torch::Tensor loss = torch::nn::functional::cross_entropy(
            model->forward(images.index_select(0, index)), labels.index_select(0, index));
        loss.backward();
        optimizer.step();
        if (sample_log) {
          // Which start of the job trained it: a launch, or a round after a reset in place.
          *sample_log << std::max<int64_t>(chorus::elastic::start_number(), 1) << ' ' << epoch
                      << ' ' << sampler.processed() << ' ' << chorus::size();
          for (int64_t i : taken) *sample_log << ' ' << i;
          *sample_log << '\n';
        }
        if (root && b % flags.log_interval == 0) {
          std::printf("epoch %lld batch %zu/%zu (%d ranks)  loss %.4f\n",
                      static_cast<long long>(epoch), b,
                      (mine.size() + flags.batch_size - 1) / flags.batch_size, chorus::size(),
                      loss.item<double>());
          std::fflush(stdout);
        }
        sampler.record_batch(flags.batch_size);
        if ((b + 1) % flags.batches_per_commit == 0) {
          if (sample_log) sample_log->flush();
          s.commit();
        }
      }
      if (!flags.checkpoint.empty()) {
        chorus::torch::save_checkpoint(flags.checkpoint, *model, adam, epoch);
      }
      if (root)
        std::printf("epoch %lld done on %d ranks\n", static_cast<long long>(epoch), chorus::size());
      sampler.set_epoch(++epoch);
      if (sample_log) sample_log->flush();
      s.commit();
    }
  });
  if (rc != 0) return rc;
  if (root) {
    std::printf("finished %lld epochs on %d ranks\nfinal weights fnv1a %016llx\n",
                static_cast<long long>(flags.epochs), chorus::size(),
                static_cast<unsigned long long>(weights_digest(*model)));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return examples::trainer_main("elastic_mnist", argc, argv, parse_flags, train);
}
