#!/usr/bin/env bash
# Configures once (Ninja, ccache when present) and builds everything in ./build.
#   build.sh [extra cmake arguments...]
set -eu
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
fi
cmake --build build --parallel "$(nproc)"
