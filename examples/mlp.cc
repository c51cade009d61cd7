#include "mlp.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>

namespace examples {
namespace {

// The layer sizes are template arguments so that every inner loop has a trip count known at
// compile time: GCC's -O2 vectorizer (the "very cheap" cost model) only vectorizes loops it
// can cover without a scalar remainder or run-time alias checks, hence also __restrict.

// Signed and pointer-sized: row * width offsets never overflow.
using Index = std::ptrdiff_t;

// Rows handled together: their slices of the output (or of the weight gradient) stay in L1
// while the other operand streams through once per block instead of once per row.
constexpr Index kBlock = 8;

// y[b, :] = bias + sum_k x[b, k] * w[k, :]. Zero inputs (the ReLUs that are off, often
// more than half) are skipped.
template <Index In, Index Out>
void linear_forward(const float* __restrict x, const float* __restrict w,
                    const float* __restrict bias, float* __restrict y, Index batch) {
  for (Index b0 = 0; b0 < batch; b0 += kBlock) {
    const Index b1 = std::min(batch, b0 + kBlock);
    for (Index b = b0; b < b1; ++b) {
      for (Index j = 0; j < Out; ++j) y[b * Out + j] = bias[j];
    }
    for (Index k = 0; k < In; ++k) {
      const float* __restrict wk = w + k * Out;
      for (Index b = b0; b < b1; ++b) {
        const float xv = x[b * In + k];
        if (xv == 0.0f) continue;
        float* __restrict yb = y + b * Out;
        for (Index j = 0; j < Out; ++j) yb[j] += xv * wk[j];
      }
    }
  }
}

// dw[k, :] = sum_b x[b, k] * dy[b, :].
template <Index In, Index Out>
void linear_weight_grad(const float* __restrict x, const float* __restrict dy, float* __restrict dw,
                        Index batch) {
  for (Index k0 = 0; k0 < In; k0 += kBlock) {
    const Index k1 = std::min(In, k0 + kBlock);
    std::fill(dw + k0 * Out, dw + k1 * Out, 0.0f);
    for (Index b = 0; b < batch; ++b) {
      const float* __restrict dyb = dy + b * Out;
      for (Index k = k0; k < k1; ++k) {
        const float xv = x[b * In + k];
        if (xv == 0.0f) continue;
        float* __restrict dwk = dw + k * Out;
        for (Index j = 0; j < Out; ++j) dwk[j] += xv * dyb[j];
      }
    }
  }
}

// db[:] = sum_b dy[b, :].
template <Index Out>
void linear_bias_grad(const float* __restrict dy, float* __restrict db, Index batch) {
  std::fill(db, db + Out, 0.0f);
  for (Index b = 0; b < batch; ++b) {
    for (Index j = 0; j < Out; ++j) db[j] += dy[b * Out + j];
  }
}

// dx[b, k] = (x[b, k] > 0) * sum_j dy[b, j] * w[k, j]: the input gradient through a ReLU
// whose output was x. Out is small here (the 10 classes), so a plain dot product is fine.
template <Index In, Index Out>
void linear_relu_input_grad(const float* __restrict x, const float* __restrict dy,
                            const float* __restrict w, float* __restrict dx, Index batch) {
  for (Index b = 0; b < batch; ++b) {
    const float* __restrict dyb = dy + b * Out;
    for (Index k = 0; k < In; ++k) {
      float s = 0.0f;
      if (x[b * In + k] > 0.0f) {
        for (Index j = 0; j < Out; ++j) s += dyb[j] * w[k * Out + j];
      }
      dx[b * In + k] = s;
    }
  }
}

Parameter make_parameter(std::string name, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  Parameter p;
  p.name = std::move(name);
  p.shape = std::move(shape);
  p.value.assign(static_cast<std::size_t>(n), 0.0f);
  p.grad.assign(static_cast<std::size_t>(n), 0.0f);
  p.velocity.assign(static_cast<std::size_t>(n), 0.0f);
  return p;
}

}  // namespace

Mlp::Mlp(int max_batch)
    : fc1_weight_(make_parameter("fc1.weight", {kInputs, kHidden})),
      fc1_bias_(make_parameter("fc1.bias", {kHidden})),
      fc2_weight_(make_parameter("fc2.weight", {kHidden, kClasses})),
      fc2_bias_(make_parameter("fc2.bias", {kClasses})),
      hidden_(static_cast<std::size_t>(max_batch) * kHidden),
      probs_(static_cast<std::size_t>(max_batch) * kClasses),
      d_logits_(static_cast<std::size_t>(max_batch) * kClasses),
      d_hidden_(static_cast<std::size_t>(max_batch) * kHidden) {}

void Mlp::init_he(uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (Parameter* w : {&fc1_weight_, &fc2_weight_}) {
    // He et al. 2015: N(0, 2 / fan_in) keeps the activation variance through ReLUs.
    std::normal_distribution<float> normal(0.0f, std::sqrt(2.0f / static_cast<float>(w->shape[0])));
    for (float& v : w->value) v = normal(rng);
  }
  std::fill(fc1_bias_.value.begin(), fc1_bias_.value.end(), 0.0f);
  std::fill(fc2_bias_.value.begin(), fc2_bias_.value.end(), 0.0f);
}

std::vector<Parameter*> Mlp::parameters() {
  return {&fc1_weight_, &fc1_bias_, &fc2_weight_, &fc2_bias_};
}

void Mlp::forward_logits(const float* x, int batch) {
  linear_forward<kInputs, kHidden>(x, fc1_weight_.value.data(), fc1_bias_.value.data(),
                                   hidden_.data(), batch);
  for (Index i = 0; i < Index{batch} * kHidden; ++i) hidden_[i] = std::max(hidden_[i], 0.0f);
  linear_forward<kHidden, kClasses>(hidden_.data(), fc2_weight_.value.data(),
                                    fc2_bias_.value.data(), probs_.data(), batch);
}

float Mlp::forward(const float* x, const uint8_t* labels, int batch) {
  forward_logits(x, batch);
  double loss = 0.0;
  for (Index b = 0; b < batch; ++b) {
    float* z = probs_.data() + b * kClasses;
    const float zmax = *std::max_element(z, z + kClasses);
    const float z_label = z[labels[b]];
    float sum = 0.0f;
    for (int j = 0; j < kClasses; ++j) {
      z[j] = std::exp(z[j] - zmax);
      sum += z[j];
    }
    for (int j = 0; j < kClasses; ++j) z[j] /= sum;
    // -log softmax(z)[label], computed from the shifted logits so it never overflows.
    loss += std::log(sum) - (z_label - zmax);
  }
  return static_cast<float>(loss / batch);
}

void Mlp::backward(const float* x, const uint8_t* labels, int batch,
                   const std::function<void(Parameter&)>& on_ready) {
  // d(mean cross-entropy)/d(logits) = (softmax - one_hot(label)) / batch.
  const float inv_batch = 1.0f / static_cast<float>(batch);
  for (Index b = 0; b < batch; ++b) {
    for (int j = 0; j < kClasses; ++j) {
      const float target = j == labels[b] ? 1.0f : 0.0f;
      d_logits_[b * kClasses + j] = (probs_[b * kClasses + j] - target) * inv_batch;
    }
  }

  linear_bias_grad<kClasses>(d_logits_.data(), fc2_bias_.grad.data(), batch);
  on_ready(fc2_bias_);
  linear_weight_grad<kHidden, kClasses>(hidden_.data(), d_logits_.data(), fc2_weight_.grad.data(),
                                        batch);
  on_ready(fc2_weight_);

  linear_relu_input_grad<kHidden, kClasses>(hidden_.data(), d_logits_.data(),
                                            fc2_weight_.value.data(), d_hidden_.data(), batch);
  linear_bias_grad<kHidden>(d_hidden_.data(), fc1_bias_.grad.data(), batch);
  on_ready(fc1_bias_);
  // The heaviest product comes last: the fc2 and fc1.bias reductions run meanwhile.
  linear_weight_grad<kInputs, kHidden>(x, d_hidden_.data(), fc1_weight_.grad.data(), batch);
  on_ready(fc1_weight_);
}

void Mlp::sgd_step(float lr, float momentum) {
  for (Parameter* p : parameters()) {
    float* __restrict w = p->value.data();
    float* __restrict v = p->velocity.data();
    const float* __restrict g = p->grad.data();
    const std::size_t n = p->value.size();
    for (std::size_t i = 0; i < n; ++i) {
      v[i] = momentum * v[i] + g[i];
      w[i] -= lr * v[i];
    }
  }
}

int Mlp::count_correct(const float* x, const uint8_t* labels, int batch) {
  forward_logits(x, batch);
  int correct = 0;
  for (Index b = 0; b < batch; ++b) {
    const float* z = probs_.data() + b * kClasses;
    correct += static_cast<int>(std::max_element(z, z + kClasses) - z) == labels[b];
  }
  return correct;
}

}  // namespace examples
