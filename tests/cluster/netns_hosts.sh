#!/usr/bin/env bash
# Several hosts over a network, on one machine: each fake host is a network namespace
# with its own address on a private bridge, and every process started "on" it also gets
# a UTS namespace whose hostname is the host's name. mpirun starts its daemons there
# through plm_rsh_agent (a small script standing in for ssh), so ranks on different fake
# hosts see different host names and talk over TCP across the bridge.
#
#   netns_hosts.sh MAP_PROBE CHORUSRUN FAULTS ABCI_JOB_SCRIPT
#
# Runs, each under a hard timeout:
#   1. mpirun -np 4 -H h1:2,h2:2 -map-by ppr:2:node map_probe
#   2. chorusrun -np 3 --ppr 1 -H h1:2,h2:2,h3:2 map_probe   (the launcher end to end)
#   2b. launch/abci_qsub.sh map_probe as Grid Engine runs it on a job's first node, with
#      PE_HOSTFILE naming h1 and h2 and RANKS_PER_NODE=2 (chorusrun reads the allocation)
#   3. mpirun --enable-recovery -np 3 -H h1:1,h2:1,h3:1 faults peer_exits_idle
# and checks the map every rank printed (host, local and cross ranks), that rank 0 printed
# the host table, that no launcher variable disagreed, and that map_probe's allreduce
# across the hosts was right; then that when the rank on h3 exits while idle, the ranks on
# h1 and h2 fail their collective within CHORUS_LIVENESS_SECONDS and the roll call, naming
# rank 2 alone (tests/faults/faults.cc). The hosts come from netns_lib.sh, which removes
# them on exit, failure or interruption. Exit 77 (skipped) only when namespaces cannot be
# made here.
set -u
probe=$1
chorusrun=$2
faults=$3
abci_script=$4
SKIP=77
skip() { echo "netns_hosts.sh: SKIPPED: $*"; exit $SKIP; }
fail() { echo "netns_hosts.sh: FAIL: $*"; exit 1; }

. "$(dirname "$0")/netns_lib.sh"
netns_up 3
state=$netns_state
subnet=$netns_subnet
export CHORUS_LOG_LEVEL=info

# check_run OUTPUT NP HOSTS_PER_RANK...: every rank's line, the table and no disagreement.
check_run() {
  local out=$1 np=$2 ppr=$3 nhosts=$4 r host
  grep -q "rank map: $np ranks on $nhosts hosts, layout ppr:$ppr:node" "$out" ||
    fail "rank 0 did not print the host table with layout ppr:$ppr:node"
  for ((r = 0; r < np; r++)); do
    host="h$((r / ppr + 1))"
    grep -qE "^chorus-map rank=$r size=$np host=$host local_rank=$((r % ppr)) local_size=$ppr cross_rank=$((r / ppr)) cross_size=$nhosts .* ok$" "$out" ||
      fail "rank $r: expected host=$host local_rank=$((r % ppr)) cross_rank=$((r / ppr)) cross_size=$nhosts"
  done
  [ "$(grep -c '^chorus-map ' "$out")" = "$np" ] || fail "expected $np map lines"
  if grep -q "disagrees" "$out"; then fail "a launcher variable disagreed with the map"; fi
}

start=$(date +%s)
echo "== mpirun -np 4 -H h1:2,h2:2 -map-by ppr:2:node (subnet $subnet.0/24)"
timeout -k 5 90 mpirun -np 4 -H h1:2,h2:2 -map-by ppr:2:node --bind-to none \
  -x CHORUS_LOG_LEVEL "$probe" >"$state/run1" 2>&1
rc=$?
cat "$state/run1"
[ $rc = 124 ] && fail "mpirun hung (hard timeout)"
[ $rc = 0 ] || fail "mpirun exited $rc"
check_run "$state/run1" 4 2 2

echo "== chorusrun -np 3 --ppr 1 -H h1:2,h2:2,h3:2"
timeout -k 5 90 "$chorusrun" -np 3 --ppr 1 -H h1:2,h2:2,h3:2 --explain \
  --mpi-args "--bind-to none" "$probe" >"$state/run2" 2>&1
rc=$?
cat "$state/run2"
[ $rc = 124 ] && fail "chorusrun hung (hard timeout)"
[ $rc = 0 ] || fail "chorusrun exited $rc"
grep -q "^h3    2     0 " "$state/run2" || fail "chorusrun --explain did not list rank 2 on h3"
check_run "$state/run2" 3 1 3

echo "== $(basename "$abci_script") map_probe, as Grid Engine starts it on h1 (PE_HOSTFILE h1, h2)"
printf 'h1 2 all.q@h1 UNDEFINED\nh2 2 all.q@h2 UNDEFINED\n' >"$state/pe_hostfile"
PATH=$(dirname "$chorusrun"):$PATH PE_HOSTFILE=$state/pe_hostfile NHOSTS=2 NSLOTS=4 JOB_ID=4242 \
  RANKS_PER_NODE=2 timeout -k 5 90 bash "$abci_script" "$probe" >"$state/run2b" 2>&1
rc=$?
cat "$state/run2b"
[ $rc = 124 ] && fail "the ABCI job script hung (hard timeout)"
[ $rc = 0 ] || fail "the ABCI job script exited $rc"
check_run "$state/run2b" 4 2 2
grep -q "binding: CHORUS_BIND=core" "$state/run2b" || fail "the ABCI job script's ranks did not bind"
echo "== mpirun --enable-recovery -np 3 -H h1:1,h2:1,h3:1 faults peer_exits_idle"
run3_start=$(date +%s)
timeout -k 5 60 mpirun -np 3 -H h1:1,h2:1,h3:1 --bind-to none --enable-recovery \
  -x CHORUS_LOG_LEVEL -x CHORUS_LIVENESS_SECONDS=3 -x FAULTS_DIR="$state" \
  "$faults" peer_exits_idle >"$state/run3" 2>&1
rc=$?
cat "$state/run3"
[ $rc = 124 ] && fail "a rank's exit across hosts hung the others (hard timeout)"
for r in 0 1; do
  grep -qE "^rank $r: peer_exits_idle ok: .*ranks \[2\] took no part" "$state/run3" ||
    fail "rank $r did not fail its collective naming rank 2 alone"
done
[ $(( $(date +%s) - run3_start )) -le 40 ] || fail "the lost rank took more than 40 s to detect"
echo "netns_hosts.sh: ok in $(( $(date +%s) - start )) s"
