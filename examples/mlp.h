#pragma once
/// \file
/// A two-layer perceptron for 28 x 28 images, 784 -> 256 (ReLU) -> 10, trained with softmax
/// cross-entropy and SGD with momentum. Plain float32 arrays, forward and backward by hand.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "chorus/types.h"

namespace examples {

/// One parameter tensor with its gradient and its momentum buffer, all of the same shape.
struct Parameter {
  std::string name;  ///< "fc1.weight", ...: used to name the tensor in collectives
  std::vector<int64_t> shape;
  std::vector<float> value;
  std::vector<float> grad;
  std::vector<float> velocity;

  chorus::TensorRef value_ref() {
    return {value.data(), chorus::DataType::kFloat32, shape, chorus::Device::cpu()};
  }
  chorus::TensorRef grad_ref() {
    return {grad.data(), chorus::DataType::kFloat32, shape, chorus::Device::cpu()};
  }
};

/// Not thread-safe: one thread drives an Mlp. Weights are stored input-major, [in, out]
/// (the transpose of PyTorch's nn.Linear), so the inner loop of every heavy product runs
/// along the outputs, contiguous in memory, and vectorizes without reassociating sums.
class Mlp {
 public:
  static constexpr int kInputs = 28 * 28;
  static constexpr int kHidden = 256;
  static constexpr int kClasses = 10;

  /// Buffers for batches of up to `max_batch` images: every `batch` argument below must be
  /// at most this. Parameters start at zero.
  explicit Mlp(int max_batch);

  /// He (Kaiming) normal initialization of the weights from `seed`; biases zero.
  void init_he(uint64_t seed);

  /// fc1.weight, fc1.bias, fc2.weight, fc2.bias. The pointers stay valid for the Mlp's life.
  std::vector<Parameter*> parameters();

  /// Runs the batch `x` ([batch, kInputs], row-major) forward and returns the mean
  /// cross-entropy against `labels`. Keeps the activations for backward().
  float forward(const float* x, const uint8_t* labels, int batch);

  /// Fills every Parameter::grad with the gradient of the mean loss of the last forward()
  /// (same x, labels and batch). Calls `on_ready` once per parameter as soon as its gradient
  /// is final, last layer first, so the caller can start communicating it while the earlier
  /// layers are still being computed. After on_ready(p), backward() no longer touches
  /// p.grad (it may be reduced in place meanwhile) but may still read p.value, which must
  /// stay unchanged until backward() returns.
  void backward(const float* x, const uint8_t* labels, int batch,
                const std::function<void(Parameter&)>& on_ready);

  /// velocity = momentum * velocity + grad; value -= lr * velocity (PyTorch's SGD).
  void sgd_step(float lr, float momentum);

  /// Number of images of the batch whose highest logit is their label.
  int count_correct(const float* x, const uint8_t* labels, int batch);

 private:
  void forward_logits(const float* x, int batch);

  Parameter fc1_weight_, fc1_bias_, fc2_weight_, fc2_bias_;
  std::vector<float> hidden_;    // [max_batch, kHidden], after the ReLU
  std::vector<float> probs_;     // [max_batch, kClasses]: logits, then softmax probabilities
  std::vector<float> d_logits_;  // [max_batch, kClasses]
  std::vector<float> d_hidden_;  // [max_batch, kHidden]
};

}  // namespace examples
