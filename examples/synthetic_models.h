#pragma once
/// \file
/// The two models of the synthetic benchmark, written with torch::nn. Both take a batch of
/// 3 x 32 x 32 float images and return logits over 10 classes; bench/ddp_synthetic.py
/// builds the same two models (same layers, same parameter counts) for the comparison
/// with PyTorch DDP.
///
/// - "mlp": 3072 -> 2048 -> 2048 -> 2048 -> 10, ReLU between: 14,706,698 parameters in 8
///   tensors, large ones (the biggest 25 MB): reductions of few large gradients.
/// - "cnn": a small ResNet-like network: a 3x3 stem (32 channels), four stages of one basic
///   residual block each (32, 64, 128, 256 channels; the last three halve the resolution,
///   with a 1x1 projection shortcut), batch norm after every convolution, then flatten
///   (256 x 4 x 4) -> 896 -> 10: 4,906,282 parameters in 40 tensors, from 128 bytes to
///   14.7 MB, produced over the whole backward pass: many reductions of mixed sizes.

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>

namespace examples {

/// A model of the benchmark: forward() maps [batch, 3, 32, 32] to [batch, 10].
struct SyntheticNet : torch::nn::Module {
  virtual torch::Tensor forward(torch::Tensor images) = 0;
};

/// "mlp" or "cnn"; nullptr for another name. Parameters are drawn from LibTorch's default
/// initializers, so seed LibTorch first for a reproducible model.
std::shared_ptr<SyntheticNet> make_synthetic_model(const std::string& name);

/// Number of scalar parameters of `module`, recursively.
int64_t parameter_count(const torch::nn::Module& module);

/// Shape of one input image: {3, 32, 32}, the same for both models.
inline constexpr int64_t kImageChannels = 3;
inline constexpr int64_t kImageSide = 32;
inline constexpr int64_t kClasses = 10;

}  // namespace examples
