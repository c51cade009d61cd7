#!/usr/bin/env bash
# The demo command: installs the dependencies, builds, and trains an MLP on Fashion-MNIST
# with data parallelism over 4 ranks (gradients averaged by Chorus).
#   demo.sh [ranks] [trainer arguments...]
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ranks=${1:-4}
shift || true
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec mpirun -np "$ranks" --oversubscribe --bind-to none \
  build/examples/fashion_mnist_mlp --epochs 2 "$@"
