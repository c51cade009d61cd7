#pragma once
// The check that every rank of a process set wraps the same parameters.

#include <string>

#include "chorus/options.h"
#include "chorus/torch/gradient_reducer.h"

namespace chorus::torch {

/// Collective over `process_set`: compares every rank's parameter names, dtypes and shapes
/// with rank 0's. On a difference every rank throws chorus::Error naming the first
/// differing parameter and the ranks involved.
void check_same_layout(const NamedParameters& params, const std::string& name_prefix,
                       ProcessSet process_set);

/// One line per parameter: "name dtype [d0,d1,...]".
std::string describe_layout(const NamedParameters& params);

}  // namespace chorus::torch
