#!/usr/bin/env bash
# Elastic training across fake hosts (netns_lib.sh) under chorusrun's supervision, with the
# Horovod-style elastic example (examples/python/elastic_mnist.py) on Fashion-MNIST:
#
#  1. survive: 3 hosts x 2 ranks (the LibTorch example: x 1); host h3's ranks are killed
#     right after commit 2, with its commit store (CHORUS_TEST_FAIL_AT_COMMIT); chorusrun
#     relaunches on h1 and h2 and the job finishes. Checked: the one restart line, the
#     resumed commit, every sample of the epoch trained once after the commit
#     (tests/elastic/check_samples.py), and the final weights bit-identical to the reference.
#  2. the reference: the same failure with --max-restarts 0 (the job ends, the stores stay,
#     and chorusrun says no restarts were left), then a job started by hand on h1 and h2
#     from those stores.
#  3. a stalled rank: one whose training thread hangs at commit 2 while Chorus runs
#     (CHORUS_TEST_FAIL_AT_COMMIT=h2:2:hang); the stall inspector ends the job with status
#     84, and the relaunch finishes from commit 2.
#  4. all nodes lost: no store holds a commit, so the relaunch starts from the script's own
#     checkpoint of the last finished epoch (its --checkpoint), and finishes.
#  5. a host added: the discovery script offers h3 after the job started on h1 and h2 (a
#     rank each); the job stops at its next commit and continues on 3 hosts from it.
#  6. a failure during the restore: h2 is lost at commit 2, then the relaunch on h1 dies
#     while restoring (CHORUS_TEST_FAIL_RESTORE); the third launch resumes from commit 2.
#
#   netns_elastic.sh CHORUSRUN PYTHON PYTHONPATH EXAMPLE DATA_DIR [CPP_EXAMPLE CPP_DATA_DIR]
#
# With the LibTorch example (examples/elastic_mnist.cc), 1 and 2 run for it too.
#
# Each job is under a hard timeout; exit 77 (skipped) only when namespaces cannot be made.
set -u
SKIP=77
skip() { echo "netns_elastic.sh: SKIPPED: $*"; exit $SKIP; }
fail() { echo "netns_elastic.sh: FAIL: $*"; exit 1; }

. "$(dirname "$0")/netns_lib.sh"
. "$(dirname "$0")/elastic_lib.sh"
elastic_args "$@"
netns_up 3
job_args=(--mpi-args "--bind-to none")

# One epoch of 2,000 images, a commit every 5 batches: h3 goes mid-epoch. The runs are kept
# short (1 rank per host where the case allows it): every launch starts Python or the
# program and loads the data again, which is most of this test's time.
limit=2000
epochs=1
train=(--epochs $epochs --limit $limit --batch-size 32 --batches-per-commit 5)
py_train=("$python" "$example" "${train[@]}" --log-interval 1000 --data-dir "$data_dir")
export CHORUS_LIVENESS_SECONDS=20 CHORUS_STALL_CHECK_SECONDS=2 CHORUS_STALL_SHUTDOWN_SECONDS=4

start=$(date +%s)

# 1 and 2 for one trainer: survive NAME PPR WEIGHTS-CHECK PROGRAM...: the job on 3 hosts x
# PPR ranks that survives the loss of h3, then the reference (the same failure, no restart;
# then a job started by hand on h1 and h2), and the final weights compared by WEIGHTS-CHECK.
survive() {
  local name=$1 k=$2 check=$3
  shift 3
  export CHORUS_ELASTIC_JOB=$name CHORUS_TEST_FAIL_AT_COMMIT=h3:2
  job "$name" 240 --max-restarts 2 --min-np 2 -H "h1:$k,h2:$k,h3:$k" -- \
    "$@" --sample-log "$netns_state/$name.samples" $(weights_arg "$check" "$name")
  [ $rc = 0 ] || fail "$name: chorusrun exited $rc"
  expect_line "$name" "^chorusrun: restart 1 of 2 after rank [0-9] on h3 ended on signal 9 \(Killed\); launch 2: $((2 * k)) ranks on h1:$k,h2:$k \(excluded: h3\)$" \
    "the restart line names the rank, the host, the signal and the new layout"
  [ "$(grep -c '^chorusrun: restart' "$netns_state/$name.log")" = 1 ] ||
    fail "$name: more than one restart"
  expect_line "$name" "^chorus.elastic: resumed from commit 2 " "the relaunch resumed from commit 2"
  expect_line "$name" "^finished $epochs epochs on $((2 * k)) ranks" "the job finished on h1 and h2"
  "$python" "$check_samples" "$netns_state/$name.samples" $limit $epochs ||
    fail "$name: the samples after the commit were not each trained once"
  [ -e "$netns_state/$name.shm/chorus-elastic-$name" ] &&
    fail "$name: the commit stores outlived the finished training"

  export CHORUS_ELASTIC_JOB=$name.reference
  job "$name.reference_fail" 240 --max-restarts 0 --min-np 2 -H "h1:$k,h2:$k,h3:$k" -- "$@"
  [ $rc = 137 ] || fail "$name.reference_fail: chorusrun exited $rc, expected 137 (a rank killed)"
  expect_line "$name.reference_fail" "no restarts left \(--max-restarts 0\)" "the end names the limit"
  [ -e "$netns_state/$name.reference_fail.shm/chorus-elastic-$name.reference/h1/commit-00000000000000000002" ] ||
    fail "$name.reference_fail: h1's store does not hold commit 2"
  mv "$netns_state/$name.reference_fail.shm" "$netns_state/$name.reference.shm"
  unset CHORUS_TEST_FAIL_AT_COMMIT
  job "$name.reference" 240 --max-restarts 0 -H "h1:$k,h2:$k" -- "$@" \
    $(weights_arg "$check" "$name.reference")
  [ $rc = 0 ] || fail "$name.reference: chorusrun exited $rc"
  expect_line "$name.reference" "^chorus.elastic: resumed from commit 2 " \
    "the reference resumed from commit 2"
  "$check" "$name" "$name.reference" ||
    fail "$name: the final weights differ from the reference restart's"
}

# The Python example saves its final weights (--save-weights), compared tensor by tensor;
# the LibTorch one prints a digest of them.
weights_arg() { [ "$1" = same_saved_weights ] && echo "--save-weights $netns_state/$2.pt"; }

survive python 2 same_saved_weights "${py_train[@]}"
if [ -n "$cpp_example" ]; then
  survive libtorch 1 same_digest "$cpp_example" "${train[@]}" --cache-dir "$cpp_data_dir"
fi

# 3. A stalled rank: its training thread hangs at commit 2; the stall inspector ends the
# job (84), and the relaunch finishes from commit 2.
export CHORUS_ELASTIC_JOB=stalled CHORUS_TEST_FAIL_AT_COMMIT=h2:2:hang
job stalled 180 --max-restarts 1 -H h1:1,h2:1 -- "${py_train[@]}"
[ $rc = 0 ] || fail "stalled: chorusrun exited $rc"
expect_line stalled "^chorusrun: restart 1 of 1 after ranks stopped taking part \(exit 84" \
  "the restart names the stall class"
expect_line stalled "^chorus.elastic: resumed from commit 2 " "the relaunch resumed from commit 2"
expect_line stalled "^finished $epochs epochs on 2 ranks" "the job finished"

# 4. Every node lost: the relaunch finds no commit and starts from the epoch checkpoint.
export CHORUS_ELASTIC_JOB=all_lost CHORUS_TEST_FAIL_AT_COMMIT=h1:9
job all_lost 240 --max-restarts 1 -H h1:1 -- "${py_train[@]}" --epochs 2 --limit 1000 \
  --checkpoint "$netns_state/all_lost.ckpt"
[ $rc = 0 ] || fail "all_lost: chorusrun exited $rc"
expect_line all_lost "^chorusrun: restart 1 of 1 after rank 0 on h1" "one restart"
grep -q "resumed from commit" "$netns_state/all_lost.log" &&
  fail "all_lost: a commit was resumed, but every store was lost"
expect_line all_lost "^resumed from the checkpoint of epoch 1" "the relaunch read the checkpoint"
expect_line all_lost "^finished 2 epochs on 1 ranks" "the job finished from its checkpoint"
unset CHORUS_TEST_FAIL_AT_COMMIT

# 5. A host added while the job runs: it stops at the next commit and grows to 3 hosts.
export CHORUS_ELASTIC_JOB=grow
printf 'h1:1\nh2:1\n' >"$netns_state/offered"
cat >"$netns_state/discover" <<EOF
#!/bin/sh
cat "$netns_state/offered"
EOF
chmod +x "$netns_state/discover"
( for _ in $(seq 1 600); do
    ls "$netns_state"/grow.shm/chorus-elastic-grow/h1/commit-* >/dev/null 2>&1 && break
    sleep 0.1
  done
  printf 'h1:1\nh2:1\nh3:1\n' >"$netns_state/offered" ) &
# Longer than the others: the discovery runs every 2 s, and the job must still be training.
job grow 240 --max-restarts 0 --host-discovery-script "$netns_state/discover" -- \
  "${py_train[@]}" --epochs 1 --limit 20000
wait
[ $rc = 0 ] || fail "grow: chorusrun exited $rc"
expect_line grow "^chorusrun: hosts added \(h1:1,h2:1,h3:1\): 3 ranks fit" "the discovery was noticed"
expect_line grow "^chorusrun: hosts added: .*; launch 2: 3 ranks on h1:1,h2:1,h3:1$" \
  "the relaunch on 3 hosts"
expect_line grow "^chorus.elastic: resumed from commit [0-9]+ " "the grown job resumed from a commit"
expect_line grow "^finished 1 epochs on 3 ranks" "the job finished on 3 ranks"

# 6. A failure during the restore.
export CHORUS_ELASTIC_JOB=restore CHORUS_TEST_FAIL_AT_COMMIT=h2:2 CHORUS_TEST_FAIL_RESTORE=h1
job restore 240 --max-restarts 2 -H h1:1,h2:1 -- "${py_train[@]}"
unset CHORUS_TEST_FAIL_AT_COMMIT CHORUS_TEST_FAIL_RESTORE
[ $rc = 0 ] || fail "restore: chorusrun exited $rc"
expect_line restore "^chorusrun: restart 1 of 2 after rank 1 on h2 .*; launch 2: 1 ranks on h1:1 \(excluded: h2\)$" \
  "the first restart leaves h2 out"
expect_line restore "^chorusrun: restart 2 of 2 after rank 0 on h1 .*; launch 3: 1 ranks on h1:1 \(excluded: h2\)$" \
  "the failed restore is restarted on the host left"
expect_line restore "CHORUS_TEST_FAIL_RESTORE: in the restore of commit 2: rank 0 on h1 is killed" \
  "the second launch died in the restore of commit 2"
expect_line restore "^chorus.elastic: resumed from commit 2 " "the third launch resumed from commit 2"
expect_line restore "^finished $epochs epochs on 1 ranks" "the job finished"

echo "netns_elastic.sh: ok in $(( $(date +%s) - start )) s"
