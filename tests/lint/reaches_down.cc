// The control of lint.layers_compile_refuses_upward: with the same include path, a header
// of a layer below the collectives compiles.
#include "topology/rank_map.h"

int main() { return 0; }
