#!/usr/bin/env bash
# The host allreduce on the Gloo world against the MPI world, same program, same machine,
# runs alternated: world_bench under mpirun, then under chorusrun --gloo, ROUNDS times each, for
# every rank count, with shared memory (the default: a host's ranks reduce through it, and the
# worlds differ in their control rounds) and without (CHORUS_SHARED_MEMORY=0: the reductions
# move through each world's messages). Prints every run's lines, then a table of the medians
# of the runs and the ratio Gloo / MPI (below 1: Gloo faster).
#
#   bench/run_world_bench.sh [world_bench options...]
#
# Environment: BUILD_DIR (default <repo>/build), NPS (default "2 4"), ROUNDS (default 3).
# LAYOUTS (hosts x ranks per host, e.g. "2x1 2x2 3x1"): across fake hosts instead (network
# namespaces over a bridge, tests/cluster/netns_lib.sh; needs root), mpirun through its rsh
# agent and chorusrun --gloo through the same agent (CHORUS_RSH).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-${repo}/build}"
bench="${build}/bench/world_bench"
chorusrun="${build}/launch/chorusrun"
[[ -x "${bench}" && -x "${chorusrun}" ]] || { echo "build first (ninja -C ${build})" >&2; exit 1; }
if [[ "$(id -u)" == 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
out=$(mktemp)
trap 'rm -f "${out}"' EXIT
# run_pair NP HOSTS...: both worlds once each at every setting, HOSTS ("-H h1:2,h2:2") or none.
run_pair() {
  local np=$1 shm round
  shift
  for shm in 1 0; do
    for ((round = 0; round < ${ROUNDS:-3}; round++)); do
      CHORUS_SHARED_MEMORY=${shm} timeout 300 mpirun --oversubscribe --bind-to none -np "${np}" \
        "$@" -x CHORUS_SHARED_MEMORY "${bench}" "${args[@]}" | sed "s/^/shm=${shm} /" | tee -a "${out}"
      CHORUS_SHARED_MEMORY=${shm} timeout 300 "${chorusrun}" --gloo --oversubscribe -np "${np}" \
        "$@" "${bench}" "${args[@]}" | sed "s/^/shm=${shm} /" | tee -a "${out}"
    done
  done
}
args=("$@")
if [[ -n "${LAYOUTS:-}" ]]; then
  skip() { echo "run_world_bench.sh: cannot run here: $*" >&2; exit 1; }
  fail() { echo "run_world_bench.sh: FAIL: $*" >&2; exit 1; }
  . "${repo}/tests/cluster/netns_lib.sh"
  netns_up 4
  trap 'rm -f "${out}"; netns_cleanup' EXIT
  export CHORUS_RSH="${netns_state}/agent" MASTER_ADDR="${netns_subnet}.1"
  for layout in ${LAYOUTS}; do
    hosts=""
    for ((i = 1; i <= ${layout%x*}; i++)); do hosts+="${hosts:+,}h$i:${layout#*x}"; done
    run_pair $(( ${layout%x*} * ${layout#*x} )) -H "${hosts}"
  done
else
  for np in ${NPS:-2 4}; do run_pair "${np}"; done
fi
echo
echo "median of the runs' medians, us (ratio: gloo / mpi)"
printf '%-4s %-4s %-10s %10s %10s %7s\n' shm np bytes mpi gloo ratio
/usr/bin/python3 - "${out}" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = dict(kv.split("=") for kv in line.split())
    runs[(int(f["shm"]), int(f["np"]), int(f["bytes"]), f["world"])].append(float(f["median_us"]))
for shm, np, size in sorted({k[:3] for k in runs}, key=lambda k: (-k[0], k[1], k[2])):
    mpi = statistics.median(runs[(shm, np, size, "mpi")])
    gloo = statistics.median(runs[(shm, np, size, "gloo")])
    print(f"{shm:<4} {np:<4} {size:<10} {mpi:10.1f} {gloo:10.1f} {gloo / mpi:7.2f}")
PY
