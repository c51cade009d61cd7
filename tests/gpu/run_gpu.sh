#!/usr/bin/env bash
# run_gpu.sh PROBE NP SECONDS PROGRAM [ARGS...]: runs PROGRAM like tests/mpi/run_mpi.sh
# when PROBE finds a CUDA device; otherwise prints why and exits 77, which CTest reports
# as a skipped test (SKIP_RETURN_CODE), never as a pass.
set -u
probe=$1
shift
if ! "$probe"; then
  exit 77
fi
np=$1
if [ "$np" = 0 ]; then  # no mpirun: a plain program
  shift 2
  exec timeout -k 10 "$1" "${@:2}"
fi
exec "$(dirname "$0")/../mpi/run_mpi.sh" "$@"
