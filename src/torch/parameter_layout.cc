#include "torch/parameter_layout.h"

#include <torch/torch.h>

#include <sstream>
#include <vector>

#include "chorus/torch/tensor_ops.h"

namespace chorus::torch {

using ::torch::Tensor;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Where rank `r`'s layout first differs from rank 0's, in words; empty when they agree.
std::string first_difference(const std::string& mine, const std::string& theirs, int r) {
  const auto a = lines_of(theirs);
  const auto b = lines_of(mine);
  for (std::size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string x = i < a.size() ? a[i] : "nothing";
    const std::string y = i < b.size() ? b[i] : "nothing";
    if (x != y) {
      return "parameter " + std::to_string(i) + " is '" + x + "' on rank 0 but '" + y +
             "' on rank " + std::to_string(r);
    }
  }
  return {};
}

}  // namespace

std::string describe_layout(const NamedParameters& params) {
  std::string out;
  for (const auto& [name, tensor] : params) {
    out += name + " " + std::string(c10::toString(tensor.scalar_type())) + " [";
    for (int64_t d = 0; d < tensor.dim(); ++d) {
      if (d) out += ",";
      out += std::to_string(tensor.size(d));
    }
    out += tensor.requires_grad() ? "]\n" : "] frozen\n";
  }
  return out;
}

void check_same_layout(const NamedParameters& params, const std::string& name_prefix,
                       ProcessSet process_set) {
  const std::string layout = describe_layout(params);
  auto bytes = ::torch::from_blob(const_cast<char*>(layout.data()),
                                  {static_cast<int64_t>(layout.size())}, ::torch::kUInt8);
  auto length = ::torch::tensor({static_cast<int64_t>(layout.size())}, ::torch::kInt64);
  Tensor lengths = allgather(length, name_prefix + "layout.length", process_set);
  Tensor all = allgather(bytes, name_prefix + "layout", process_set);

  std::vector<std::string> layouts;
  int64_t offset = 0;
  for (int64_t r = 0; r < lengths.size(0); ++r) {
    const int64_t n = lengths[r].item<int64_t>();
    layouts.emplace_back(reinterpret_cast<const char*>(all.data_ptr<uint8_t>()) + offset, n);
    offset += n;
  }
  for (std::size_t r = 1; r < layouts.size(); ++r) {
    const std::string why = first_difference(layouts[r], layouts[0], static_cast<int>(r));
    if (!why.empty()) {
      throw Error(Status(StatusCode::kMismatch,
                         "DistributedOptimizer: ranks wrap different parameters: " + why));
    }
  }
}

}  // namespace chorus::torch
