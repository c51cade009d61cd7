#pragma once
// The LibTorch examples' model: a small CNN for Fashion-MNIST, and the pixels' statistics.

#include <torch/torch.h>

namespace examples {

// Mean and standard deviation of the Fashion-MNIST training pixels, scaled to [0, 1].
constexpr double kPixelMean = 0.2860;
constexpr double kPixelStd = 0.3530;

// Two 3x3 convolutions with max pooling, then two fully connected layers: 225k parameters.
struct CnnImpl : torch::nn::Module {
  CnnImpl()
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3)))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3)))),
        fc1(register_module("fc1", torch::nn::Linear(64 * 5 * 5, 128))),
        fc2(register_module("fc2", torch::nn::Linear(128, 10))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(conv1(x)), 2);  // 28x28 -> 26x26 -> 13x13
    x = torch::max_pool2d(torch::relu(conv2(x)), 2);  // 13x13 -> 11x11 -> 5x5
    x = torch::relu(fc1(x.flatten(1)));
    return fc2(torch::dropout(x, 0.25, is_training()));
  }

  torch::nn::Conv2d conv1, conv2;
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Cnn);

}  // namespace examples
