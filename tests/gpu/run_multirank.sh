#!/usr/bin/env bash
# run_multirank.sh PROBE RUN_MPI NP SECONDS [MPIRUN_ARGS... --] PROGRAM [ARGS...]: run_gpu.sh's
# job, with every rank started through multirank_rank.sh (NCCL between ranks that share one
# GPU). Exits 77, a skipped test, without a CUDA device, and with MULTIRANK_RANKS_PER_HOST
# set where this machine cannot make UTS namespaces (unshare --uts needs root or user
# namespaces).
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ -n "${MULTIRANK_RANKS_PER_HOST:-}" ] && ! err=$(unshare --uts /bin/true 2>&1); then
  echo "SKIPPED: fake hosts need UTS namespaces: unshare --uts: $err"
  exit 77
fi
probe=$1 run_mpi=$2 np=$3 secs=$4
shift 4
# mpirun's options come first, ended by --; a program's own -- stays its own.
mpirun_args=()
if [ "${1#-}" != "$1" ]; then
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do mpirun_args+=("$1"); shift; done
  [ $# -gt 0 ] || { echo "run_multirank.sh: mpirun options must end with --" >&2; exit 2; }
  shift
fi
exec "$here/run_gpu.sh" "$probe" "$run_mpi" "$np" "$secs" ${mpirun_args[@]+"${mpirun_args[@]}"} \
  "$here/multirank_rank.sh" "$@"
