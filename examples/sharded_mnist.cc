// The CNN of mnist.cc trained with sharded data parallelism: ShardedOptimizer keeps Adam's
// moments (stage 1), and the reduced gradients too (stage 2), for 1/P of the parameters on
// each rank, and allgathers the updated parameters after every step. The weights are those
// DistributedOptimizer gives, bit for bit. After every epoch the ranks write one
// consolidated checkpoint, which --resume reads on any number of ranks.
//
//   mpirun -np 4 ./sharded_mnist --epochs 2 --stage 2

#include <cstdio>
#include <string>

#include "mnist_trainer.h"
#include "trainer_main.h"

namespace {

constexpr char kUsage[] =
    "usage: sharded_mnist [--stage 1|2] [--epochs N] [--batch-size N] [--lr X]\n"
    "                     [--data-dir DIR] [--cache-dir DIR] [--checkpoint PATH] [--resume]\n"
    "                     [--limit N] [--min-accuracy PCT] [--seed N]\n"
    "  --stage 1|2         1: Adam's state sharded; 2: the gradients too (default 2)\n"
    "  --checkpoint PATH   the consolidated checkpoint, written after every epoch\n"
    "                      (default mnist-checkpoint.pt)\n"
    "  --resume            start from the checkpoint when it exists, on any number of ranks\n";

int train(const examples::MnistFlags& flags) {
  const bool root = chorus::rank() == 0;
  const std::string data = examples::prepare_mnist(flags);
  torch::manual_seed(flags.seed);
  examples::Cnn model;
  chorus::torch::broadcast_parameters(*model, 0);
  torch::optim::Adam adam(model->parameters(),
                          torch::optim::AdamOptions(flags.lr * chorus::size()));
  // Wrapped before its first step; from here on the optimizer's state is sharded.
  chorus::torch::ShardedOptions options;
  options.stage = flags.stage;
  chorus::torch::ShardedOptimizer optimizer(adam, chorus::torch::named_parameters(*model), options);
  int first_epoch = 1;
  if (flags.resume) {
    if (auto epoch = chorus::torch::load_checkpoint(flags.checkpoint, *model, optimizer)) {
      first_epoch = static_cast<int>(*epoch) + 1;
      if (root)
        std::printf("resumed from %s after epoch %d\n", flags.checkpoint.c_str(), first_epoch - 1);
    } else if (root) {
      std::printf("no checkpoint at %s: starting from scratch\n", flags.checkpoint.c_str());
    }
  }
  if (root) {
    std::printf("stage %d: each rank keeps %.1f%% of Adam's state\n", flags.stage,
                100.0 / chorus::size());
  }
  return examples::train_epochs(flags, data, model, optimizer, first_epoch, [&](int epoch) {
    chorus::torch::save_checkpoint(flags.checkpoint, *model, optimizer, epoch,
                                   /*consolidated=*/true);
  });
}

}  // namespace

int main(int argc, char** argv) {
  return examples::trainer_main(
      "sharded_mnist", argc, argv,
      [](int argc, char** argv) { return examples::parse_mnist_flags(argc, argv, kUsage); }, train);
}
