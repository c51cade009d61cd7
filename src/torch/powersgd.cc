#include "torch/powersgd.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

namespace chorus::torch {
namespace {

using ::torch::Tensor;

// Gram-Schmidt on the columns of `m` in place: each column normalized (by its norm plus
// epsilon), then removed from the columns after it.
void orthogonalize(Tensor& m, double epsilon) {
  const int64_t cols = m.size(1);
  for (int64_t i = 0; i < cols; ++i) {
    Tensor col = m.narrow(1, i, 1);
    col.div_(col.norm() + epsilon);
    if (i + 1 < cols) {
      Tensor rest = m.narrow(1, i + 1, cols - i - 1);
      rest.sub_((col * rest).sum(0, /*keepdim=*/true) * col);
    }
  }
}

uint64_t mix(uint64_t x) {  // splitmix64's finalizer: well-spread seeds from small inputs
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

PowerSgd::PowerSgd(const PowerSgdOptions& options, const std::vector<Tensor>& params,
                   const std::vector<std::string>& names, ProcessSet process_set)
    : options_(options) {
  if (options.matrix_approximation_rank < 1) {
    throw Error(invalid_argument("PowerSGD: matrix_approximation_rank must be at least 1, got " +
                                 std::to_string(options.matrix_approximation_rank)));
  }
  if (options.start_iter < 0 || options.min_compression_rate <= 0 ||
      options.orthogonalization_epsilon < 0) {
    throw Error(
        invalid_argument("PowerSGD: start_iter must be >= 0, min_compression_rate > 0 and "
                         "orthogonalization_epsilon >= 0"));
  }
  sum_.op = ReduceOp::kSum;
  sum_.process_set = process_set;
  const int set_size = process_set_size(process_set);
  size_ = set_size > 0 ? set_size : 1;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    Matrix m;
    m.name = names[i];
    const bool wide = p.scalar_type() == ::torch::kFloat32 || p.scalar_type() == ::torch::kFloat64;
    if (wide && p.dim() >= 2) {
      const int64_t n = p.size(0), k = p.numel() / std::max<int64_t>(1, p.size(0));
      const int64_t r = std::min({n, k, static_cast<int64_t>(options.matrix_approximation_rank)});
      if (r > 0 && static_cast<double>((n + k) * r) * options.min_compression_rate <
                       static_cast<double>(n * k)) {
        m.rows = n;
        m.cols = k;
        m.rank = r;
        const auto like = p.options().requires_grad(false);
        m.error = ::torch::zeros({n, k}, like);
        m.q = ::torch::empty({k, r}, like);
        m.p = ::torch::empty({n, r}, like);
      }
    }
    matrices_.push_back(std::move(m));
  }
}

void PowerSgd::randomize(std::size_t i) {
  Matrix& m = matrices_[i];
  at::Generator g = at::detail::createCPUGenerator(
      mix(options_.seed ^ mix(static_cast<uint64_t>(iteration_) ^ mix(i))));
  m.q.copy_(::torch::randn({m.cols, m.rank}, g, ::torch::TensorOptions().dtype(m.q.dtype())));
}

bool PowerSgd::begin(std::size_t i, Tensor& grad) {
  Matrix& m = matrices_[i];
  if (iteration_ < options_.start_iter || m.rank == 0 || grad.is_sparse()) return false;
  ::torch::NoGradGuard no_grad;
  Tensor matrix = grad.reshape({m.rows, m.cols});
  if (options_.error_feedback) {
    matrix.add_(m.error);
    m.error.copy_(matrix);  // M, until finish() subtracts its approximation
  }
  if (!m.warm) randomize(i);
  orthogonalize(m.q, options_.orthogonalization_epsilon);
  ::torch::matmul_out(m.p, matrix, m.q);
  m.grad = grad;
  m.matrix = matrix;
  m.begun = true;
  m.handle = allreduce_async_(m.p, m.name + ".powersgd.p", sum_);
  return true;
}

std::optional<Error> PowerSgd::finish() {
  ::torch::NoGradGuard no_grad;
  std::optional<Error> first;
  // The Ps, then every Q started before any is waited for: they fuse.
  std::vector<std::size_t> started;
  for (std::size_t i = 0; i < matrices_.size(); ++i) {
    Matrix& m = matrices_[i];
    if (!m.begun) continue;
    try {
      m.handle.wait();
    } catch (const Error& e) {
      if (!first) first = e;
      m.begun = false;
      continue;
    }
    orthogonalize(m.p, options_.orthogonalization_epsilon);
    ::torch::matmul_out(m.q, m.matrix.t(), m.p);
    try {
      m.handle = allreduce_async_(m.q, m.name + ".powersgd.q", sum_);
      started.push_back(i);
    } catch (const Error& e) {
      if (!first) first = e;
      m.begun = false;
    }
  }
  for (std::size_t i : started) {
    Matrix& m = matrices_[i];
    try {
      m.handle.wait();
      m.q.div_(size_);
      Tensor approx = ::torch::matmul(m.p, m.q.t());
      if (options_.error_feedback) m.error.sub_(approx);
      m.grad.copy_(approx.view_as(m.grad));
      m.warm = options_.warm_start;
    } catch (const Error& e) {
      if (!first) first = e;
    }
  }
  for (Matrix& m : matrices_) {
    m.begun = false;
    m.grad = Tensor();
    m.matrix = Tensor();
  }
  ++iteration_;
  return first;
}

std::vector<std::pair<std::string, Tensor>> PowerSgd::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const Matrix& m : matrices_) {
    if (m.rank > 0 && m.warm) out.emplace_back(m.name + ".q", m.q);
  }
  return out;
}

void PowerSgd::load(int64_t iteration, const std::vector<std::pair<std::string, Tensor>>& qs) {
  ::torch::NoGradGuard no_grad;
  iteration_ = iteration;
  for (Matrix& m : matrices_) {
    if (m.rank == 0) continue;
    m.error.zero_();
    m.warm = false;
    for (const auto& [name, q] : qs) {
      if (name != m.name + ".q") continue;
      if (q.sizes() != m.q.sizes()) {
        throw Error(invalid_argument("PowerSGD state: '" + name + "' has shape " +
                                     std::to_string(q.size(0)) + "x" + std::to_string(q.size(1)) +
                                     ", the parameter needs " + std::to_string(m.cols) + "x" +
                                     std::to_string(m.rank)));
      }
      m.q.copy_(q);
      m.warm = true;
    }
  }
}

}  // namespace chorus::torch
