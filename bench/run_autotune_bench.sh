#!/usr/bin/env bash
# The autotuner where the network is the bottleneck: fake hosts (network namespaces,
# tests/cluster/netns_lib.sh) whose links are limited to NETNS_RATE (default 1gbit) in each
# direction, as an Ethernet cluster's. In one run, each synthetic trainer (the LibTorch
# examples/synthetic_benchmark and, with --python, bench/python_synthetic.py under
# chorus.torch) trains untuned, with the settings of the environment (Chorus's defaults, or
# those a job script exports: HOROVOD_CYCLE_TIME=0.1, say), and then with HOROVOD_AUTOTUNE=1,
# as a Horovod job script turns it on. Both runs take the same --warmup steps untimed (long enough for the
# search to end: each setting costs a sample of CHORUS_AUTOTUNE_STEPS_PER_SAMPLE steps, plus
# the round its agreement takes) and then time --steps steps; it prints images/s, their ratio,
# the bytes every host sent per step over all the run's steps (the search's included), and the
# autotuner's info line, and keeps each log
# (CHORUS_AUTOTUNE_LOG) for `chorus-trace autotune`. Needs root.
#
#   bench/run_autotune_bench.sh [--layout HxR] [--model cnn|mlp] [--warmup N] [--steps N]
#                               [--python] [--search coordinate|grid] [--keep DIR]
#
# Environment: BUILD_DIR (default <repo>/build), NETNS_RATE; the rest reaches the ranks (the
# fake hosts' agent passes the caller's environment on), CHORUS_AUTOTUNE_* included.
set -u
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-${repo}/build}"
layout=2x2 model=cnn warmup=150 steps=40 python=0 search=coordinate keep=""
while [ $# -gt 0 ]; do
  case "$1" in
    --layout) layout=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --python) python=1; shift ;;
    --search) search=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    *) echo "usage: $0 [--layout HxR] [--model cnn|mlp] [--warmup N] [--steps N] [--python]" \
         "[--search coordinate|grid] [--keep DIR]" >&2
       exit 2 ;;
  esac
done
calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }
skip() { echo "run_autotune_bench.sh: cannot run here: $*" >&2; exit 1; }
fail() { echo "run_autotune_bench.sh: FAIL: $*" >&2; exit 1; }
synthetic="$build/examples/synthetic_benchmark"
[ -x "$synthetic" ] || fail "$synthetic not found; build first (scripts/build.sh)"
export NETNS_RATE="${NETNS_RATE:-1gbit}"
export CHORUS_AUTOTUNE_STEPS_PER_SAMPLE="${CHORUS_AUTOTUNE_STEPS_PER_SAMPLE:-5}"
export CHORUS_AUTOTUNE_WARMUP_SAMPLES="${CHORUS_AUTOTUNE_WARMUP_SAMPLES:-1}"
export CHORUS_AUTOTUNE_SEARCH="$search"

. "$repo/tests/cluster/netns_lib.sh"
netns_layout "$layout"
np=$netns_np
hosts=$netns_hostlist
work=$(mktemp -d /tmp/chorus-autotune.XXXXXX)

echo "=== synthetic $model over ${layout%x*} hosts x ${layout#*x} ranks, links limited to $NETNS_RATE:" \
  "$warmup untimed steps, then $steps timed; search $search," \
  "$CHORUS_AUTOTUNE_STEPS_PER_SAMPLE steps per sample ==="
echo
printf "%-9s %-9s %10s %8s %16s\n" trainer settings images/s ratio "MB sent/step"
trainers="libtorch"
[ "$python" = 1 ] && trainers+=" python"
for trainer in $trainers; do
  case "$trainer" in
    libtorch) cmd=("$synthetic") ;;
    python) cmd=(/usr/bin/python3 "$repo/bench/python_synthetic.py") ;;
  esac
  base=""
  for mode in untuned autotune; do
    log="$work/$trainer-$mode.log"
    csv="$work/$trainer-autotune.csv"
    tune=()
    [ "$mode" = autotune ] && tune=(-x HOROVOD_AUTOTUNE=1 -x "HOROVOD_AUTOTUNE_LOG=$csv"
                                   -x CHORUS_LOG_LEVEL=info)
    before=$(netns_tx_bytes)
    PYTHONPATH="$build/python" timeout -k 5 3000 mpirun -np "$np" -H "$hosts" --bind-to none \
      -x PYTHONPATH -x CHORUS_AUTOTUNE_STEPS_PER_SAMPLE -x CHORUS_AUTOTUNE_WARMUP_SAMPLES \
      -x CHORUS_AUTOTUNE_SEARCH "${tune[@]}" "${cmd[@]}" --model "$model" --warmup "$warmup" \
      --steps "$steps" >"$log" 2>&1 || fail "$trainer $mode exited $? (log: $log)"
    sent=$(( $(netns_tx_bytes) - before ))
    ips=$(sed -nE 's/^RESULT .* ips_total=([0-9.]+).*/\1/p' "$log")
    [ -n "$ips" ] || fail "no RESULT line in $log"
    [ -z "$base" ] && base=$ips
    printf "%-9s %-9s %10.1f %7.2fx %16.3f   (all %d steps)\n" "$trainer" "$mode" "$ips" \
      "$(calc "$ips / $base")" "$(calc "$sent / ($warmup + $steps) / 1000000")" \
      "$((warmup + steps))"
    if [ "$mode" = autotune ]; then
      won=$(grep -o "autotune: .*" "$log" | head -1)
      [ -n "$won" ] || fail "$trainer: the search did not end within $warmup steps (log: $log)"
      echo "          $won"
    fi
  done
done
if [ -n "$keep" ]; then
  mkdir -p "$keep" && cp "$work"/*.csv "$keep"/ && echo "logs kept in $keep"
fi
rm -rf "$work"
