#!/usr/bin/env bash
# How long an elastic job takes from a rank's death to training resumed, broken down, on fake
# hosts (tests/cluster/netns_lib.sh), on both of its paths: 3 hosts x 2 ranks run the elastic
# Fashion-MNIST examples; h3's ranks die after commit 2 (CHORUS_TEST_FAIL_AT_COMMIT), and the
# job resumes on h1 and h2 (4 ranks). Each line of chorusrun's output is stamped when it
# arrives, and the phases are read from it.
#
# Relaunched (chorusrun --max-restarts, on MPI):
#
#   detect + teardown  the ranks' death (their last log line) to chorusrun's restart line:
#                      the launcher noticed, ended the other ranks and exited
#   launch + init      the restart line to the relaunched rank 0's host table (processes
#                      started, Python or the program loaded, MPI and Chorus initialized)
#   setup              the trainer's own start after init (its data, its model) until the
#                      restore begins
#   restore            as the relaunched job reports it: the agreement on the newest commit
#                      and its broadcast and load
#   first step         the resumed line to the first batch's log line
#
# Reset in place (chorusrun --gloo --max-restarts, on the Gloo world):
#
#   detect             the ranks' death to the first survivor's "resets in place" line
#                      (chorusrun saw the process end and told the round)
#   reset              to the last survivor's "after the reset" line: Chorus shut down,
#                      the next round formed by chorusrun, and Chorus started in it
#   restore            to the "resumed in place" line: the agreement on the newest commit the
#                      survivors hold in memory, and its restore
#   first step         the resumed line to the first batch's log line
#
# Then a commit's cost on the training thread (bench/commit_bench.cc and commit_bench.py,
# 1.6-403 MB of state), in memory only and stored by the writer thread, with its share of a
# step at one commit per step and per 100 steps.
#
#   bench/elastic_recovery.sh [ROUNDS]      (needs root; BUILD_DIR, default <repo>/build)
set -u
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-${repo}/build}"
rounds=${1:-3}
fail() { echo "elastic_recovery.sh: FAIL: $*" >&2; exit 1; }
skip() { echo "elastic_recovery.sh: cannot run here: $*" >&2; exit 1; }
chorusrun=$build/launch/chorusrun
[ -x "$chorusrun" ] || fail "$chorusrun not found; build first"

. "$repo/tests/cluster/netns_lib.sh"
netns_up 3
export PYTHONPATH=$build/python CHORUS_LOG_LEVEL=info CHORUS_TEST_FAIL_AT_COMMIT=h3:2

stamp() { /usr/bin/python3 -u -c '
import sys, time
for line in sys.stdin:
    sys.stdout.write(f"{time.monotonic():.3f} {line}")'; }

# phases LOG: the five phases and the total in seconds, from a stamped log.
phases() {
  /usr/bin/python3 - "$1" <<'EOF'
import re, sys
t = {}
for line in open(sys.argv[1]):
    stamp, _, text = line.partition(" ")
    stamp = float(stamp)
    if "CHORUS_TEST_FAIL_AT_COMMIT" in text:
        t["death"] = stamp
    elif text.startswith("chorusrun: restart 1"):
        t["restart"] = stamp
    elif "rank map:" in text and "restart" in t and "init" not in t:
        t["init"] = stamp
    elif text.startswith("chorus.elastic: resumed"):
        t["resumed"] = stamp
        t["restore"] = float(re.search(r"in ([0-9.]+) s", text).group(1))
    elif "resumed" in t and "step" not in t and re.match(r"epoch \d+ batch", text):
        t["step"] = stamp
missing = [k for k in ("death", "restart", "init", "resumed", "step") if k not in t]
if missing:
    sys.exit(f"missing events: {missing}")
setup = t["resumed"] - t["restore"] - t["init"]
print(f"{t['restart'] - t['death']:.2f} {t['init'] - t['restart']:.2f} {setup:.2f} "
      f"{t['restore']:.2f} {t['step'] - t['resumed']:.2f} {t['step'] - t['death']:.2f}")
EOF
}

# phases_in_place LOG: the four phases and the total in seconds, from a stamped log.
phases_in_place() {
  /usr/bin/python3 - "$1" <<'EOF'
import re, sys
t = {}
for line in open(sys.argv[1]):
    stamp, _, text = line.partition(" ")
    stamp = float(stamp)
    if "CHORUS_TEST_FAIL_AT_COMMIT" in text:
        t["death"] = stamp
    elif "resets in place" in text and "detect" not in t:
        t["detect"] = stamp
    elif "after the reset" in text:
        t["reset"] = stamp
    elif text.startswith("chorus.elastic: resumed in place"):
        t["resumed"] = stamp
    elif "resumed" in t and "step" not in t and re.match(r"epoch \d+ batch", text):
        t["step"] = stamp
missing = [k for k in ("death", "detect", "reset", "resumed", "step") if k not in t]
if missing:
    sys.exit(f"missing events: {missing}")
print(f"{t['detect'] - t['death']:.2f} {t['reset'] - t['detect']:.2f} "
      f"{t['resumed'] - t['reset']:.2f} {t['step'] - t['resumed']:.2f} {t['step'] - t['death']:.2f}")
EOF
}

# run_case PATH NAME PROGRAM...: ROUNDS jobs of PROGRAM on PATH (relaunched or in_place),
# one table line of phases each.
run_case() {
  local path=$1 name=$2 r log
  shift 2
  local launch=(--max-restarts 1 --min-np 2 -H h1:2,h2:2,h3:2)
  if [ "$path" = in_place ]; then
    launch=(--gloo "${launch[@]}")
    echo "== $name, reset in place: 3 hosts x 2 ranks, h3 lost after commit 2, resumed on 4 ranks"
    printf '%-6s %8s %8s %8s %9s %8s\n' round detect reset restore "1st step" total
  else
    launch+=(--mpi-args "--bind-to none")
    echo "== $name, relaunched: 3 hosts x 2 ranks, h3 lost after commit 2, resumed on 4 ranks"
    printf '%-6s %10s %12s %8s %8s %9s %8s\n' round detect+td launch+init setup restore \
      "1st step" total
  fi
  for ((r = 1; r <= rounds; r++)); do
    log=$netns_state/$name.$path.$r.log
    CHORUS_ELASTIC_JOB=$name-$path-$r CHORUS_ELASTIC_DIR=$netns_state/shm \
      CHORUS_RSH="$netns_state/agent" timeout -k 5 300 "$chorusrun" "${launch[@]}" "$@" 2>&1 |
      stamp >"$log"
    grep -q "^[0-9.]* finished" "$log" || { tail -20 "$log"; fail "$name round $r did not finish"; }
    if [ "$path" = in_place ]; then
      printf '%-6s %8s %8s %8s %9s %8s\n' "$r" $(phases_in_place "$log") || fail "$name round $r"
    else
      printf '%-6s %10s %12s %8s %8s %9s %8s\n' "$r" $(phases "$log") || fail "$name round $r"
    fi
  done
}

train=(--epochs 1 --limit 3000 --batch-size 32 --batches-per-commit 5 --log-interval 1)
for path in relaunched in_place; do
  run_case $path python /usr/bin/python3 "$repo/examples/python/elastic_mnist.py" "${train[@]}" \
    --data-dir "$build/fashion-mnist"
  run_case $path libtorch "$build/examples/elastic_mnist" "${train[@]}" \
    --cache-dir "$build/examples/fashion-mnist"
done

# The commit's cost on the training thread, per MB, on both front ends: in memory only, and
# handed to the writer that stores it (CHORUS_ELASTIC_JOB set), with its share of a step.
# (Without the fault, whose commits wait for every node's store.)
unset CHORUS_TEST_FAIL_AT_COMMIT
for job in "" commit-bench; do
  CHORUS_ELASTIC_JOB=$job CHORUS_ELASTIC_DIR=$netns_state/shm mpirun -np 2 --bind-to none \
    "$build/bench/commit_bench" --reps 7 || fail "commit_bench"
  CHORUS_ELASTIC_JOB=$job CHORUS_ELASTIC_DIR=$netns_state/shm mpirun -np 2 --bind-to none \
    -x PYTHONPATH /usr/bin/python3 "$repo/bench/commit_bench.py" --reps 7 || fail "commit_bench.py"
done
