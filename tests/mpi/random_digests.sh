#!/usr/bin/env bash
# Results do not depend on fusion or on the response cache (docs/design: "a fused allreduce
# gives the same bits as the same tensors reduced one by one"). Runs random_rounds with one
# seed and arbitrary float values under several CHORUS_FUSION_THRESHOLD and
# CHORUS_CACHE_CAPACITY settings (the same on every rank of a job), then checks that
#  - each rank's digest of every output is the same under every setting, and
#  - outputs that every member of a set must share (allreduce, allgather, broadcast) have
#    the same digest on every rank.
#   random_digests.sh RUN_MPI NP PROGRAM SEED ROUNDS WORKDIR
# RUN_MPI is tests/mpi/run_mpi.sh (a hard timeout per job). Exit code 0 when all agree.
set -u
run_mpi=$1 np=$2 program=$3 seed=$4 rounds=$5 dir=$6
# threshold (bytes) and cache capacity; "-" leaves the variable unset (the default).
settings=("- -" "0 -" "4096 -" "67108864 -" "- 0" "4096 0" "- 8")
rm -rf "$dir" && mkdir -p "$dir" || exit 2
names=()
for s in "${settings[@]}"; do
  read -r threshold cache <<<"$s"
  name="threshold_${threshold/-/default}.cache_${cache/-/default}"
  names+=("$name")
  mkdir -p "$dir/$name"
  vars=()
  [ "$threshold" != - ] && vars+=("CHORUS_FUSION_THRESHOLD=$threshold")
  [ "$cache" != - ] && vars+=("CHORUS_CACHE_CAPACITY=$cache")
  echo "== $name: ${vars[*]:-defaults}"
  env "${vars[@]}" "$run_mpi" "$np" 120 "$program" --seed "$seed" --rounds "$rounds" \
    --values arbitrary --digest "$dir/$name/digest" 2>&1 | grep -E "rank 0 ok|MISMATCH|FAIL"
  rc=${PIPESTATUS[0]}
  if [ "$rc" -ne 0 ]; then echo "random_digests: FAIL: the run under $name exited with $rc"; exit 1; fi
done

ok=1
base=${names[0]}
for ((r = 0; r < np; r++)); do
  lines=$(wc -l <"$dir/$base/digest.$r")
  [ "$lines" -gt 0 ] || { echo "random_digests: FAIL: rank $r wrote no digest"; ok=0; }
  for name in "${names[@]:1}"; do
    if ! cmp -s "$dir/$base/digest.$r" "$dir/$name/digest.$r"; then
      echo "random_digests: FAIL: rank $r: outputs differ between $base and $name (round name hash):"
      diff "$dir/$base/digest.$r" "$dir/$name/digest.$r" | head -10
      ok=0
    fi
  done
done
# Shared outputs: one hash per (round, name) across the ranks that hold it.
if ! awk '$4 == 1 { k = $1 " " $2; if (k in h && h[k] != $3) { print "  " k ": " h[k] " vs " $3; bad = 1 } h[k] = $3 }
          END { exit bad }' "$dir/$base"/digest.*; then
  echo "random_digests: FAIL: ranks hold different bits of an output they must share (above)"
  ok=0
fi
if [ $ok -eq 1 ]; then
  echo "random_digests: PASS: seed $seed, $np ranks, ${#names[@]} settings, $(cat "$dir/$base"/digest.* | wc -l) outputs each"
fi
[ $ok -eq 1 ]
