#!/usr/bin/env bash
# multirank_rank.sh PROGRAM [ARGS...]: runs PROGRAM as one rank of a multi-rank GPU job on one
# machine, for tests only. With MULTIRANK_RANKS_PER_HOST=K, rank r also runs in a UTS
# namespace whose host name is chorus-fake-host-(r / K), so that Chorus sees hosts of K ranks
# (the hierarchical allreduce); run_multirank.sh checks first that such namespaces can be made.
#
# MULTIRANK_GPUS says which GPUs a rank sees:
#   unset   the machine's; a rank uses GPU (local rank mod the count), so ranks share GPUs
#           where there are more ranks per host than GPUs;
#   one     the first only: every rank shares it;
#   own     the r-th only (CUDA_VISIBLE_DEVICES), a GPU of its own; it fails with fewer GPUs
#           than ranks. Each process then sees one device, which it calls 0.
# Where ranks may share a GPU (unset, one), NCCL runs between them for tests only
# (CHORUS_TEST_SHARED_GPU=1, docs/gpu.md): NCCL refuses two ranks of a communicator on one
# GPU of one host, so each rank is a host of its own to NCCL (NCCL_HOSTID), and the ranks
# talk over NCCL's socket transport on the loopback interface. MULTIRANK_BROKEN_HOST=h gives
# the ranks of fake host h one host id instead, which NCCL refuses where they share a GPU: a
# node whose NCCL set-up fails. With own GPUs, NCCL's hosts are the fake hosts (or the
# machine): NVLink or PCIe inside one, sockets on loopback between them.
set -eu
rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${SLURM_PROCID:-0}}}
host=$rank
[ -n "${MULTIRANK_RANKS_PER_HOST:-}" ] && host=$((rank / MULTIRANK_RANKS_PER_HOST))
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
export NCCL_IB_DISABLE=1
# The GPUs this process may see, in order: CUDA_VISIBLE_DEVICES's list, else every one.
visible() {
  if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
    tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES"
  else
    nvidia-smi -L 2>/dev/null | sed -n 's/^GPU \([0-9]*\):.*/\1/p'
  fi
}
case ${MULTIRANK_GPUS:-} in
  own)
    gpu=$(visible | sed -n "$((rank + 1))p")
    if [ -z "$gpu" ]; then
      echo "multirank_rank.sh: MULTIRANK_GPUS=own, but rank $rank has no GPU of its own" \
           "($(visible | wc -l) visible)" >&2
      exit 2
    fi
    export CUDA_VISIBLE_DEVICES=$gpu
    [ -n "${MULTIRANK_RANKS_PER_HOST:-}" ] && export NCCL_HOSTID=chorus-fake-host-$host
    ;;
  one | "")
    if [ "${MULTIRANK_GPUS:-}" = one ]; then
      CUDA_VISIBLE_DEVICES=$(visible | head -1)
      export CUDA_VISIBLE_DEVICES
    fi
    export NCCL_HOSTID=chorus-test-rank-$rank
    if [ -n "${MULTIRANK_BROKEN_HOST:-}" ] && [ "$host" = "$MULTIRANK_BROKEN_HOST" ]; then
      export NCCL_HOSTID=chorus-broken-host-$host
    fi
    export CHORUS_TEST_SHARED_GPU=1
    ;;
  *)
    echo "multirank_rank.sh: MULTIRANK_GPUS='$MULTIRANK_GPUS': use own, one, or leave it unset" >&2
    exit 2
    ;;
esac
if [ -n "${MULTIRANK_RANKS_PER_HOST:-}" ]; then
  # shellcheck disable=SC2016  # expanded by the inner shell: $0 the name, $@ the program
  exec unshare --uts /bin/sh -c 'hostname "$0" && exec "$@"' \
    "chorus-fake-host-$host" "$@"
fi
exec "$@"
