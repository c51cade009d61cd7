#!/usr/bin/env bash
# bench/ddp_bench.py (the c10d backend chorus against gloo in one launch) across fake hosts:
# network namespaces over a bridge (tests/cluster/netns_lib.sh; needs root), the ranks started
# through their rsh agent, the ranks' stores at the first host. One launch per layout and
# world: the MPI world (mpirun) and the Gloo world (chorusrun --gloo, as torchrun starts ranks).
#
#   LAYOUTS="2x1 2x2" WORLDS="mpi gloo" bench/run_ddp_bench.sh [ddp_bench.py options...]
#
# Environment: BUILD_DIR (default <repo>/build), LAYOUTS (hosts x ranks per host, default
# "2x1"), WORLDS (default "mpi gloo"). On one host, run ddp_bench.py under mpirun directly (its
# docstring).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-${repo}/build}"
[[ -d "${build}/python" ]] || { echo "build first (ninja -C ${build})" >&2; exit 1; }
skip() { echo "run_ddp_bench.sh: cannot run here: $*" >&2; exit 1; }
fail() { echo "run_ddp_bench.sh: FAIL: $*" >&2; exit 1; }
. "${repo}/tests/cluster/netns_lib.sh"
netns_up 4
trap 'netns_cleanup' EXIT
# torch's gloo group binds the interface GLOO_SOCKET_IFNAME names: each fake host's eth0.
export MASTER_ADDR="${netns_subnet}.1" PYTHONPATH="${build}/python" GLOO_SOCKET_IFNAME=eth0
export CHORUS_RSH="${netns_state}/agent"
for layout in ${LAYOUTS:-2x1}; do
  hosts=""
  for ((i = 1; i <= ${layout%x*}; i++)); do hosts+="${hosts:+,}h$i:${layout#*x}"; done
  for world in ${WORLDS:-mpi gloo}; do
    echo "== ${layout%x*} fake hosts x ${layout#*x} ranks (-H ${hosts}), the ${world} world"
    if [[ "${world}" == mpi ]]; then
      timeout 1200 mpirun --oversubscribe --bind-to none -np $(( ${layout%x*} * ${layout#*x} )) \
        -H "${hosts}" -x MASTER_ADDR -x PYTHONPATH -x GLOO_SOCKET_IFNAME \
        /usr/bin/python3 "${repo}/bench/ddp_bench.py" "$@"
    else
      timeout 1200 "${build}/launch/chorusrun" --gloo -H "${hosts}" env \
        "PYTHONPATH=${PYTHONPATH}" GLOO_SOCKET_IFNAME=eth0 /usr/bin/python3 \
        "${repo}/bench/ddp_bench.py" "$@"
    fi
  done
done
