#!/usr/bin/env bash
# Runs allreduce_bench under mpirun with 2 and then 4 ranks and prints both reports.
#
#   bench/run_bench.sh [allreduce_bench options...]
#
# Environment: BUILD_DIR (default <repo>/build), NPS (default "2 4"), IDLE_CPU (seconds of
# the idle-CPU measurement, default 10; 0 skips it). Extra arguments go to every run, e.g.
# `bench/run_bench.sh --reps 40` or `bench/run_bench.sh --threshold-sweep`.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-${repo}/build}"
bench="${build}/bench/allreduce_bench"
if [[ ! -x "${bench}" ]]; then
  echo "run_bench.sh: ${bench} not found; build first:" >&2
  echo "  cmake -S ${repo} -B ${build} -G Ninja && ninja -C ${build}" >&2
  exit 1
fi

# Open MPI refuses to run as root unless told it is intended (containers, CI).
if [[ "$(id -u)" == 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

for np in ${NPS:-2 4}; do
  echo "=== mpirun -np ${np} allreduce_bench --idle-cpu ${IDLE_CPU:-10}${*:+ $*} ==="
  echo
  mpirun --oversubscribe --bind-to none -np "${np}" \
    "${bench}" --idle-cpu "${IDLE_CPU:-10}" "$@"
done
