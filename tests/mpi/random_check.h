#pragma once
// Checking one collective of a randomized round (random_rounds.cc): what a rank holds for
// it, the comparison of every output with the reference (reference.h) computed from every
// rank's inputs (random_plan.h), and the digest of its outputs.
#include <cstdint>
#include <cstdio>
#include <vector>

#include "chorus/chorus.h"
#include "random_plan.h"

namespace chorus::random_rounds {

using Bytes = std::vector<unsigned char>;

// What this rank holds for one collective until it is checked. Inputs, outputs and the
// caller-allocated output must stay valid until the handle completes (TensorRef's contract),
// so a Work never moves once submitted.
struct Work {
  const Collective* c = nullptr;
  std::vector<int> members;  // global ranks, in set order
  int me = 0;                // this rank's rank in the set
  ProcessSet set;
  std::vector<Bytes> in, out;  // per tensor; out is unused when in place
  std::vector<std::vector<int64_t>> shape;
  Bytes allocated;
  std::vector<int64_t> allocated_shape;
  Handle handle;
};

/// Fills every output before the collective, so that an element it did not write shows.
constexpr unsigned char kPoison = 0xa5;

int64_t elements(const std::vector<int64_t>& shape);
/// Room for `count` elements of t, never empty (a tensor of no elements still has data).
Bytes storage(DataType t, int64_t count, unsigned char fill);
TensorRef ref(Bytes& b, DataType t, const std::vector<int64_t>& shape);
/// Tensor t's shape with `rows` in its first dimension ({} for a scalar).
std::vector<int64_t> shape_of(const Tensor& t, int64_t rows);

/// Checks the outputs of w, whose handle has completed, against the reference; prints
/// every mismatch with what reproduces it (seed, round, tensor, op, dtype, index, got and
/// expected) and returns the number of failed checks.
int check(const Plan& plan, uint64_t seed, int round, const Work& w);

/// Writes one line per output tensor of w (a successful collective):
/// "<round> <name> <hash> <same>", same=1 where every member must hold the same bits.
void write_digest(std::FILE* f, int round, const Work& w);

}  // namespace chorus::random_rounds
