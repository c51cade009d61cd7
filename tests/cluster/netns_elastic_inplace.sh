#!/usr/bin/env bash
# Elastic training that resets in place, across fake hosts (netns_lib.sh), under
# chorusrun --gloo's supervision, with the Horovod-style example (examples/python/
# elastic_mnist.py) and the LibTorch one (examples/elastic_mnist.cc) on Fashion-MNIST, one
# rank per host:
#
#  1. the reference: h3 lost right after commit 2 with --max-restarts 0 (the job ends, the
#     stores stay), then a job started by hand on h1 and h2 from those stores.
#  2. h3 killed after commit 2 (CHORUS_TEST_FAIL_AT_COMMIT=h3:2), h3's processes stopped
#     (h3:2:stop), and h3's network cut (stopped, its link taken down, then let go on): each
#     time the ranks on h1 and h2 go on in the same processes (no worker is started again)
#     from commit 2, in the round chorusrun forms without h3. Checked: the round's line, the
#     resumed commit, every sample of the epoch trained once (tests/elastic/check_samples.py),
#     and the final weights bit-identical to the reference's.
#  3. (Python) two failures in a row: h4 at commit 2, then h3 at commit 3, on 4 hosts.
#  4. (Python) a failure during the reset itself: h3 lost at commit 2, then h2 dies in the
#     second round's restore; the third round, on h1 alone, resumes commit 2.
#  5. (Python) a host added: the discovery script offers h3 after the job started on h1 and
#     h2; a worker starts there and the job goes on on 3 ranks from its next commit.
#
#   netns_elastic_inplace.sh CHORUSRUN PYTHON PYTHONPATH EXAMPLE DATA_DIR [CPP_EXAMPLE CPP_DATA_DIR]
#
# Each job is under a hard timeout; exit 77 (skipped) only when namespaces cannot be made.
set -u
SKIP=77
skip() { echo "netns_elastic_inplace.sh: SKIPPED: $*"; exit $SKIP; }
fail() { echo "netns_elastic_inplace.sh: FAIL: $*"; exit 1; }

. "$(dirname "$0")/netns_lib.sh"
. "$(dirname "$0")/elastic_lib.sh"
elastic_args "$@"
netns_up 4
job_args=(--gloo)
export CHORUS_RSH="$netns_state/agent"
# A lost rank is seen within 5 s; chorusrun waits 10 s more for the survivors' reset.
export CHORUS_LIVENESS_SECONDS=5

# One epoch of 2,000 images, a commit every 5 batches: h3 goes mid-epoch.
limit=2000
epochs=1
train=(--epochs $epochs --limit $limit --batch-size 32 --batches-per-commit 5 --log-interval 1000)
py_train=("$python" "$example" "${train[@]}" --data-dir "$data_dir")
cpp_train=("$cpp_example" "${train[@]}" --cache-dir "$cpp_data_dir")

# The final weights: the Python example saves them (--save-weights), the LibTorch one prints
# a digest of them.
weights_args() {  # TRAINER NAME
  [ "$1" = python ] && echo "--save-weights $netns_state/$2.pt"
}
same_weights() {  # TRAINER NAME REFERENCE
  if [ "$1" = python ]; then same_saved_weights "$2" "$3"; else same_digest "$2" "$3"; fi
}

# The workers of HOST (its network namespace's processes running TRAINER's program).
host_workers() {  # HOST PATTERN
  local p
  for p in $(ip netns pids "$netns_tag-$1"); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "$2" && echo "$p"
  done
}

# The network cut: once h3's worker stopped itself after commit 2 (h3:2:stop), h3's link goes
# down and the worker goes on, cut off from the others.
cut_h3_when_stopped() {  # PATTERN
  local p i
  for i in $(seq 1 1200); do
    for p in $(host_workers h3 "$1"); do
      if [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" = T ]; then
        ip -n "$netns_tag-h3" link set eth0 down
        echo "   (h3's link is down; its worker $p goes on)"
        kill -CONT "$p"
        return 0
      fi
    done
    sleep 0.1
  done
  echo "   (h3's worker never stopped)"
}

start=$(date +%s)

# reference TRAINER PROGRAM...
reference() {
  local trainer=$1 name=$1.reference
  shift
  export CHORUS_ELASTIC_JOB=$name CHORUS_TEST_FAIL_AT_COMMIT=h3:2
  job "$name.fail" 120 --max-restarts 0 --min-np 2 -H h1:1,h2:1,h3:1 -- "$@"
  [ $rc = 137 ] || fail "$name.fail: chorusrun exited $rc, expected 137 (a worker killed)"
  expect_line "$name.fail" "no restarts left \(--max-restarts 0\)" "the end names the limit"
  [ -e "$netns_state/$name.fail.shm/chorus-elastic-$name/h1/commit-00000000000000000002" ] ||
    fail "$name.fail: h1's store does not hold commit 2"
  mv "$netns_state/$name.fail.shm" "$netns_state/$name.shm"
  unset CHORUS_TEST_FAIL_AT_COMMIT
  job "$name" 120 --max-restarts 0 -H h1:1,h2:1 -- "$@" $(weights_args "$trainer" "$name")
  [ $rc = 0 ] || fail "$name: chorusrun exited $rc"
  expect_line "$name" "^chorus.elastic: resumed from commit 2 " "the reference resumed from commit 2"
}

# in_place TRAINER CASE FAULT PATTERN PROGRAM...: h3 lost at commit 2 by FAULT; the job goes on
# in place on h1 and h2.
in_place() {
  local trainer=$1 case=$2 fault=$3 pattern=$4 name=$1.$2 watcher=
  shift 4
  export CHORUS_ELASTIC_JOB=$name CHORUS_TEST_FAIL_AT_COMMIT=$fault
  if [ "$case" = cut ]; then
    cut_h3_when_stopped "$pattern" &
    watcher=$!
  fi
  job "$name" 180 --max-restarts 2 --min-np 2 -H h1:1,h2:1,h3:1 -- "$@" \
    --sample-log "$netns_state/$name.samples" $(weights_args "$trainer" "$name")
  [ -n "$watcher" ] && wait "$watcher"
  unset CHORUS_TEST_FAIL_AT_COMMIT
  [ "$case" = cut ] && ip -n "$netns_tag-h3" link set eth0 up
  [ $rc = 0 ] || fail "$name: chorusrun exited $rc"
  local why="ended on signal 9 \(Killed\)"
  [ "$case" = killed ] || why="did not come back within 15 s \(stopped, or cut off\)"
  expect_line "$name" "^chorusrun: round 2: 2 ranks on h1:1,h2:1 after worker w3 on h3 $why \(restart 1 of 2\) \(excluded: h3\)$" \
    "the second round's line names the worker, its host, why, and the layout"
  [ "$(grep -c '^chorusrun: round' "$netns_state/$name.log")" = 2 ] ||
    fail "$name: more than one reset"
  expect_line "$name" "chorus.elastic: rank [01] of 2 after the reset" "the survivors reset in place"
  expect_line "$name" "^chorus.elastic: resumed in place from commit 2$" "the job resumed commit 2"
  expect_line "$name" "^finished $epochs epochs on 2 ranks" "the job finished on h1 and h2"
  grep -q "^chorus.elastic: resumed from commit" "$netns_state/$name.log" &&
    fail "$name: a worker started again and restored a stored commit"
  "$python" "$check_samples" "$netns_state/$name.samples" $limit $epochs ||
    fail "$name: the samples after the commit were not each trained once"
  same_weights "$trainer" "$name" "$trainer.reference" ||
    fail "$name: the final weights differ from the reference's"
  # (A stopped or cut-off h3 keeps its own, as a lost host's memory would.)
  [ -e "$netns_state/$name.shm/chorus-elastic-$name/h1" ] ||
    [ -e "$netns_state/$name.shm/chorus-elastic-$name/h2" ] &&
    fail "$name: the commit stores outlived the finished training"
  return 0
}

reference python "${py_train[@]}"
in_place python killed h3:2 elastic_mnist.py "${py_train[@]}"
in_place python stopped h3:2:stop elastic_mnist.py "${py_train[@]}"
in_place python cut h3:2:stop elastic_mnist.py "${py_train[@]}"
if [ -n "$cpp_example" ]; then
  reference libtorch "${cpp_train[@]}"
  in_place libtorch killed h3:2 "$cpp_example" "${cpp_train[@]}"
  in_place libtorch stopped h3:2:stop "$cpp_example" "${cpp_train[@]}"
  in_place libtorch cut h3:2:stop "$cpp_example" "${cpp_train[@]}"
fi

# 3. Two failures in a row.
export CHORUS_ELASTIC_JOB=twice CHORUS_TEST_FAIL_AT_COMMIT=h4:2,h3:3
job twice 180 --max-restarts 2 --min-np 2 -H h1:1,h2:1,h3:1,h4:1 -- "${py_train[@]}" \
  --sample-log "$netns_state/twice.samples"
unset CHORUS_TEST_FAIL_AT_COMMIT
[ $rc = 0 ] || fail "twice: chorusrun exited $rc"
expect_line twice "^chorusrun: round 2: 3 ranks on h1:1,h2:1,h3:1 after worker w4 on h4 .*\(restart 1 of 2\)" \
  "the first reset leaves h4 out"
expect_line twice "^chorusrun: round 3: 2 ranks on h1:1,h2:1 after worker w3 on h3 .*\(restart 2 of 2\)" \
  "the second reset leaves h3 out"
expect_line twice "^chorus.elastic: resumed in place from commit 3$" "the second reset resumed commit 3"
expect_line twice "^finished $epochs epochs on 2 ranks" "the job finished"
"$python" "$check_samples" "$netns_state/twice.samples" $limit $epochs ||
  fail "twice: the samples were not each trained once"

# 4. A failure during the reset itself.
export CHORUS_ELASTIC_JOB=reset_fails CHORUS_TEST_FAIL_AT_COMMIT=h3:2 CHORUS_TEST_FAIL_RESTORE=h2
job reset_fails 180 --max-restarts 2 --min-np 1 -H h1:1,h2:1,h3:1 -- "${py_train[@]}"
unset CHORUS_TEST_FAIL_AT_COMMIT CHORUS_TEST_FAIL_RESTORE
[ $rc = 0 ] || fail "reset_fails: chorusrun exited $rc"
expect_line reset_fails "CHORUS_TEST_FAIL_RESTORE: in the restore of commit 2: rank 1 on h2 is killed" \
  "h2 died in the second round's restore"
expect_line reset_fails "^chorusrun: round 3: 1 ranks on h1:1 after worker w2 on h2 .*\(restart 2 of 2\)" \
  "the third round is h1 alone"
expect_line reset_fails "^chorus.elastic: resumed in place from commit 2$" "the third round resumed commit 2"
expect_line reset_fails "^finished $epochs epochs on 1 ranks" "the job finished on h1"

# 5. A host added while the job runs: a worker starts on it and joins at the next commit.
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
job grow 180 --max-restarts 0 --host-discovery-script "$netns_state/discover" -- \
  "${py_train[@]}" --limit 20000 --sample-log "$netns_state/grow.samples"
wait
[ $rc = 0 ] || fail "grow: chorusrun exited $rc"
expect_line grow "^chorusrun: hosts added \(h3:1\)" "the discovery was noticed"
expect_line grow "^chorusrun: round 2: 3 ranks on h1:1,h2:1,h3:1$" "the round on 3 hosts"
expect_line grow "^chorus.elastic: resumed in place from commit [0-9]+$" "the grown job resumed a commit"
expect_line grow "^finished 1 epochs on 3 ranks" "the job finished on 3 ranks"
"$python" "$check_samples" "$netns_state/grow.samples" 20000 1 ||
  fail "grow: the samples were not each trained once"

echo "netns_elastic_inplace.sh: ok in $(( $(date +%s) - start )) s"
