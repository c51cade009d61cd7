#!/usr/bin/env bash
# chorus-trace on a real job: 3 ranks with a timeline each (CHORUS_TIMELINE=...{rank}...),
# 30 steps, rank 1 computing 40 ms longer per step. Checks, with Python's own JSON reader:
#  - every rank wrote a file; ranks 1 and 2 say their clock offset to rank 0;
#  - merge: valid JSON, one process row per rank, events in time order, every rank's 30
#    steps, each negotiation marked with the rank that submitted last (mostly rank 1), the
#    others' waits on their trainer rows;
#  - summary: 30 steps, rank 1 the slowest in most of them, the others waiting for it;
#  - plot: a PNG of 1200 x 900 pixels;
#  - bad input: a rank given twice, a file that is not JSON, each named in the error.
#
#   trace_tool.sh CHORUS_TRACE RUN_MPI TRACE_JOBS
set -euo pipefail
trace=$1 run_mpi=$2 jobs=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
py=python3
[[ -x /usr/bin/python3 ]] && py=/usr/bin/python3

CHORUS_TIMELINE="$dir/t.{rank}.json" "$run_mpi" 3 120 "$jobs" steps 30 1 40
"$trace" merge -o "$dir/merged.json" "$dir"/t.0.json "$dir"/t.1.json "$dir"/t.2.json
"$trace" summary --json "$dir/steps.json" "$dir"/t.*.json | tee "$dir/summary.txt"
"$trace" plot -o "$dir/steps.png" "$dir/merged.json"

"$py" - "$dir" <<'PY'
import json, struct, sys
d = sys.argv[1]
def check(ok, what):
    if not ok:
        sys.exit("trace_tool: FAIL: " + what)

for r in range(3):
    events = json.load(open(f"{d}/t.{r}.json"))
    labels = [e for e in events if e.get("name") == "process_labels"]
    check((len(labels) == 1) == (r != 0), f"rank {r}'s clock label: {labels}")

merged = json.load(open(f"{d}/merged.json"))
names = sorted(e["pid"] for e in merged if e.get("name") == "process_name")
check(names == [0, 1, 2], f"process rows {names}")
timed = [e for e in merged if e.get("ph") != "M"]
check(all(a["ts"] <= b["ts"] for a, b in zip(timed, timed[1:])), "events out of time order")
check(merged.index(timed[0]) == len(merged) - len(timed), "metadata after events")
for r in range(3):
    steps = [e for e in timed if e["pid"] == r and e["name"] == "STEP"]
    check(len(steps) == 30, f"rank {r} has {len(steps)} steps")
negotiations = [e for e in timed if e["name"] == "NEGOTIATE"]
check(len(negotiations) >= 3 * 30 * 4, f"{len(negotiations)} negotiations")
last = [e["args"].get("last_rank") for e in negotiations]
check(None not in last, "a NEGOTIATE without last_rank")
check(last.count(1) > len(last) / 2, f"the slowed rank 1 submitted last in {last.count(1)} of {len(last)}")
for r in (0, 2):  # the others wait for rank 1 on their trainer row, every step or nearly
    waits = [e for e in timed if e["pid"] == r and e["name"] == "WAIT"]
    check(len(waits) >= 25, f"rank {r} has {len(waits)} WAIT events")

summary = json.load(open(f"{d}/steps.json"))
check(len(summary["steps"]) == 30, f"{len(summary['steps'])} steps in the summary")
slowest = [s["slowest_rank"] for s in summary["steps"]]
check(slowest.count(1) > 15, f"rank 1 slowest in {slowest.count(1)} of 30 steps: {slowest}")
def mean(rank, key):
    v = [x[key] for s in summary["steps"] for x in s["ranks"] if x["rank"] == rank]
    return sum(v) / len(v)
for r in (0, 2):
    check(mean(r, "peers_ms") > mean(1, "peers_ms"),
          f"rank {r} waits {mean(r, 'peers_ms'):.1f} ms for peers, the slow rank 1 {mean(1, 'peers_ms'):.1f}")

png = open(f"{d}/steps.png", "rb").read()
check(png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG")
check(struct.unpack(">II", png[16:24]) == (1200, 900), f"PNG size {struct.unpack('>II', png[16:24])}")
print("trace_tool: merge, summary and plot ok")
PY

# Bad input: each error names what is at fault.
if err=$("$trace" merge -o "$dir/x.json" "$dir/t.0.json" "$dir/t.0.json" 2>&1); then
  echo "trace_tool: FAIL: a rank given twice was merged"; exit 1
fi
grep -q "rank 0 is in both" <<<"$err" || { echo "trace_tool: FAIL: $err"; exit 1; }
printf '[\n{"name":"STEP",}\n]\n' >"$dir/bad.json"
if err=$("$trace" summary "$dir/bad.json" 2>&1); then
  echo "trace_tool: FAIL: a file that is not JSON was read"; exit 1
fi
grep -q "bad.json: line 2" <<<"$err" || { echo "trace_tool: FAIL: $err"; exit 1; }
echo "trace_tool: ok"
