#!/usr/bin/env bash
# A sharded job restarted on another number of ranks: torch_sharded_test's Restart test saves
# a consolidated checkpoint at SAVE_NP ranks, then resumes it at RESUME_NP; then it commits
# through the elastic state at SAVE_NP and a relaunch at RESUME_NP resumes the commit through
# elastic::run. Each resume compares with a reference restored by hand.
# sharded_restart.sh RUN_MPI PROGRAM SAVE_NP RESUME_NP
set -euo pipefail
run_mpi=$1 program=$2 save_np=$3 resume_np=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export CHORUS_TEST_RESTART_PATH=$dir/checkpoint.pt
# phases FIRST THEN: FIRST at SAVE_NP ranks, THEN at RESUME_NP, whose every rank must pass
# (a skip would print "PASSED ] 0 tests").
phases() {
  CHORUS_TEST_RESTART=$1 "$run_mpi" "$save_np" 120 "$program" --gtest_filter=Restart.* \
    --gtest_color=no
  CHORUS_TEST_RESTART=$2 "$run_mpi" "$resume_np" 120 "$program" --gtest_filter=Restart.* \
    --gtest_color=no 2>&1 | tee "$dir/$2.log"
  test "$(grep -c "^\[  PASSED  \] 1 test" "$dir/$2.log")" -eq "$resume_np"
}
phases save resume
test -s "$CHORUS_TEST_RESTART_PATH"
export CHORUS_ELASTIC_JOB=sharded-restart-$$ CHORUS_ELASTIC_DIR=$dir
phases commit relaunch
