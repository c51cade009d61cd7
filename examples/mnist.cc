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

#include <cstdio>
#include <string>

#include "mnist_trainer.h"
#include "trainer_main.h"

namespace {

constexpr char kUsage[] =
    "usage: mnist [--epochs N] [--batch-size N] [--lr X] [--data-dir DIR] [--cache-dir DIR]\n"
    "             [--checkpoint PATH] [--resume] [--adasum] [--fp16] [--powersgd R]\n"
    "             [--powersgd-start N] [--limit N] [--min-accuracy PCT] [--seed N]\n"
    "  --checkpoint PATH   written by rank 0 after every epoch (default mnist-checkpoint.pt)\n"
    "  --adasum            combine the ranks' Adam steps with Adasum instead of averaging the\n"
    "                      gradients (the learning rate is then not scaled by the rank count)\n"
    "  --fp16              gradients travel as float16\n"
    "  --powersgd R        gradients of matrix-shaped parameters travel as rank-R PowerSGD\n"
    "                      factors, after --powersgd-start uncompressed steps (default 100)\n"
    "  --resume            start from the checkpoint when it exists\n"
    "  --slow-rank R       rank R computes --slow-ms longer each step: a slow rank to find with\n"
    "  --slow-ms MS        CHORUS_TIMELINE and chorus-trace (docs/observability.md; default 0)\n";

int train(const examples::MnistFlags& flags) {
  const bool root = chorus::rank() == 0;
  const std::string data = examples::prepare_mnist(flags);
  torch::manual_seed(flags.seed);
  examples::Cnn model;
  // Averaged gradients make the global batch size() times larger, so the step grows with
  // it; Adasum's combined step stays about one rank's where the ranks agree.
  torch::optim::Adam adam(
      model->parameters(),
      torch::optim::AdamOptions(flags.adasum ? flags.lr : flags.lr * chorus::size()));
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
  chorus::torch::DistributedOptimizerOptions options;
  if (flags.adasum) options.op = chorus::ReduceOp::kAdasum;
  if (flags.fp16) options.compression = chorus::torch::Compression::kFloat16;
  options.powersgd.matrix_approximation_rank = flags.powersgd;
  options.powersgd.start_iter = flags.powersgd_start;
  chorus::torch::DistributedOptimizer optimizer(adam, chorus::torch::named_parameters(*model),
                                                options);
  return examples::train_epochs(flags, data, model, optimizer, first_epoch, [&](int epoch) {
    chorus::torch::save_checkpoint(flags.checkpoint, *model, adam, epoch);
  });
}

}  // namespace

int main(int argc, char** argv) {
  return examples::trainer_main(
      "mnist", argc, argv,
      [](int argc, char** argv) { return examples::parse_mnist_flags(argc, argv, kUsage); }, train);
}
