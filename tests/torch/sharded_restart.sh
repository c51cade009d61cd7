#!/usr/bin/env bash
# A sharded job restarted on another number of ranks: torch_sharded_test's Restart test saves
# a consolidated checkpoint at SAVE_NP ranks, then resumes it at RESUME_NP and compares with
# a reference restored by hand. sharded_restart.sh RUN_MPI PROGRAM SAVE_NP RESUME_NP
set -euo pipefail
run_mpi=$1 program=$2 save_np=$3 resume_np=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export CHORUS_TEST_RESTART_PATH=$dir/checkpoint.pt
CHORUS_TEST_RESTART=save "$run_mpi" "$save_np" 120 "$program" --gtest_filter=Restart.* --gtest_color=no
test -s "$CHORUS_TEST_RESTART_PATH"
CHORUS_TEST_RESTART=resume "$run_mpi" "$resume_np" 120 "$program" --gtest_filter=Restart.* \
  --gtest_color=no 2>&1 | tee "$dir/resume.log"
# Every rank ran the comparison (a skip would print "PASSED ] 0 tests").
test "$(grep -c "^\[  PASSED  \] 1 test" "$dir/resume.log")" -eq "$resume_np"
