#pragma once
// The plan of a randomized run: which process sets each round creates, which collectives it
// runs on them, their parameters, every rank's shapes and every rank's input values. All of
// it is a pure function of (seed, round, collective, tensor, rank), so every rank knows every
// other rank's inputs and computes each expected result on its own, and a seed reproduces a
// failure exactly. Only the order in which each rank submits and waits is chosen per rank
// (by the caller).
//
// Values ("exact" mode) are small integers, or dyadic fractions after a power-of-two
// prescale, bounded per dtype and reduce op so that every reduction over at most 4 ranks is
// exact in its dtype in any order: no integer overflow, no rounding of float16 (integers up
// to 2048) or bfloat16 (8 significant bits). In "arbitrary" mode float tensors get
// arbitrary values, whose sums depend on the order of the reduction; integer tensors keep
// the exact values.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "chorus/types.h"

namespace chorus::random_rounds {

enum class Kind : uint8_t {
  kAllreduce,
  kGrouped,
  kAllgather,
  kBroadcast,
  kAlltoall,
  kReducescatter,
};
const char* kind_name(Kind k);
/// A reduction of values (allreduce, grouped allreduce, reducescatter).
bool reduces(Kind k);

/// A counter-free generator: its state starts from a hash of `key`.
class Rng {
 public:
  Rng(std::initializer_list<uint64_t> key);
  uint64_t next();
  int64_t between(int64_t lo, int64_t hi);  ///< uniform in [lo, hi]
  bool chance(double p);
  double unit();  ///< uniform in [0, 1)

 private:
  uint64_t state_ = 0;
};

/// One tensor of a collective; a grouped allreduce has several.
struct Tensor {
  std::string name;
  DataType dtype = DataType::kFloat32;
  bool scalar = false;         ///< shape {} (allreduce and broadcast only)
  std::vector<int64_t> inner;  ///< dimensions after the first, the same on every rank
  int64_t rows = 0;            ///< first dimension (allgather, alltoall: a bound per rank)
};

struct Collective {
  Kind kind = Kind::kAllreduce;
  int set = -1;  ///< index into Round::sets; -1: the global set
  std::vector<Tensor> tensors;
  ReduceOp op = ReduceOp::kSum;
  double prescale = 1.0;
  double postscale = 1.0;
  int root = 0;              ///< broadcast: in the set's numbering
  bool in_place = true;      ///< allreduce and grouped allreduce
  bool allocate = false;     ///< allgather, alltoall, reducescatter: the caller allocates
  bool even_splits = false;  ///< alltoall: no splits given, equal blocks
  uint64_t shape_key = 0;    ///< per-rank shapes derive from it
  uint64_t value_key = 0;    ///< inputs derive from it
};

struct Round {
  std::vector<std::vector<int>> sets;  ///< global ranks of each set to create, sorted
  std::vector<Collective> collectives;
};

struct PlanConfig {
  uint64_t seed = 1;
  int world = 1;      ///< ranks in the job, 1 to 4
  bool exact = true;  ///< false: arbitrary float inputs
  int max_tensors = 200;
};

class Plan {
 public:
  explicit Plan(PlanConfig config) : config_(config) {}
  const PlanConfig& config() const { return config_; }

  Round round(int index) const;
  /// Global ranks of c's set, in set order.
  std::vector<int> members(const Round& round, const Collective& c) const;
  /// First dimension of tensor t's input on global rank g, in a set of `set_size` ranks.
  int64_t rows(const Collective& c, int t, int g, int set_size) const;
  /// Elements per row of tensor t (the product of its inner dimensions).
  static int64_t row_size(const Tensor& t);
  /// alltoall: rows global rank g sends to each of the set's `set_size` ranks.
  std::vector<int64_t> splits(const Collective& c, int g, int set_size) const;
  /// Element i of tensor t's input on global rank g, as stored in its dtype.
  double input(const Collective& c, int t, int g, int64_t i) const;

 private:
  Collective make(Rng& rng, int set, int set_size, const std::string& name) const;

  PlanConfig config_;
};

}  // namespace chorus::random_rounds
