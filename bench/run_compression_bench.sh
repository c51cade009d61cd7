#!/usr/bin/env bash
# Gradient compression where the network is the bottleneck: fake hosts (network namespaces,
# tests/cluster/netns_lib.sh) whose links are limited to NETNS_RATE (default 1gbit) in each
# direction, as an Ethernet cluster's. The LibTorch Fashion-MNIST example (examples/mnist.cc)
# trains the same epochs with its gradients averaged as they are, as float16, and as PowerSGD
# factors of each rank asked for; each run reports the images/s of its last epoch, the bytes
# every host sent per training step (the links' counters), and the test accuracy, with the
# ratio of images/s to the uncompressed run. With --python, the Python example
# (examples/python/mnist.py, chorus.torch) likewise, timed whole. Needs root.
#
#   bench/run_compression_bench.sh [--layout HxR] [--epochs N] [--ranks "1 2 4"]
#                                  [--start N] [--limit N] [--python]
#
# Environment: BUILD_DIR (default <repo>/build), NETNS_RATE, DATA_DIR (the four Fashion-MNIST
# .gz files; default the dataset package's folder).
set -u
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-${repo}/build}"
data="${DATA_DIR:-/usr/share/datasets/fashion-mnist}"
layout=2x2 epochs=2 ranks="1 2 4" start=100 limit=0 python=0
while [ $# -gt 0 ]; do
  case "$1" in
    --layout) layout=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --start) start=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    --python) python=1; shift ;;
    *) echo "usage: $0 [--layout HxR] [--epochs N] [--ranks LIST] [--start N] [--limit N] [--python]" >&2
       exit 2 ;;
  esac
done
calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }
skip() { echo "run_compression_bench.sh: cannot run here: $*" >&2; exit 1; }
fail() { echo "run_compression_bench.sh: FAIL: $*" >&2; exit 1; }
mnist="$build/examples/mnist"
[ -x "$mnist" ] || fail "$mnist not found; build first (scripts/build.sh)"
export NETNS_RATE="${NETNS_RATE:-1gbit}"

. "$repo/tests/cluster/netns_lib.sh"
netns_layout "$layout"
np=$netns_np
hosts=$netns_hostlist
work=$(mktemp -d /tmp/chorus-compression.XXXXXX)
images=$([ "$limit" -gt 0 ] && echo "$limit" || echo 60000)
steps=$((epochs * ((images + np * 64 - 1) / (np * 64))))
modes="none fp16"
for r in $ranks; do modes+=" powersgd$r"; done

flags_of() {  # the example's flags for one mode
  case "$1" in
    none) ;;
    fp16) echo "--fp16" ;;
    powersgd*) echo "--powersgd ${1#powersgd} --powersgd-start $start" ;;
  esac
}

echo "=== Fashion-MNIST over ${layout%x*} hosts x ${layout#*x} ranks, links limited to $NETNS_RATE," \
  "$epochs epochs of $images images ($steps steps of 64 images per rank) ==="
echo
printf "%-10s %10s %8s %16s %10s\n" trainer mode images/s "MB sent/step" accuracy
base=""
for mode in $modes; do
  before=$(netns_tx_bytes)
  # shellcheck disable=SC2046
  timeout -k 5 1800 mpirun -np "$np" -H "$hosts" --bind-to none "$mnist" --epochs "$epochs" \
    --data-dir "$data" --cache-dir "$work/cache" --checkpoint "$work/ckpt.pt" \
    $([ "$limit" -gt 0 ] && echo "--limit $limit") $(flags_of "$mode") >"$work/$mode.log" 2>&1 ||
    fail "mnist $mode exited $? (log: $work/$mode.log)"
  sent=$(( $(netns_tx_bytes) - before ))
  line=$(grep "^epoch $epochs " "$work/$mode.log")
  ips=$(echo "$line" | sed -E 's/.* ([0-9]+) images\/s.*/\1/')
  acc=$(echo "$line" | sed -E 's/.*test accuracy ([0-9.]+%).*/\1/')
  [ -z "$base" ] && base=$ips
  printf "%-10s %10s %8s %16.3f %10s   (%.2fx)\n" libtorch "$mode" "$ips" \
    "$(calc "$sent / $steps / 1000000")" "$acc" "$(calc "$ips / $base")"
done

if [ "$python" = 1 ]; then
  pyflags_of() {
    case "$1" in
      none) ;;
      fp16) echo "--fp16-allreduce" ;;
      powersgd*) echo "--powersgd ${1#powersgd} --powersgd-start $start" ;;
    esac
  }
  base=""
  for mode in $modes; do
    before=$(netns_tx_bytes)
    t0=$(date +%s.%N)
    # shellcheck disable=SC2046
    PYTHONPATH="$build/python" timeout -k 5 1800 mpirun -np "$np" -H "$hosts" --bind-to none \
      -x PYTHONPATH /usr/bin/python3 "$repo/examples/python/mnist.py" --epochs "$epochs" \
      --lr 0.05 --momentum 0.9 --data-dir "$build/fashion-mnist" \
      $([ "$limit" -gt 0 ] && echo "--limit $limit") $(pyflags_of "$mode") \
      >"$work/py-$mode.log" 2>&1 || fail "mnist.py $mode exited $? (log: $work/py-$mode.log)"
    seconds=$(calc "$(date +%s.%N) - $t0")
    sent=$(( $(netns_tx_bytes) - before ))
    acc=$(sed -nE 's/^final test accuracy: ([0-9.]+%).*/\1/p' "$work/py-$mode.log")
    ips=$(calc "$images * $epochs / $seconds")
    [ -z "$base" ] && base=$ips
    printf "%-10s %10s %8.0f %16.3f %10s   (%.2fx, whole run)\n" python "$mode" "$ips" \
      "$(calc "$sent / $steps / 1000000")" "$acc" "$(calc "$ips / $base")"
  done
fi
rm -rf "$work"
