#!/usr/bin/env bash
# The test command: installs the dependencies, builds, and runs the whole suite (unit,
# in-process, mpirun on 1-4 ranks, scenarios, package, fuzz, example) under CTest.
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
# Each mpirun test declares how many ranks it runs (PROCESSORS), so -j uses the cores
# without oversubscribing them further.
ctest --test-dir build --output-on-failure --timeout 600 -j "$(nproc)" "$@"
