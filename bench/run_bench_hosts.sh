#!/usr/bin/env bash
# allreduce_bench across fake hosts: network namespaces on one machine, TCP over a bridge
# between them (tests/cluster/netns_lib.sh), Chorus against raw MPI in the same run, at
# 2 hosts x 2 ranks, 4 hosts x 1 and 3 hosts x 1. Needs root.
#
#   bench/run_bench_hosts.sh [allreduce_bench options...]
#
# Environment: BUILD_DIR (default <repo>/build); LAYOUTS (default "2x2 4x1 3x1", hosts x
# ranks per host); ALGORITHMS (default "auto": CHORUS_HOST_ALGORITHM of each run, e.g.
# "auto halving direct" runs every layout once per algorithm); CHORUS_HIERARCHICAL_ALLREDUCE
# reaches every rank where set (0: the flat tree at 2x2 too). Extra arguments go to every
# run, e.g. --reps 20 or --cases 1.
set -u
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-${repo}/build}"
bench="${build}/bench/allreduce_bench"
skip() { echo "run_bench_hosts.sh: cannot run here: $*" >&2; exit 1; }
fail() { echo "run_bench_hosts.sh: FAIL: $*" >&2; exit 1; }
[ -x "$bench" ] || fail "$bench not found; build first: cmake -S $repo -B $build -G Ninja && ninja -C $build"

. "$repo/tests/cluster/netns_lib.sh"
netns_up 4

for algorithm in ${ALGORITHMS:-auto}; do
  for layout in ${LAYOUTS:-2x2 4x1 3x1}; do
    nhosts=${layout%x*}
    ppr=${layout#*x}
    hosts=""
    for ((i = 1; i <= nhosts; i++)); do hosts+="${hosts:+,}h$i:$ppr"; done
    np=$((nhosts * ppr))
    settings="CHORUS_HOST_ALGORITHM=$algorithm"
    [ -n "${CHORUS_HIERARCHICAL_ALLREDUCE:-}" ] &&
      settings+=", CHORUS_HIERARCHICAL_ALLREDUCE=$CHORUS_HIERARCHICAL_ALLREDUCE"
    echo "=== $nhosts hosts x $ppr ranks: mpirun -np $np -H $hosts allreduce_bench${*:+ $*}" \
      "($settings) ==="
    echo
    pass=(-x CHORUS_HOST_ALGORITHM)
    [ -n "${CHORUS_HIERARCHICAL_ALLREDUCE:-}" ] && pass+=(-x CHORUS_HIERARCHICAL_ALLREDUCE)
    CHORUS_HOST_ALGORITHM=$algorithm timeout -k 5 1200 mpirun -np "$np" -H "$hosts" \
      --bind-to none "${pass[@]}" "$bench" "$@" || fail "the run exited $?"
  done
done
