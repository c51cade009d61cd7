// An include of the core from the collectives layer: lint.layers_compile_refuses_upward
// compiles this with that layer's include path and requires the include to fail. Never part
// of a build.
#include "core/set_table.h"
