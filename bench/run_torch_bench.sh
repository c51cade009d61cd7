#!/usr/bin/env bash
# Synthetic trainer benchmark: Chorus (examples/synthetic_benchmark, DistributedOptimizer;
# and, when DIR has the Python package, bench/python_synthetic.py under chorus.torch)
# against PyTorch DDP on gloo (bench/ddp_synthetic.py, Debian's python3-torch), same models,
# batch, optimizer, thread counts and rank counts, in one run.
#
# For each round and each model it runs, in an order that rotates from round to round so
# that no configuration always comes first or last: Chorus on 1 rank, DDP on 1 rank, Chorus
# on 2 ranks, DDP on 2 ranks (all under mpirun --bind-to none). It prints every result as
# it comes, then the medians over the rounds: images/s, Chorus / DDP on 2 ranks (the median
# of the per-round ratios, whose two runs were seconds apart, and its range), the scaling
# of each against its own 1-rank figure, and the CPU time of Chorus's background thread.
#
#   bench/run_torch_bench.sh [--build DIR] [--rounds N] [--steps N] [--warmup N]
#                            [--models "cnn mlp"] [--batch-size N] [--np N]
#
# DIR is a build tree configured with CHORUS_WITH_TORCH=ON (default: build). Defaults:
# 5 rounds, 30 timed steps after 5 warmup steps, batch 32 per rank, 2 ranks. Extra mpirun
# flags for experiments go in MPIRUN_ARGS (e.g. MPIRUN_ARGS="--mca mpi_yield_when_idle 1");
# CHORUS_* variables reach the Chorus runs as they are.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
rounds=5
steps=30
warmup=5
models="cnn mlp"
batch=32
np=2
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --batch-size) batch=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done

bin=$build/examples/synthetic_benchmark
if [[ ! -x $bin ]]; then
  echo "no $bin: configure with LibTorch and build the target synthetic_benchmark" >&2
  exit 1
fi
python=/usr/bin/python3
ddp=$root/bench/ddp_synthetic.py
if [[ $(id -u) == 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
read -r -a extra <<<"${MPIRUN_ARGS:-}"
results=$(mktemp)
trap 'rm -f "$results"' EXIT
port=$((29500 + RANDOM % 2000))

# run IMPL MODEL NP: one run, its RESULT line appended to $results with the round number.
run() {
  local impl=$1 model=$2 n=$3 round=$4 line
  local common=(--model "$model" --batch-size "$batch" --steps "$steps" --warmup "$warmup")
  local mpi=(mpirun --oversubscribe --bind-to none "${extra[@]}" -np "$n")
  local out
  if [[ $impl == py ]]; then  # the Python trainer under chorus.torch (bench/python_synthetic.py)
    out=$(PYTHONPATH=$build/python timeout 900 "${mpi[@]}" -x PYTHONPATH "$python" \
      "$root/bench/python_synthetic.py" "${common[@]}" 2>&1) || {
      echo "$out" >&2; echo "python $model np=$n failed" >&2; exit 1; }
  elif [[ $impl == chorus ]]; then
    out=$(timeout 900 "${mpi[@]}" "$bin" "${common[@]}" 2>&1) || {
      echo "$out" >&2; echo "chorus $model np=$n failed" >&2; exit 1; }
  else
    port=$((port + 1))
    out=$(MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 900 "${mpi[@]}" \
      -x MASTER_ADDR -x MASTER_PORT "$python" "$ddp" "${common[@]}" 2>&1) || {
      echo "$out" >&2; echo "ddp $model np=$n failed" >&2; exit 1; }
  fi
  line=$(grep '^RESULT ' <<<"$out")
  echo "round=$round $line" >>"$results"
  printf '  %-6s %-3s np=%d: %s\n' "$impl" "$model" "$n" \
    "$(sed -e 's/^RESULT //' -e 's/impl=[a-z_]* model=[a-z]* //' <<<"$line")"
}

echo "Chorus vs PyTorch DDP (gloo), synthetic trainer: batch $batch per rank, $steps timed" \
  "steps after $warmup, $rounds rounds, --bind-to none ${MPIRUN_ARGS:-}"
echo "host: $(nproc) cores; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
configs=("chorus 1" "ddp 1" "chorus $np" "ddp $np")
# The Python chorus.torch trainer joins the rotation when the build has the Python package.
if [[ -d $build/python/chorus ]]; then configs+=("py $np"); fi
for ((r = 1; r <= rounds; r++)); do
  echo "round $r/$rounds (load $(cut -d' ' -f1 /proc/loadavg))"
  for model in $models; do
    for ((k = 0; k < ${#configs[@]}; k++)); do
      c=${configs[$(((k + r - 1) % ${#configs[@]}))]}
      run ${c% *} "$model" ${c#* } "$r"
    done
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"

"$python" - "$results" "$np" <<'EOF'
import collections, statistics, sys

path, np_ = sys.argv[1], int(sys.argv[2])
runs = collections.defaultdict(dict)  # (impl, model, ranks) -> round -> fields
for line in open(path):
    f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
    runs[(f["impl"], f["model"], int(f["ranks"]))][int(f["round"])] = f

def med(key, field):
    return statistics.median(float(f[field]) for f in runs[key].values())

def paired(a, b):
    """Per-round ratios of ips_total of a over b, for the rounds both ran."""
    return [float(runs[a][r]["ips_total"]) / float(runs[b][r]["ips_total"])
            for r in sorted(set(runs[a]) & set(runs[b]))]

models = sorted({k[1] for k in runs}, key=lambda m: ["cnn", "mlp"].index(m) if m in ("cnn", "mlp") else 9)
print()
print(f"medians over rounds (images/s in total; [min..max] of the per-round values)")
print(f"{'model':6} {'Chorus 1':>9} {'DDP 1':>9} {'Chorus '+str(np_):>9} {'DDP '+str(np_):>9}"
      f"  {'Chorus/DDP np='+str(np_):>24}  {'scaling Chorus':>15} {'scaling DDP':>12}"
      f"  {'bg CPU ms/step':>15}")
for m in models:
    c1, d1, cn, dn = ("chorus", m, 1), ("ddp", m, 1), ("chorus", m, np_), ("ddp", m, np_)
    r = paired(cn, dn)
    sc, sd = paired(cn, c1), paired(dn, d1)
    bg = [float(f["bg_cpu_ms"]) for f in runs[cn].values()]
    print(f"{m:6} {med(c1,'ips_total'):9.1f} {med(d1,'ips_total'):9.1f} {med(cn,'ips_total'):9.1f}"
          f" {med(dn,'ips_total'):9.1f}  {statistics.median(r):8.3f} [{min(r):.2f}..{max(r):.2f}]"
          f"  {statistics.median(sc):15.3f} {statistics.median(sd):12.3f}"
          f"  {statistics.median(bg):8.2f} [{min(bg):.1f}..{max(bg):.1f}]")
print()
print("scaling: total images/s on", np_, "ranks over the same program on 1 rank, per round;")
print("on one host the ranks share the cores the 1-rank run had, so 1.0 is ideal there.")
print("bg CPU: CPU time of Chorus's chorus-bg thread per step on", np_, "ranks (mean over ranks).")
print("Chorus on", np_, "ranks (medians over rounds):")
for m in models:
    cn = ("chorus", m, np_)
    step_ms = [1e3 * float(f["batch"]) / float(f["ips_rank"]) for f in runs[cn].values()]
    wait = [float(f["sync_wait_ms"]) for f in runs[cn].values()]
    print(f"  {m}: mean step {statistics.median(step_ms):.1f} ms, step() waited "
          f"{statistics.median(wait):.2f} ms of it for reductions; Chorus process CPU "
          f"{med(cn, 'process_cpu_ms'):.1f} ms/step, DDP {med(('ddp', m, np_), 'process_cpu_ms'):.1f}")
# python_synthetic.py reports itself as impl=chorus_py.
if any(k[0] == "chorus_py" for k in runs):
    print("Python chorus.torch trainer (bench/python_synthetic.py) on", np_, "ranks, medians:")
    for m in models:
        pn, cn, dn = ("chorus_py", m, np_), ("chorus", m, np_), ("ddp", m, np_)
        if pn not in runs:
            continue
        rp, rc = paired(pn, dn), paired(pn, cn)
        enq = [float(f["enqueue_us"]) for f in runs[pn].values() if "enqueue_us" in f]
        print(f"  {m}: {med(pn, 'ips_total'):.1f} images/s; Python/DDP {statistics.median(rp):.3f} "
              f"[{min(rp):.2f}..{max(rp):.2f}], Python/C++ {statistics.median(rc):.3f}; "
              f"synchronize() waited {med(pn, 'sync_wait_ms'):.2f} ms/step"
              + (f"; allreduce_async enqueue from Python {statistics.median(enq):.2f} us/tensor"
                 if enq else ""))
EOF
