#!/usr/bin/env bash
# The host backend's reductions across hosts: backend_test's EveryAlgorithm cases (each
# algorithm forced, and auto) on fake hosts (netns_lib.sh) at P = 2, 3, 4, 5, 7 and 8, one
# rank per host except 4 = 2 hosts x 2 and 8 = 4 hosts x 2. Every result must have the bits
# of the combination tree, fused or alone, on every rank (tests/mpi/backend_test.cc).
#
#   netns_algorithms.sh BACKEND_TEST
#
# Each run is under a hard timeout; exit 77 (skipped) only when namespaces cannot be made.
set -u
backend_test=$1
SKIP=77
skip() { echo "netns_algorithms.sh: SKIPPED: $*"; exit $SKIP; }
fail() { echo "netns_algorithms.sh: FAIL: $*"; exit 1; }

. "$(dirname "$0")/netns_lib.sh"
netns_up 7

cases='Backend/EveryAlgorithm.AllreduceBitsOfTheTree/*'
cases+=':Backend/EveryAlgorithm.ReducescatterUnevenBlocks/*'
cases+=':Backend/EveryAlgorithm.FusedAndAloneGiveTheSameBits/*'
want_tests=15  # 3 cases x 5 algorithms (auto and the four forced)

start=$(date +%s)
for layout in 2:h1:1,h2:1 3:h1:1,h2:1,h3:1 4:h1:2,h2:2 5:h1:1,h2:1,h3:1,h4:1,h5:1 \
  7:h1:1,h2:1,h3:1,h4:1,h5:1,h6:1,h7:1 8:h1:2,h2:2,h3:2,h4:2; do
  np=${layout%%:*}
  hosts=${layout#*:}
  echo "== mpirun -np $np -H $hosts backend_test --across-hosts"
  t0=$(date +%s)
  # Each rank's output in a file of its own (out/1/rank.N/stdout): ranks' lines interleave
  # on mpirun's own output, so the checks read rank 0's file.
  out="$netns_state/out$np"
  timeout -k 5 240 mpirun -np "$np" -H "$hosts" --bind-to none --output-filename "$out" \
    "$backend_test" --across-hosts --gtest_color=no --gtest_filter="$cases" >"$out.log" 2>&1
  rc=$?
  cat "$out.log" "$out"/1/rank.*/stdout "$out"/1/rank.*/stderr 2>/dev/null
  [ $rc = 124 ] && fail "P=$np hung (hard timeout)"
  [ $rc = 0 ] || fail "P=$np: mpirun exited $rc"
  grep -q "\[  PASSED  \] $want_tests tests" "$out/1/rank.0/stdout" ||
    fail "P=$np: rank 0 did not pass all $want_tests cases"
  if cat "$out"/1/rank.*/stdout | grep -q "SKIPPED"; then fail "P=$np: a case was skipped"; fi
  echo "== P=$np passed in $(( $(date +%s) - t0 )) s"
done
echo "netns_algorithms.sh: ok in $(( $(date +%s) - start )) s"
