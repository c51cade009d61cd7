#include "kernels/reduce_tree.h"

#include <algorithm>
#include <vector>

namespace chorus::kernels {
namespace {

// Elements per piece: two partial results per tree level stay in L1 together.
constexpr int64_t kPiece = 512;

// Evaluates the tree over one piece of every source. Partial results live in `slots`, two
// per level (level k holds the groups of leaves that are equal modulo 2^k): a group's left
// half is kept in slot 0 of the level below while its right half is evaluated in slot 1.
class PieceTree {
 public:
  PieceTree(const void* const* srcs, const TreeShape& shape, DataType dtype, ReduceOp op,
            char* slots, int64_t slot_bytes)
      : srcs_(srcs),
        shape_(shape),
        dtype_(dtype),
        op_(op),
        esz_(dtype_size(dtype)),
        slots_(slots),
        slot_bytes_(slot_bytes),
        leaf_level_(shape.levels) {}

  void run(void* dst, int64_t first, int64_t count, Scale scale) {
    first_ = first;
    count_ = count;
    // Three or more ranks: the root joins two groups of level 1.
    const void* halves[2] = {group(0, 1, 0), group(1, 1, 1)};
    reduce_ordered(dst, halves, 2, count_, dtype_, op_, scale);
  }

 private:
  const void* source(int rank) const {
    return static_cast<const char*>(srcs_[rank]) + first_ * static_cast<int64_t>(esz_);
  }
  char* slot(int level, int which) const { return slots_ + (2 * level + which) * slot_bytes_; }

  // The leaves equal to c modulo 2^level, combined; kept in slot `which` of `level` unless
  // it is a single source, which is returned as it is.
  const void* group(int c, int level, int which) {
    if (level == leaf_level_) {
      if (c >= shape_.extra) return source(c + shape_.extra);
      const void* pair[2] = {source(2 * c), source(2 * c + 1)};
      reduce_ordered(slot(level, which), pair, 2, count_, dtype_, op_, Scale{});
      return slot(level, which);
    }
    const int stride = 1 << level;
    const void* halves[2] = {group(c, level + 1, 0), group(c + stride, level + 1, 1)};
    reduce_ordered(slot(level, which), halves, 2, count_, dtype_, op_, Scale{});
    return slot(level, which);
  }

  const void* const* srcs_;
  const TreeShape& shape_;
  DataType dtype_;
  ReduceOp op_;
  std::size_t esz_;
  char* slots_;
  int64_t slot_bytes_;
  int leaf_level_;
  int64_t first_ = 0;
  int64_t count_ = 0;
};

}  // namespace

TreeShape::TreeShape(int n) : size(n), p2(1), levels(0), extra(0) {
  while (p2 * 2 <= n) {
    p2 *= 2;
    ++levels;
  }
  extra = n - p2;
}

void reduce_tree(void* dst, const void* const* srcs, int n, int64_t count, DataType dtype,
                 ReduceOp op, Scale scale) {
  if (n <= 2) {
    reduce_ordered(dst, srcs, n, count, dtype, op, scale);
    return;
  }
  const TreeShape shape(n);
  const int64_t esz = static_cast<int64_t>(dtype_size(dtype));
  const int64_t slot_bytes = kPiece * esz;
  // Grows to the deepest tree this thread has evaluated and stays.
  thread_local std::vector<char> slots;
  const std::size_t need = static_cast<std::size_t>(2 * (shape.levels + 1) * slot_bytes);
  if (slots.size() < need) slots.resize(need);
  PieceTree tree(srcs, shape, dtype, op, slots.data(), slot_bytes);
  char* out = static_cast<char*>(dst);
  // A piece of dst is written only after every source's piece was read: dst may alias one.
  for (int64_t first = 0; first < count; first += kPiece) {
    const int64_t len = std::min(kPiece, count - first);
    tree.run(out + first * esz, first, len, scale);
  }
}

}  // namespace chorus::kernels
