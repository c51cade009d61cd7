#pragma once
// A deliberate upward include: lint.layers_refuses_upward checks that check_layers.py
// refuses it. Never compiled.
#include "core/runtime.h"
