#include "core/ops/op.h"

#include <cstdio>

namespace chorus {
namespace {

// Exact, so that factors that differ in the last bit read differently in a mismatch.
std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string trailing_dims(const Request& q) {
  std::vector<int64_t> rest(q.shape.begin() + (q.shape.empty() ? 0 : 1), q.shape.end());
  return std::to_string(q.shape.size()) + "-d, trailing dims " + shape_string(rest);
}

}  // namespace

bool Agreement::same(const char* what, const std::function<std::string(const Request&)>& value) {
  std::vector<std::optional<std::string>> values(by_rank_.size());
  for (std::size_t r = 0; r < by_rank_.size(); ++r) {
    if (by_rank_[r]) values[r] = value(*by_rank_[r]);
  }
  const std::string d = disagreement(values);
  if (d.empty()) return true;
  message_ = std::string("ranks disagree on ") + what + ": " + d;
  return false;
}

bool Agreement::same_shape() {
  return same("shape", [](const Request& q) { return shape_string(q.shape); });
}

bool Agreement::same_reduction() {
  return same("reduce op", [](const Request& q) { return reduce_op_name(q.reduce_op); }) &&
         same("prescale factor", [](const Request& q) { return number(q.prescale); }) &&
         same("postscale factor", [](const Request& q) { return number(q.postscale); });
}

bool Agreement::same_group() {
  return same("group", [](const Request& q) {
    return q.group_size == 0 ? std::string("none")
                             : q.group + " of " + std::to_string(q.group_size);
  });
}

bool Agreement::same_rows() {
  if (first_.shape.empty()) {
    message_ = "needs a tensor with at least one dimension";
    return false;
  }
  return same("shape beyond the first dimension", trailing_dims);
}

bool Agreement::same_root() {
  if (!same("root rank", [](const Request& q) { return std::to_string(q.root); })) return false;
  if (first_.root >= 0 && first_.root < size()) return true;
  message_ = "root rank " + std::to_string(first_.root) + " is outside the set of " +
             std::to_string(size()) + " ranks";
  return false;
}

char* OpRun::have(StatusOr<char*> p) {
  if (p.ok()) return *p;
  if (s.ok()) s = p.status();
  return nullptr;
}

void* OpRun::output(const std::vector<int64_t>& shape, std::size_t bytes) {
  StatusOr<TensorRef> out = allocate_output(*entry, shape);
  if (out.ok()) {
    keep(memory.wait_allocated(*out));
    return out->data;
  }
  keep(out.status());
  return have(memory.scratch(bytes));
}

StatusOr<TensorRef> allocate_output(Entry& e, const std::vector<int64_t>& shape) {
  const auto index = static_cast<std::size_t>(e.request.group_index);
  if (!e.allocate) {
    TensorRef out = e.handle->allocate_output(index, e.request.dtype, shape);
    e.output = TensorPlace::of(out);
    return out;
  }
  StatusOr<TensorRef> got = e.allocate(shape);
  if (!got.ok()) return got.status();
  // On another device the collective would write memory its stream cannot order itself
  // after, on a GPU that is not the set's.
  if (got->dtype != e.request.dtype || got->shape != shape || got->device != e.request.device ||
      (got->data == nullptr && got->num_elements() > 0)) {
    return invalid_argument(std::string(op_type_name(e.request.op)) + " '" + e.request.name +
                            "': the output allocator returned " + describe(*got) + ", expected " +
                            dtype_name(e.request.dtype) + shape_string(shape) + " on " +
                            device_name(e.request.device));
  }
  e.output = TensorPlace::of(*got);
  e.handle->set_output(index, *got);
  return got;
}

}  // namespace chorus
