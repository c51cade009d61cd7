#!/usr/bin/env bash
# Configure with a Python that cannot import torch, asked to build chorus.torch for it (what
# `pip install ./bindings/python` does from a venv without torch): configure must stop and
# say which Python and why, not fail inside CMake's list handling.
#   python_without_torch.sh SOURCE_DIR PYTHON
set -u
src=$1 python=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m venv "$work/venv" || exit 1  # its own site-packages: no torch
if out=$(cmake -S "$src" -B "$work/build" -DCHORUS_BUILD_TESTS=OFF -DCHORUS_BUILD_BENCH=OFF \
    -DCHORUS_BUILD_EXAMPLES=OFF -DCHORUS_WITH_CUDA=OFF -DCHORUS_PYTHON_EXECUTABLE="$work/venv/bin/python" \
    -DCHORUS_WITH_PYTHON=ON 2>&1); then
  echo "$out"; echo "FAIL: configure succeeded"; exit 1
fi
flat=$(tr -s ' \n' '  ' <<<"$out")  # CMake folds long messages
want="Chorus: CHORUS_WITH_PYTHON=ON but $work/venv/bin/python cannot import torch (ModuleNotFoundError: No module named 'torch')"
if ! grep -qF "$want" <<<"$flat"; then
  echo "$out"; echo "FAIL: configure did not say: $want"; exit 1
fi
echo "configure said: $want"
