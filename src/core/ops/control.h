#pragma once
// The ops that carry no tensor: barrier, join, and the process-set changes (which the set
// table applies, core/set_table.cc; the executor runs nothing for them).

#include "core/ops/op.h"

namespace chorus {

const OpDescriptor& barrier_op();
/// join: a rank that joined contributes zeros to the allreduces of the others until every
/// rank joined; the handle's value is the rank that joined last.
const OpDescriptor& join_op();
const OpDescriptor& add_process_set_op();
/// The same set, requested by its members alone; the other ranks make it when it is agreed.
const OpDescriptor& add_process_set_of_members_op();
const OpDescriptor& remove_process_set_op();

}  // namespace chorus
