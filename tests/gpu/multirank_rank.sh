#!/usr/bin/env bash
# multirank_rank.sh PROGRAM [ARGS...]: runs PROGRAM as one rank of a job whose ranks share
# the machine's one GPU over NCCL, for tests only (CHORUS_TEST_SHARED_GPU=1, docs/gpu.md).
# NCCL refuses two ranks of a communicator on one GPU of one host; here each rank is a host
# of its own to NCCL (NCCL_HOSTID), so the ranks talk over NCCL's socket transport on the
# loopback interface. With MULTIRANK_RANKS_PER_HOST=K, rank r also runs in a UTS namespace
# whose host name is chorus-fake-host-(r / K), so that Chorus sees hosts of K ranks (the
# hierarchical allreduce); run_multirank.sh checks first that such namespaces can be made.
set -eu
rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${SLURM_PROCID:-0}}}
export NCCL_HOSTID=chorus-test-rank-$rank
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
export NCCL_IB_DISABLE=1
export CHORUS_TEST_SHARED_GPU=1
if [ -n "${MULTIRANK_RANKS_PER_HOST:-}" ]; then
  # shellcheck disable=SC2016  # expanded by the inner shell: $0 the name, $@ the program
  exec unshare --uts /bin/sh -c 'hostname "$0" && exec "$@"' \
    "chorus-fake-host-$((rank / MULTIRANK_RANKS_PER_HOST))" "$@"
fi
exec "$@"
