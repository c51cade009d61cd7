#!/usr/bin/env bash
# Sharded data parallelism against the unsharded optimizer and against PyTorch's
# ZeroRedundancyOptimizer, in one run: bench/sharded_bench (LibTorch) and
# bench/sharded_bench.py (chorus.torch, and torch DDP on gloo) train the same MLP with Adam.
#
# For each rank count and round it runs every mode once, in an order that rotates from
# round to round, and prints each RESULT line; then, per rank count, the median step time of
# each mode, its ratio to the unsharded DistributedOptimizer of the same language (and, for
# Python, stage 2 against ZeroRedundancyOptimizer), the optimizer state and gradients each
# rank holds, and the peak resident set of the largest rank.
#
# With --cap MB it runs instead, at the largest rank count, each mode on the widths given
# (--widths) under a limit of MB on each rank's private memory (ulimit -d: the heap and
# private mappings, where tensors live) and prints the widest MLP that trains in each.
#
#   bench/run_sharded_bench.sh [--build DIR] [--np "2 4"] [--rounds N] [--steps N]
#                              [--width N] [--cap MB --widths "2048 3072 ..."]
#                              [--modes "cpp:stage2 py:zero ..."]
#
# The --cap runs get MALLOC_MMAP_THRESHOLD_=131072, so that freed tensors go back to the
# system at once and the limit meets the live memory, not what the allocator kept.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
nps="2 4"
rounds=3
steps=20
width=2048
cap=""
widths="2048 3072 4096 5120 6144"
modes="cpp:plain cpp:buckets cpp:stage1 cpp:stage2 py:plain py:buckets py:stage1 py:stage2 py:ddp py:zero"
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --np) nps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --width) width=$2; shift 2 ;;
    --cap) cap=$2; shift 2 ;;
    --widths) widths=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
bin=$build/bench/sharded_bench
[[ -x $bin ]] || { echo "no $bin: build the target sharded_bench" >&2; exit 1; }
if [[ $(id -u) == 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH} CHORUS_LOG_LEVEL=warn
results=$(mktemp)
trap 'rm -f "$results"' EXIT

# run IMPL:MODE NP WIDTH [CAP_KB]: one run; its RESULT line on stdout (nothing if it failed).
run() {
  local impl=${1%%:*} mode=${1#*:} np=$2 w=$3 limit=${4:-unlimited}
  local program=("$bin")
  [[ $impl == py ]] && program=(/usr/bin/python3 "$root/bench/sharded_bench.py")
  timeout 600 mpirun --oversubscribe --bind-to none -np "$np" \
    -x MASTER_PORT=$((29500 + RANDOM % 2000)) \
    bash -c 'ulimit -d "$0"; exec "$@"' "$limit" "${program[@]}" --mode "$mode" \
    --width "$w" --steps "$steps" 2>/dev/null | grep '^RESULT' || true
}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }

if [[ -n $cap ]]; then
  export MALLOC_MMAP_THRESHOLD_=131072
  np=${nps##* }
  echo "widest MLP that trains at np $np with each rank's private memory under $cap MB"
  for m in $modes; do
    best=none
    for w in $widths; do
      line=$(run "$m" "$np" "$w" $((cap * 1024)))
      [[ -n $line ]] || break
      echo "$line"
      best="$w ($(field params <<<"$line") parameters)"
    done
    printf '%-12s widest %s\n' "$m" "$best"
  done
  exit 0
fi

for np in $nps; do
  for ((r = 0; r < rounds; ++r)); do
    read -r -a order <<<"$modes"
    n=${#order[@]}
    for ((k = 0; k < n; ++k)); do
      m=${order[$(((k + r * 3) % n))]}
      line=$(run "$m" "$np" "$width")
      echo "$line"
      echo "$line" >>"$results"
    done
  done
done

echo
printf '%-4s %-5s %-8s %9s %9s %9s %9s %10s\n' np impl mode step_ms vs_plain state_mb grad_mb peak_rss
for np in $nps; do
  for m in $modes; do
    impl=${m%%:*} mode=${m#*:}
    tag=$([[ $impl == py ]] && echo python || echo cpp)
    lines=$(grep "impl=$tag mode=$mode np=$np " "$results" || true)
    [[ -n $lines ]] || continue
    median() { field "$1" <<<"$lines" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
    ms=$(median step_ms)
    base=$(grep "impl=$tag mode=plain np=$np " "$results" | field step_ms | sort -g |
      awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    printf '%-4s %-5s %-8s %9s %9.3f %9s %9s %10s\n' "$np" "$impl" "$mode" "$ms" \
      "$(awk -v a="$ms" -v b="$base" 'BEGIN {print a / b}')" "$(median state_mb)" \
      "$(median grad_mb)" "$(median peak_rss_mb)"
  done
  zero=$(grep "impl=python mode=zero np=$np " "$results" | field step_ms | sort -g |
    awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  stage2=$(grep "impl=python mode=stage2 np=$np " "$results" | field step_ms | sort -g |
    awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  [[ -n $zero && -n $stage2 ]] &&
    echo "np $np: ZeroRedundancyOptimizer / chorus stage 2 step time $(awk -v a="$zero" -v b="$stage2" 'BEGIN {printf "%.2f", a / b}')"
done
