#!/usr/bin/env bash
# A job restarted on another number of ranks: PROGRAM's Restart test runs each pair of phases
# FIRST:THEN given, FIRST at SAVE_NP ranks, THEN at RESUME_NP (CHORUS_TEST_RESTART names the
# phase). save:resume goes through a checkpoint at CHORUS_TEST_RESTART_PATH; commit:relaunch
# through the elastic state, where a relaunch resumes the commit through elastic::run. Each
# resume compares with a reference restored by hand.
# restart.sh RUN_MPI PROGRAM SAVE_NP RESUME_NP FIRST:THEN...
set -euo pipefail
run_mpi=$1 program=$2 save_np=$3 resume_np=$4
shift 4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export CHORUS_TEST_RESTART_PATH=$dir/checkpoint.pt
# Every rank of THEN must pass (a skip would print "PASSED ] 0 tests").
for pair in "$@"; do
  first=${pair%:*} then=${pair#*:}
  # The elastic job's commits, for commit:relaunch (and for no other pair: a job that names
  # CHORUS_ELASTIC_JOB is an elastic one).
  if [ "$first" = commit ]; then
    export CHORUS_ELASTIC_JOB=restart-$$-$then CHORUS_ELASTIC_DIR=$dir
  else
    unset CHORUS_ELASTIC_JOB CHORUS_ELASTIC_DIR
  fi
  CHORUS_TEST_RESTART=$first "$run_mpi" "$save_np" 120 "$program" --gtest_filter=Restart.* \
    --gtest_color=no
  CHORUS_TEST_RESTART=$then "$run_mpi" "$resume_np" 120 "$program" --gtest_filter=Restart.* \
    --gtest_color=no 2>&1 | tee "$dir/$then.log"
  test "$(grep -c "^\[  PASSED  \] 1 test" "$dir/$then.log")" -eq "$resume_np"
  if [ "$first" = save ]; then test -s "$CHORUS_TEST_RESTART_PATH"; fi
done
