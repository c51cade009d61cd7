#include "synthetic_models.h"

namespace examples {
namespace {

namespace nn = torch::nn;

class SyntheticMlp : public SyntheticNet {
 public:
  SyntheticMlp() {
    const int64_t widths[] = {kImageChannels * kImageSide * kImageSide, kHidden, kHidden, kHidden,
                              kClasses};
    for (int i = 0; i < 4; ++i) {
      layers_.push_back(
          register_module("fc" + std::to_string(i + 1), nn::Linear(widths[i], widths[i + 1])));
    }
  }

  torch::Tensor forward(torch::Tensor x) override {
    x = x.flatten(1);
    for (std::size_t i = 0; i + 1 < layers_.size(); ++i) x = torch::relu(layers_[i]->forward(x));
    return layers_.back()->forward(x);
  }

 private:
  static constexpr int64_t kHidden = 2048;
  std::vector<nn::Linear> layers_;
};

nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return nn::Conv2d(
      nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

// Two 3x3 convolutions with batch norm and a shortcut: the identity, or a strided 1x1
// convolution where the block changes the width or the resolution.
class BasicBlock : public nn::Module {
 public:
  BasicBlock(int64_t in, int64_t out, int64_t stride) {
    conv1_ = register_module("conv1", conv(in, out, 3, stride));
    bn1_ = register_module("bn1", nn::BatchNorm2d(out));
    conv2_ = register_module("conv2", conv(out, out, 3, 1));
    bn2_ = register_module("bn2", nn::BatchNorm2d(out));
    if (stride != 1 || in != out) {
      shortcut_conv_ = register_module("shortcut_conv", conv(in, out, 1, stride));
      shortcut_bn_ = register_module("shortcut_bn", nn::BatchNorm2d(out));
    }
  }

  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor y = torch::relu(bn1_->forward(conv1_->forward(x)));
    y = bn2_->forward(conv2_->forward(y));
    torch::Tensor s = shortcut_conv_ ? shortcut_bn_->forward(shortcut_conv_->forward(x)) : x;
    return torch::relu(y + s);
  }

 private:
  nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, shortcut_conv_{nullptr};
  nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr}, shortcut_bn_{nullptr};
};

class SyntheticCnn : public SyntheticNet {
 public:
  SyntheticCnn() {
    stem_ = register_module("stem", conv(kImageChannels, 32, 3, 1));
    stem_bn_ = register_module("stem_bn", nn::BatchNorm2d(32));
    const int64_t widths[] = {32, 64, 128, 256};
    int64_t in = 32;
    for (int i = 0; i < 4; ++i) {
      blocks_.push_back(
          register_module("block" + std::to_string(i + 1),
                          std::make_shared<BasicBlock>(in, widths[i], i == 0 ? 1 : 2)));
      in = widths[i];
    }
    const int64_t side = kImageSide / 8;  // three stride-2 stages
    fc1_ = register_module("fc1", nn::Linear(in * side * side, 896));
    fc2_ = register_module("fc2", nn::Linear(896, kClasses));
  }

  torch::Tensor forward(torch::Tensor x) override {
    x = torch::relu(stem_bn_->forward(stem_->forward(x)));
    for (auto& block : blocks_) x = block->forward(x);
    return fc2_->forward(torch::relu(fc1_->forward(x.flatten(1))));
  }

 private:
  nn::Conv2d stem_{nullptr};
  nn::BatchNorm2d stem_bn_{nullptr};
  std::vector<std::shared_ptr<BasicBlock>> blocks_;
  nn::Linear fc1_{nullptr}, fc2_{nullptr};
};

}  // namespace

std::shared_ptr<SyntheticNet> make_synthetic_model(const std::string& name) {
  if (name == "mlp") return std::make_shared<SyntheticMlp>();
  if (name == "cnn") return std::make_shared<SyntheticCnn>();
  return nullptr;
}

int64_t parameter_count(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters(/*recurse=*/true)) n += p.numel();
  return n;
}

}  // namespace examples
