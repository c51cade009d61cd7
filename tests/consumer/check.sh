#!/usr/bin/env bash
# Installs the build into a fresh prefix, builds the consumer project against it with
# find_package(Chorus), and runs it on 2 ranks.
#   check.sh BUILD_DIR SOURCE_DIR RUN_MPI [torch]   (torch: also the LibTorch consumer)
set -eu
build=$1 src=$2 run_mpi=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/tests/consumer" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
"$run_mpi" 2 60 "$work/build/consumer"
if [ "${4:-}" = torch ]; then
  "$run_mpi" 2 120 "$work/build/torch_consumer"
fi
