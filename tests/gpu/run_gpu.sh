#!/usr/bin/env bash
# run_gpu.sh PROBE RUN_MPI NP SECONDS PROGRAM [ARGS...]: runs PROGRAM on NP ranks through
# RUN_MPI (the configured tests/mpi/run_mpi.sh; NP 0: no mpirun, a plain program under the
# same hard time limit) when PROBE finds a CUDA device. Without one, PROBE prints why and
# this exits 77, which CTest reports as a skipped test (SKIP_RETURN_CODE), never as a pass.
# Any other probe failure is passed on as a failure.
set -u
probe=$1
run_mpi=$2
np=$3
secs=$4
shift 4
"$probe"
rc=$?
if [ "$rc" != 0 ]; then
  exit "$rc"
fi
if [ "$np" = 0 ]; then
  exec timeout -k 10 "$secs" "$@"
fi
exec "$run_mpi" "$np" "$secs" "$@"
