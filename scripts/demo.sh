#!/usr/bin/env bash
# The demo command: installs the dependencies, builds, and trains a LibTorch CNN on
# Fashion-MNIST with data parallelism over 4 ranks (DistributedOptimizer averages the
# gradients during backward; rank 0 writes a checkpoint after each epoch).
#   demo.sh [ranks] [mnist arguments...]      e.g. demo.sh 2 --epochs 3 --resume
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ranks=${1:-4}
shift || true
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec mpirun -np "$ranks" --oversubscribe --bind-to none \
  build/examples/mnist --epochs 2 --checkpoint build/mnist-checkpoint.pt "$@"
