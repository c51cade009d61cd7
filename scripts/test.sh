#!/usr/bin/env bash
# The test command: installs the dependencies, builds, and runs the whole suite (unit,
# in-process, mpirun on 1-4 ranks, scenarios, package, fuzz, example) under CTest, then the
# unit and in-process tests under the sanitizer presets named in SANITIZERS (default
# "asan tsan"; empty skips them; scripts/test-sanitizers.sh).
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
# Each mpirun test declares how many ranks it runs (PROCESSORS), so -j uses the cores
# without oversubscribing them further.
ctest --test-dir build --output-on-failure --timeout 600 -j "$(nproc)" "$@"
sanitizers=${SANITIZERS-asan tsan}
if [ -n "$sanitizers" ]; then
  # shellcheck disable=SC2086  # one word per preset
  scripts/test-sanitizers.sh $sanitizers
fi
