#!/usr/bin/env bash
# The runtime's host-memory allreduce across fake hosts (netns_lib.sh), bit for bit in the
# order each layout documents (tests/mpi/order_test.cc): hierarchical at 2 hosts x 2,
# 3 hosts x 2 and 2 hosts x 3 (each host in rank order through shared memory, then the tree
# over the hosts), at 2 hosts x 2 with CHORUS_SHARED_MEMORY=0 (each host's ranks by MPI
# messages, in the tree over the host's ranks, then the tree over the hosts), and the flat tree at 2 hosts x 2 with CHORUS_HIERARCHICAL_ALLREDUCE=0, at
# 3 hosts x 1 and at 2 + 1 ranks; fused and alone alike. Then every collective on exact data
# (tests/mpi/collectives_test.cc) at 2 hosts x 2 and 3 hosts x 2, where the hierarchy runs,
# and, given SHARDED_TEST (tests/torch/sharded_test.cc), ShardedOptimizer against
# DistributedOptimizer bit for bit at 2 hosts x 2, where both reduce in the hierarchy's order.
#
#   netns_hierarchy.sh ORDER_TEST COLLECTIVES_TEST [SHARDED_TEST]
#
# Each run is under a hard timeout; exit 77 (skipped) only when namespaces cannot be made.
set -u
order_test=$1
collectives_test=$2
sharded_test=${3:-}
SKIP=77
skip() { echo "netns_hierarchy.sh: SKIPPED: $*"; exit $SKIP; }
fail() { echo "netns_hierarchy.sh: FAIL: $*"; exit 1; }

. "$(dirname "$0")/netns_lib.sh"
netns_up 3

# run NAME HOSTS HIERARCHICAL ORDER PROGRAM [VAR=VALUE]: one mpirun, with the variable set
# on every rank when given; rank 0 must pass every case and,
# where ORDER is given, print it. Each rank's output goes to a file of its own
# (out/1/rank.N/stdout): ranks' lines interleave on mpirun's own output.
run() {
  local name=$1 hosts=$2 hierarchical=$3 order=$4 program=$5 extra=${6:-} np=0 h out rc t0
  for h in ${hosts//,/ }; do np=$((np + ${h#*:})); done
  out="$netns_state/$name"
  echo "== $name: mpirun -np $np -H $hosts $(basename "$program")" \
    "(CHORUS_HIERARCHICAL_ALLREDUCE=${hierarchical:-unset}${extra:+, $extra})"
  t0=$(date +%s)
  local env=()
  [ -n "$hierarchical" ] && env=(-x "CHORUS_HIERARCHICAL_ALLREDUCE=$hierarchical")
  [ -n "$extra" ] && env+=(-x "$extra")
  timeout -k 5 180 mpirun -np "$np" -H "$hosts" --bind-to none --output-filename "$out" \
    -x CHORUS_LOG_LEVEL=debug "${env[@]}" "$program" --gtest_color=no >"$out.log" 2>&1
  rc=$?
  cat "$out.log" "$out"/1/rank.*/stdout "$out"/1/rank.*/stderr 2>/dev/null |
    grep -v "^\[.*\] \[debug\]"
  [ $rc = 124 ] && fail "$name hung (hard timeout)"
  [ $rc = 0 ] || fail "$name: mpirun exited $rc"
  grep -q "\[  PASSED  \]" "$out/1/rank.0/stdout" || fail "$name: rank 0 did not pass"
  grep -q "FAILED" "$out/1/rank.0/stdout" && fail "$name: rank 0 failed a case"
  if [ -n "$order" ]; then
    grep -q "^order: $order" "$out/1/rank.0/stdout" || fail "$name: expected the order '$order'"
    if cat "$out"/1/rank.*/stdout | grep -q "SKIPPED"; then fail "$name: a case was skipped"; fi
  fi
  # The runtime's own account of the choice, from rank 0's debug log.
  case $order in
    each*) grep -q "global: allreduce of [a-z0-9]* runs on hierarchical" "$out/1/rank.0/stderr" ||
      fail "$name: the runtime did not log the hierarchical allreduce" ;;
    the*) grep -q "global: flat host-memory allreduce across hosts" "$out/1/rank.0/stderr" ||
      fail "$name: the runtime did not log the flat allreduce" ;;
  esac
  if [ -n "$extra" ] && [ "${extra%=*}" = CHORUS_SHARED_MEMORY ]; then
    grep -q "local group: no shared memory for reductions (CHORUS_SHARED_MEMORY=0)" \
      "$out/1/rank.0/stderr" || fail "$name: the local group did not log its MPI reductions"
  fi
  echo "== $name passed in $(( $(date +%s) - t0 )) s"
}

hier="each host in rank order, then the tree over the hosts"
hier_trees="each host by the tree over its ranks, then the tree over the hosts"
tree="the tree over the ranks"
start=$(date +%s)
run order_2x2 h1:2,h2:2 "" "$hier" "$order_test"
run order_3x2 h1:2,h2:2,h3:2 "" "$hier" "$order_test"
run order_2x3 h1:3,h2:3 "" "$hier" "$order_test"
run order_2x2_no_shared_memory h1:2,h2:2 "" "$hier_trees" "$order_test" CHORUS_SHARED_MEMORY=0
run order_2x2_flat h1:2,h2:2 0 "$tree" "$order_test"
run order_3x1 h1:1,h2:1,h3:1 "" "$tree" "$order_test"
run order_2+1 h1:2,h2:1 "" "$tree" "$order_test"
run collectives_2x2 h1:2,h2:2 "" "" "$collectives_test"
run collectives_3x2 h1:2,h2:2,h3:2 "" "" "$collectives_test"
[ -n "$sharded_test" ] && run sharded_2x2 h1:2,h2:2 "" "" "$sharded_test"
echo "netns_hierarchy.sh: ok in $(( $(date +%s) - start )) s"
