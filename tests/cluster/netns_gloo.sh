#!/usr/bin/env bash
# A job without MPI across fake hosts (netns_lib.sh): the ranks are started as torchrun starts
# them, with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT, and meet over Gloo.
#
#   netns_gloo.sh MAP_PROBE CHORUSRUN FAULTS [PYTHON BUILD_DIR DDP_SCRIPT DATA_DIR]
#
# Runs, each under a hard timeout:
#   1. chorusrun --gloo -H h1:2,h2:2 map_probe, the ranks on each host through the rsh agent
#      (CHORUS_RSH): every rank's map, rank 0's host table, the allreduce across the hosts;
#   2. with Python: chorusrun --gloo -H h1:2,h2:2 python ddp_mnist.py --backend chorus, a
#      PyTorch DDP script whose default group starts Chorus on Gloo in torch's env:// store;
#      then the same script under torchrun itself, one per host (--nnodes 2, static
#      rendezvous at h1), as a user starts it on each node;
#   3. chorusrun killed with SIGKILL while its ranks run on h1 and h2: the ranks end (the remote
#      line watches the input chorusrun holds for it);
#   4. faults peer_exits_idle and peer_killed_busy on h1, h2, h3, one rank each, started through
#      the agent without a launcher that would end the others: when the rank on h3 dies idle or
#      in a stream of allreduces, the ranks on h1 and h2 fail their collective within
#      CHORUS_LIVENESS_SECONDS and the roll call, naming rank 2 alone.
# Exit 77 (skipped) only when namespaces cannot be made here.
set -u
probe=$1
chorusrun=$2
faults=$3
py=${4:-}
py_build=${5:-}
ddp=${6:-}
data=${7:-}
SKIP=77
skip() { echo "netns_gloo.sh: SKIPPED: $*"; exit $SKIP; }
fail() { echo "netns_gloo.sh: FAIL: $*"; exit 1; }

. "$(dirname "$0")/netns_lib.sh"
netns_up 3
state=$netns_state
subnet=$netns_subnet
export CHORUS_LOG_LEVEL=info CHORUS_RSH="$state/agent" MASTER_ADDR="$subnet.1"
start=$(date +%s)

echo "== chorusrun --gloo -H h1:2,h2:2 map_probe (subnet $subnet.0/24)"
timeout -k 5 90 "$chorusrun" --gloo -H h1:2,h2:2 "$probe" >"$state/run1" 2>&1
rc=$?
cat "$state/run1"
[ $rc = 124 ] && fail "chorusrun --gloo hung (hard timeout)"
[ $rc = 0 ] || fail "chorusrun --gloo exited $rc"
grep -q "rank map: 4 ranks on 2 hosts, layout ppr:2:node" "$state/run1" ||
  fail "rank 0 did not print the host table of 4 ranks on 2 hosts"
for r in 0 1 2 3; do
  grep -qE "^chorus-map rank=$r size=4 host=h$((r / 2 + 1)) local_rank=$((r % 2)) local_size=2 cross_rank=$((r / 2)) cross_size=2 .* ok$" "$state/run1" ||
    fail "rank $r: wrong map line or failed allreduce"
done
if grep -q "disagrees" "$state/run1"; then fail "a launcher variable disagreed with the map"; fi

if [ -n "$py" ]; then
  echo "== chorusrun --gloo -H h1:2,h2:2 python ddp_mnist.py --backend chorus"
  PYTHONPATH=$py_build/python timeout -k 5 180 "$chorusrun" --gloo -H h1:2,h2:2 "$py" "$ddp" \
    --backend chorus --epochs 1 --limit 8000 --min-accuracy 50 --data-dir "$data" \
    >"$state/run2" 2>&1
  rc=$?
  cat "$state/run2"
  [ $rc = 0 ] || fail "the DDP script on chorus without MPI exited $rc"
  grep -q "rank map: 4 ranks on 2 hosts" "$state/run2" ||
    fail "the DDP script did not run on 4 ranks over 2 hosts"
  grep -qE "final test accuracy: [0-9.]+% \(4 ranks, chorus\)" "$state/run2" ||
    fail "the DDP script did not finish training"

  # The same script under torchrun, one torchrun per host as a user starts it on each node
  # (static rendezvous at h1): its workers' default group starts Chorus on Gloo in the store
  # torchrun keeps. --redirects 1 --tee 1: see tests/mpi/run_torchrun.sh.
  echo "== torchrun --nnodes 2 --nproc_per_node 2 on h1 and h2: ddp_mnist.py --backend chorus"
  port=$(( 20000 + ($$ + RANDOM) % 20000 ))
  pids=()
  for node in 0 1; do
    "$state/agent" "h$((node + 1))" "exec env PYTHONPATH=$py_build/python timeout -k 5 180 \
$py -m torch.distributed.run --nnodes 2 --node_rank $node --nproc_per_node 2 \
--master_addr $subnet.1 --master_port $port --redirects 1 --tee 1 --log_dir $state/torchrun.$node \
$ddp --backend chorus --epochs 1 --limit 8000 --min-accuracy 50 --data-dir $data" \
      >"$state/run3.$node" 2>&1 &
    pids+=($!)
  done
  rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  cat "$state/run3".*
  [ $rc = 0 ] || fail "the DDP script under torchrun exited $rc"
  grep -q "rank map: 4 ranks on 2 hosts" "$state/run3.0" ||
    fail "the DDP script under torchrun did not run on 4 ranks over 2 hosts"
  grep -qE "final test accuracy: [0-9.]+% \(4 ranks, chorus\)" "$state/run3.0" ||
    fail "the DDP script under torchrun did not finish training"
fi

# chorusrun itself killed (SIGKILL: it ends nothing itself): its ranks on other hosts, whose
# remote shells would leave them running, end once the input chorusrun held for them closes.
echo "== chorusrun --gloo -H h1:1,h2:1 killed: its ranks on the hosts end"
marker=$(( 3000 + RANDOM % 1000 ))
"$chorusrun" --gloo -H h1:1,h2:1 sleep "$marker" >"$state/run4" 2>&1 &
runner=$!
for _ in $(seq 50); do
  [ "$(pgrep -fc "^sleep $marker\$")" = 2 ] && break
  sleep 0.2
done
[ "$(pgrep -fc "^sleep $marker\$")" = 2 ] || fail "chorusrun did not start its 2 ranks"
kill -KILL "$runner"
for _ in $(seq 50); do
  [ "$(pgrep -fc "^sleep $marker\$")" = 0 ] && break
  sleep 0.2
done
left=$(pgrep -fc "^sleep $marker\$")
pkill -f "^sleep $marker\$"
[ "$left" = 0 ] || fail "$left rank(s) still ran 10 s after chorusrun was killed"

# faults CASE: one rank on each of h1, h2, h3 through the agent, without a launcher that would
# end the others; the ranks on h1 and h2 must name rank 2 alone, within 40 s.
run_fault() {
  local case=$1 pattern=$2 r pids=() port=$(( 20000 + ($$ + RANDOM) % 20000 )) t0
  echo "== faults $case on h1, h2, h3 (Gloo, no launcher to end the others)"
  t0=$(date +%s)
  for r in 0 1 2; do
    "$state/agent" "h$((r + 1))" "exec env RANK=$r WORLD_SIZE=3 LOCAL_RANK=0 \
MASTER_ADDR=$subnet.1 MASTER_PORT=$port CHORUS_LIVENESS_SECONDS=3 FAULTS_DIR=$state \
CHORUS_LOG_LEVEL=info timeout -k 5 60 $faults $case" >"$state/$case.$r" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  cat "$state/$case".*
  for r in 0 1; do
    grep -qE "^rank $r: $case ok.*$pattern" "$state/$case.$r" ||
      fail "$case: rank $r did not fail its collective naming rank 2 alone"
  done
  [ $(( $(date +%s) - t0 )) -le 40 ] || fail "$case: the lost rank took more than 40 s to detect"
}
# Lost while idle (in the negotiation's rounds), and while busy (in a stream of allreduces).
run_fault peer_exits_idle "ranks \\[2\\] took no part"
run_fault peer_killed_busy "ranks \\[2\\] took no part"
echo "netns_gloo.sh: ok in $(( $(date +%s) - start )) s"
