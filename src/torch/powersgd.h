#pragma once
// PowerSGD inside GradientReducer (PowerSgdOptions in gradient_reducer.h): per matrix-shaped
// gradient, the two small allreduces of the low-rank factors in place of the gradient's. P's
// allreduce starts from the gradient's hook, during backward, as a gradient's would (the core
// fuses the Ps that are ready together); the Qs, which need the reduced P, are started
// together in synchronize() and fuse into one batch.
//
// Thread safety: called under GradientReducer's lock (from autograd hooks and synchronize()).
// Every rank makes the same calls in the same order of names, so a failure the set agreed on
// skips the same steps everywhere.

#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chorus/chorus.h"
#include "chorus/torch/gradient_reducer.h"
#include "chorus/torch/tensor_ops.h"

namespace chorus::torch {

class PowerSgd {
 public:
  /// `params`: the reducer's parameters in its order, named as their reductions are.
  /// Throws chorus::Error for options it cannot honour.
  PowerSgd(const PowerSgdOptions& options, const std::vector<::torch::Tensor>& params,
           const std::vector<std::string>& names, ProcessSet process_set);

  /// Whether parameter `i`'s gradient `grad` is compressed this step: then its P's allreduce
  /// has started and the reducer leaves it alone until finish().
  bool begin(std::size_t i, ::torch::Tensor& grad);
  /// Completes the step: the Qs' allreduce, the approximations written into the gradients,
  /// the errors kept. Every started reduction is waited for; the first failure is returned.
  std::optional<Error> finish();

  /// Steps completed (the iteration that start_iter counts).
  int64_t iteration() const { return iteration_; }
  /// What a checkpoint keeps: the step count and each compressed matrix's Q (the same on
  /// every rank), by parameter name ("<name>.q"). The errors are each rank's own and restart
  /// from zero after load().
  std::vector<std::pair<std::string, ::torch::Tensor>> state() const;
  void load(int64_t iteration, const std::vector<std::pair<std::string, ::torch::Tensor>>& qs);

 private:
  struct Matrix {
    std::string name;
    int64_t rows = 0, cols = 0, rank = 0;  // rank 0: not compressed
    ::torch::Tensor error;                 // this rank's, as a rows x cols matrix
    ::torch::Tensor q, p;                  // cols x rank, rows x rank
    bool warm = false;                     // q holds last step's
    ::torch::Tensor grad;                  // this step's gradient, while in flight
    ::torch::Tensor matrix;                // M: the gradient (plus the error) as rows x cols
    TensorHandle handle;                   // P's allreduce, then Q's
    bool begun = false;
  };

  void randomize(std::size_t i);

  PowerSgdOptions options_;
  AllreduceOptions sum_;
  int size_ = 1;
  std::vector<Matrix> matrices_;
  int64_t iteration_ = 0;
};

}  // namespace chorus::torch
