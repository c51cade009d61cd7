// A LibTorch trainer outside Chorus, built against the installed package: one data-parallel
// step with DistributedOptimizer must leave the same weights on every rank.
#include <chorus/torch.h>
#include <torch/torch.h>

#include <cstdio>

int main() {
  if (chorus::Status s = chorus::init(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.to_string().c_str());
    return 1;
  }
  int rc = 0;
  try {
    torch::manual_seed(chorus::rank());  // different weights until the broadcast
    torch::nn::Linear model(4, 2);
    torch::optim::SGD sgd(model->parameters(), 0.1);
    chorus::torch::broadcast_parameters(*model, 0);
    chorus::torch::DistributedOptimizer optimizer(sgd, chorus::torch::named_parameters(*model));
    optimizer.zero_grad();
    model->forward(torch::full({3, 4}, chorus::rank() + 1.0)).sum().backward();
    optimizer.step();
    torch::Tensor w = model->weight.detach();
    if (!torch::equal(w, chorus::torch::broadcast(w, 0, "consumer.check"))) {
      std::fprintf(stderr, "torch_consumer: rank %d's weights differ from rank 0's\n",
                   chorus::rank());
      rc = 1;
    } else if (chorus::rank() == 0) {
      std::printf("torch_consumer: one step on %d ranks, weights identical\n", chorus::size());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "torch_consumer: %s\n", e.what());
    rc = 1;
  }
  chorus::shutdown();
  return rc;
}
