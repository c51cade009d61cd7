#!/usr/bin/env bash
# Builds the wire-codec fuzzer with clang (libFuzzer, ASan, UBSan) and runs it briefly.
#   run.sh SOURCE_DIR WORK_DIR SECONDS
set -eu
src=$1 work=$2 seconds=$3
cmake -S "$src/tests/fuzz" -B "$work" -DCMAKE_CXX_COMPILER=clang++ \
  -DCHORUS_SOURCE_DIR="$src" >/dev/null
cmake --build "$work" >/dev/null
mkdir -p "$work/corpus" "$work/crashes"
"$work/codec_fuzz" -max_total_time="$seconds" -artifact_prefix="$work/crashes/" "$work/corpus"
