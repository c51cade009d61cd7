#!/usr/bin/env bash
# The GPU check: runs Chorus's whole GPU path on a GPU machine that has no Open MPI, from the
# kit that scripts/gpu-kit.sh made here (sent along as .gpu-kit). One command:
#
#   scripts/gpu-check.sh [--kit DIR] [--out DIR] [--budget SECONDS] [--checks LIST]
#
# It prints the device, driver, CUDA, NCCL and torch versions, then runs each check under
# its own time limit (and all of them within --budget, default 450 s), so that one hang
# cannot eat the rest:
#   0. set-up: every binary of the kit finds its libraries; the kit's mpirun starts 2 ranks
#      of a CPU test;
#   1. the GPU tests of the kit's build tree (ctest -L '^gpu$'): kernels, collectives on NCCL
#      (1 rank) and on MPI (2-4 ranks sharing the GPU), the forced-MPI path, NCCL errors;
#   2. compute-sanitizer memcheck on the kernel tests;
#   3. gpu_pack_bench, 160 x 100k and 1,000 x 1k floats, against a device-to-device copy;
#   4. nccl_allreduce_bench: Chorus's allreduce on NCCL against raw NCCL, 4 B to 64 MiB;
#   5. Chorus::torch and chorus.torch built against the machine's torch (started at once,
#      in the background, while 1-4 use the GPU), then their CUDA tests on 1 and 2 ranks;
#   6. the LibTorch and the Python synthetic trainers on CUDA against PyTorch DDP on NCCL,
#      1 rank each, same model and batch;
#   7. the GPU path's defect tests (gpu.defect.*: a failed collective's handle, the GPU
#      timeout, a node whose NCCL set-up fails, flat GPU allreduces by default; the
#      output-order test runs with 5's build; those labelled multigpu run in check 10);
#   8. NCCL at n > 1 on the one GPU (gpu.multirank.*: ranks sharing it over NCCL's sockets,
#      CHORUS_TEST_SHARED_GPU): the collectives suite and the comparison with the host path
#      at 2-4 ranks, the hierarchical allreduce on two fake hosts, a rank killed mid-collective;
#   9. many small batches (4 KiB allreduces, one per batch) against raw NCCL: batches per
#      second and the cost per batch, 1,000 on 1 rank, 100 on 2 ranks sharing the GPU;
#  10. with N >= 2 GPUs (nvidia-smi), one rank per GPU at np = N: the collectives suite,
#      nccl_allreduce_bench (64 MiB >= 0.95x raw), the defect tests (gpu.defect.*, multigpu
#      ones included) one rank per GPU, and with N >= 4 two fake hosts of N/2 GPUs, each rank
#      its own (tests/gpu/multirank_rank.sh, MULTIRANK_GPUS=own): the hierarchical allreduce,
#      and a 64 MiB allreduce flat against hierarchical; then the trainers against DDP on
#      NCCL (>= 1.0x).
# Checks 7-9 run while 5's build goes on; the summary lists rows in check order. --checks
# (say 7,8,9) runs those alone, with the set-up (0) always, for a second run on what
# changed; check 6 needs 5's build, which runs when either is asked for.
# Without a CUDA device each GPU check says so and is skipped; what needs no device (0, and
# the build of 5) still runs. It writes DIR/gpu-summary.md (default DIR: $OUT, else
# ./gpu-check-out), one row per check, and 7 logs beside it: 0-setup, 1-gpu-tests (checks
# 1, 7, 8), 2-memcheck, 3-benches (3, 4, 9), 5-torch, 6-trainers, 10-multi-gpu. Exit status:
# 0 when no check failed, 1 otherwise. Write nothing else into DIR on a machine that returns
# at most 8 files.
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
kit=$repo/.gpu-kit
out=${OUT:-$repo/gpu-check-out}
budget=480
checks=all
while [[ $# -gt 0 ]]; do
  case $1 in
    --kit) kit=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --checks) checks=,$2,; shift 2 ;;
    -h|--help) sed -n '2,44p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
deadline=$(($(date +%s) + budget))
summary=$out/gpu-summary.md
rows=()
failed=0 passed=0 skipped=0

# wanted NUMBER: --checks asks for check NUMBER (all do without --checks).
wanted() { [[ $checks == all || $checks == *",$1,"* ]]; }
# row NUMBER CHECK RESULT FIGURES TARGET: one line of the summary, echoed as it comes.
row() {
  rows+=("| $1 | $2 | $3 | $4 | $5 |")
  case $3 in
    passed*) passed=$((passed + 1)) ;;
    skipped*) skipped=$((skipped + 1)) ;;
    *) failed=$((failed + 1)) ;;
  esac
  echo "gpu-check: [$1] $2: $3${4:+ — $4}"
}
# limit SECONDS: SECONDS, or what is left of the budget when that is less.
limit() {
  local left=$((deadline - $(date +%s)))
  ((left < $1)) && echo "$((left > 0 ? left : 1))" || echo "$1"
}
# run LOG SECONDS COMMAND...: runs COMMAND under its limit, output appended to LOG.
run() {
  local log=$1 secs
  secs=$(limit "$2")
  shift 2
  echo "\$ $* (limit ${secs}s)" >>"$log"
  timeout -k 10 "$secs" "$@" >>"$log" 2>&1
}
# out_of_time: true once fewer than 10 s of the budget are left.
out_of_time() {
  (($(date +%s) + 10 > deadline))
}
field() {  # field NAME LINE: the value of NAME=value in a RESULT line
  sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"
}

# --- 0. set-up --------------------------------------------------------------------------------
setup_log=$out/0-setup.log
: >"$setup_log"
# shellcheck source=scripts/gpu-env.sh
if ! source "$repo/scripts/gpu-env.sh" "$kit" >>"$setup_log" 2>&1; then
  cat "$setup_log" >&2
  row 0 "set-up" "failed: the kit cannot be used (0-setup.log)" "" "kit usable"
fi
build=${KIT_BINARY_DIR:-}
python=${GPU_KIT_PYTHON:-}

versions=$(
  # The kit's record: a repository copied to another machine may carry a stale .git.
  echo "kit and build made ${KIT_MADE:-?} from commit ${KIT_COMMIT:-?}"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 |
      sed 's/^/device, driver, memory: /'
  else
    echo "device: no nvidia-smi on this machine"
  fi
  command -v nvcc >/dev/null && echo "nvcc: $(nvcc --version | tail -1)"
  echo "NCCL: ${GPU_KIT_NCCL_LIB:-none found}"
  if [[ -n $python ]]; then
    "$python" - <<'EOF' 2>&1
import torch
nccl = torch.cuda.nccl.version() if torch.cuda.is_available() else "n/a (no device)"
print(f"torch {torch.__version__} (CUDA {torch.version.cuda}, NCCL {nccl}), "
      f"devices: {torch.cuda.device_count()}")
EOF
  else
    echo "torch: no python3 that imports torch"
  fi
  echo "Open MPI: $(mpirun --version 2>&1 | head -1) from $(command -v mpirun)"
)
echo "$versions" | tee -a "$setup_log"

device=""
if [[ -n $build && -x $build/tests/gpu/gpu_probe ]]; then
  if probe=$("$build/tests/gpu/gpu_probe" 2>&1); then
    device=yes
  fi
  echo "gpu_probe: ${probe:-device found}" >>"$setup_log"
fi
no_device="skipped: ${probe:-no CUDA device}"
no_device=${no_device/skipped: SKIPPED: /skipped: }
# A GPU that the driver lists but CUDA cannot use is a failure, not an absence.
if [[ -z $device && -n $build ]] && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  no_device="failed: nvidia-smi lists a GPU, but CUDA says: ${probe:-nothing}"
fi

if [[ ${#rows[@]} -eq 0 ]]; then
  # Every ELF file of the kit must find its libraries (NCCL and CUDA's are the machine's).
  missing=$(find "$kit/root" "$kit/build" -type f \( -name '*.so*' -o -perm -u+x \) |
    while read -r f; do
      [[ $(head -c4 "$f" | tr -d '\0') == $'\x7fELF' ]] || continue
      ldd "$f" 2>/dev/null | awk -v f="${f#"$kit"/}" '/not found/ {print f ": " $1}'
    done)
  if [[ -n $missing ]]; then
    echo "$missing" >>"$setup_log"
    row 0 "set-up: kit libraries, mpirun of a CPU test" \
        "failed: $(wc -l <<<"$missing") missing libraries (0-setup.log)" "" "none missing"
  elif run "$setup_log" 120 ctest --test-dir "$build" --output-on-failure \
       -R '^mpi[.]waiting_trainers[.]np2$'; then
    row 0 "set-up: kit libraries, mpirun of a CPU test" "passed" \
        "every kit binary finds its libraries; mpi.waiting_trainers.np2 passed" "all"
  else
    row 0 "set-up: kit libraries, mpirun of a CPU test" \
        "failed: mpi.waiting_trainers.np2 under the kit's mpirun (0-setup.log)" "" "passes"
  fi
fi
setup_ok=$([[ ${rows[0]} == *"| passed |"* ]] && echo yes)
[[ -z $setup_ok ]] && no_device="skipped: set-up failed"

# --- 5, started first: the build against this machine's torch ---------------------------------
configured() {  # configured OPTION: the build of check 5 has OPTION on
  grep -q "^$1:BOOL=ON" "$torch_build/CMakeCache.txt" 2>/dev/null
}
torch_log=$out/5-torch.log
: >"$torch_log"
torch_build=${TMPDIR:-/tmp}/chorus-gpu-check-torch
build_pid=""
if [[ -n $setup_ok ]] && { wanted 5 || wanted 6; }; then
  nccl_dir=$(dirname "${GPU_KIT_NCCL_LIB:-/none/lib/x}")
  # zlib (the examples): the kit's header, the machine's library.
  zlib=$(ldconfig -p 2>/dev/null | awk '/libz[.]so[.]1 .*x86-64/ {print $NF; exit}')
  configure=(cmake -S "$repo" -B "$torch_build" -G Ninja -DCMAKE_BUILD_TYPE=Release
             -DCMAKE_CUDA_ARCHITECTURES=90 -DCHORUS_BUILD_BENCH=OFF
             "-DCHORUS_PYTHON_EXECUTABLE=$python" "-DZLIB_INCLUDE_DIR=$GPU_KIT/root/usr/include"
             "-DZLIB_LIBRARY=${zlib:-/lib/x86_64-linux-gnu/libz.so.1}")
  if [[ -n $GPU_KIT_NCCL_LIB && -f $(dirname "$nccl_dir")/include/nccl.h ]]; then
    configure+=("-DCHORUS_NCCL_LIBRARY=$GPU_KIT_NCCL_LIB"
                "-DCHORUS_NCCL_INCLUDE_DIR=$(dirname "$nccl_dir")/include")
  fi
  jobs=$(( $(nproc) > 4 ? $(nproc) - 4 : 2 ))
  (
    rm -rf "$torch_build"
    run "$torch_log" 300 "${configure[@]}" || exit 1
    # What configure found decides what is built: the core always, the adapter and its
    # tests with LibTorch, the Python module when Python's headers and pybind11 are there.
    targets=(chorus)
    if configured CHORUS_WITH_TORCH; then
      targets+=(gpu_probe chorus_torch torch_cuda_test torch_output_order_test
                synthetic_benchmark)
    fi
    configured CHORUS_WITH_PYTHON && targets+=(chorus_python)
    run "$torch_log" 300 cmake --build "$torch_build" -j "$jobs" --target "${targets[@]}"
  ) &
  build_pid=$!
fi
# --- 1. the GPU tests -------------------------------------------------------------------------
tests_log=$out/1-gpu-tests.log
: >"$tests_log"
# ctest_counts LOG: "N passed, N failed, N skipped" from CTest's output.
ctest_counts() {
  local total failed_n skipped_n
  # "50% tests passed, 2 tests failed out of 4"; CMake 4 says "100% tests passed out of 4"
  # when none failed.
  local summary
  summary=$(grep '% tests passed' "$1" | tail -1)
  total=$(sed -n 's/.* out of \([0-9]*\).*/\1/p' <<<"$summary")
  failed_n=$(sed -n 's/.*passed, \([0-9]*\) tests failed.*/\1/p' <<<"$summary")
  skipped_n=$(grep -c '^[[:space:]]*[0-9]* - .* (Skipped)$' "$1")
  echo "$((${total:-0} - ${failed_n:-0} - skipped_n)) passed, ${failed_n:-0} failed," \
       "$skipped_n skipped"
}
# ctest_check NUMBER CHECK TARGET SECONDS CTEST_ARGS...: runs the kit build's tests that
# CTEST_ARGS select, appends their output to 1-gpu-tests.log, and adds the check's row:
# without a device every test must skip; with one every test must pass and none skip.
ctest_check() {
  local n=$1 name=$2 target=$3 secs=$4 part rc counts
  shift 4
  if [[ -z $setup_ok ]]; then
    row "$n" "$name" "skipped: set-up failed" "" "$target"
    return
  fi
  part=$(mktemp)
  run "$part" "$secs" ctest --test-dir "$build" --output-on-failure --no-tests=error "$@"
  rc=$?
  counts=$(ctest_counts "$part")
  cat "$part" >>"$tests_log"
  rm -f "$part"
  if [[ -z $device ]]; then
    if [[ $rc == 0 && $counts == "0 passed, 0 failed,"* ]]; then
      row "$n" "$name" "$no_device" "$counts" "$target"
    else
      row "$n" "$name" "failed: without a device every test must skip" "$counts" "$target"
    fi
  elif [[ $rc == 0 && $counts == *" 0 failed, 0 skipped" && $counts != "0 passed"* ]]; then
    row "$n" "$name" "passed" "$counts" "$target"
  else
    row "$n" "$name" "failed (1-gpu-tests.log)" "$counts" "$target"
  fi
}
# The torch and Python GPU tests belong to the build of check 5; the defect and multi-rank
# tests are checks 7 and 8.
wanted 1 && ctest_check 1 "GPU tests (ctest -L ^gpu$)" "all pass" 240 -L '^gpu$' -LE 'torch|python' \
    -E '^gpu[.](defect|multirank)[.]' -j 3

# --- 2. compute-sanitizer -------------------------------------------------------------------
memcheck_log=$out/2-memcheck.log
: >"$memcheck_log"
sanitizer=$(command -v compute-sanitizer ||
            ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda-*/bin/compute-sanitizer \
               /opt/nvidia/*/compute-sanitizer 2>/dev/null | head -1)
if ! wanted 2; then
  :
elif [[ -z $device ]]; then
  row 2 "compute-sanitizer memcheck, kernel tests" "$no_device" "" "0 errors"
elif [[ -z $sanitizer ]]; then
  row 2 "compute-sanitizer memcheck, kernel tests" "failed: no compute-sanitizer found" "" \
      "0 errors"
elif run "$memcheck_log" 150 "$sanitizer" --tool memcheck --error-exitcode 3 \
     --leak-check full "$build/tests/gpu/gpu_kernels_test"; then
  row 2 "compute-sanitizer memcheck, kernel tests" "passed" \
      "$(grep -o 'ERROR SUMMARY: [0-9]* errors' "$memcheck_log" | tail -1)" "0 errors"
else
  row 2 "compute-sanitizer memcheck, kernel tests" "failed (2-memcheck.log)" \
      "$(grep -o 'ERROR SUMMARY: [0-9]* errors' "$memcheck_log" | tail -1)" "0 errors"
fi

# --- 3. pack/unpack against a device copy ----------------------------------------------------
pack_log=$out/3-benches.log
: >"$pack_log"
if ! wanted 3; then
  :
elif [[ -z $device ]]; then
  row 3 "gpu_pack_bench vs device copy" "$no_device" "" ">= 0.8x one copy of the same bytes"
else
  figures=() verdict=passed
  for shape in "160 100000" "1000 1000"; do
    read -r n floats <<<"$shape"
    if ! run "$pack_log" 60 "$build/bench/gpu_pack_bench" "$n" "$floats"; then
      verdict="failed (3-benches.log)"
      figures+=("${n} x ${floats}: did not finish")
      continue
    fi
    line=$(grep "^RESULT tensors=$n floats=$floats " "$pack_log" | tail -1)
    ratio=$(field ratio_span "$line")
    figures+=("${n} x ${floats}: $(field chorus_gbs "$line") GB/s, ${ratio:-?}x one copy, $(
               field ratio_memcpy "$line")x per-tensor copies; back to back $(
               field ratio_back_to_back "$line")x, enqueue $(field chorus_host_us "$line") µs vs $(
               field span_host_us "$line") µs")
    if [[ $(field gated "$line") != 1 ]]; then
      verdict="failed: the device time includes the host's enqueueing (3-benches.log)"
    fi
    if [[ -z $ratio ]]; then
      verdict="failed: no result (3-benches.log)"
    elif awk -v r="$ratio" 'BEGIN {exit !(r < 0.8)}'; then
      verdict="failed: below target"
    fi
  done
  row 3 "gpu_pack_bench vs device copy" "$verdict" "$(IFS=';'; echo "${figures[*]}")" \
      ">= 0.8x one copy of the same bytes"
  sed -i 's/^RESULT /RESULT-seen /' "$pack_log"  # checks 4 and 9 read their own
fi

# --- 4. allreduce on NCCL against raw NCCL ----------------------------------------------------
nccl_log=$pack_log
nccl_target="64 MiB >= 0.95x raw with 2+ GPUs; on 1 rank, overhead in µs"
if ! wanted 4; then
  :
elif [[ -z $device ]]; then
  row 4 "allreduce on NCCL vs raw NCCL, 1 rank" "$no_device" "" "$nccl_target"
elif run "$nccl_log" 90 mpirun --bind-to none -np 1 "$build/bench/nccl_allreduce_bench"; then
  # The bench exits 0 only when every element of every size was right. On one rank NCCL's
  # in-place allreduce moves no data, so raw is an empty stream round trip and the ratio
  # compares fixed costs: the figure that matters there is Chorus's overhead in µs. The
  # 0.95x target applies with one rank per GPU on two or more GPUs.
  figures=$(grep '^RESULT ' "$nccl_log" | grep ' tensors=1 ' | while read -r line; do
    echo -n "$(field size_bytes "$line") B: $(field ratio "$line")x, +$(field overhead_us "$line") µs; "
  done)
  big=$(grep '^RESULT ' "$nccl_log" | grep 'size_bytes=67108864 tensors=1 ' | head -1)
  if [[ -z $big ]]; then
    row 4 "allreduce on NCCL vs raw NCCL, 1 rank" "failed: no 64 MiB result" "$figures" \
        "$nccl_target"
  else
    row 4 "allreduce on NCCL vs raw NCCL, 1 rank" "passed: results right; ratio not judged" \
        "$figures" "$nccl_target"
  fi
else
  row 4 "allreduce on NCCL vs raw NCCL, 1 rank" "failed (3-benches.log)" "" "$nccl_target"
fi

# --- 7. the defects' tests ---------------------------------------------------------------------
wanted 7 && ctest_check 7 "GPU defect tests (gpu.defect.*)" "all pass" 240 \
    -R '^gpu[.]defect[.]' -LE 'torch|python|multigpu'

# --- 8. NCCL at n > 1 on one GPU -----------------------------------------------------------------
# Each test declares its ranks (PROCESSORS); sockets on loopback carry NCCL's traffic. The
# torch and Python ones run in check 5, with the machine's torch.
wanted 8 && ctest_check 8 "multi-rank NCCL on one GPU (gpu.multirank.*)" "all pass" 240 \
    -R '^gpu[.]multirank[.]' -LE 'torch|python' -j 4

# --- 9. many small batches against raw NCCL -----------------------------------------------------
overlap_target="<= 5 µs per batch over raw NCCL, 1 rank (aim; not judged)"
if ! wanted 9; then
  :
elif [[ -z $device ]]; then
  row 9 "small batches vs raw NCCL" "$no_device" "" "$overlap_target"
else
  # One tensor per batch: a 4 KiB threshold holds one 4 KiB tensor. Two processes on one
  # GPU take turns on it, so each of their NCCL allreduces waits for the other's turn: they
  # run a tenth of the batches, or the run outlasts its limit.
  overlap_figures="" verdict=passed
  for np in 1 2; do
    launcher=(mpirun --bind-to none -np "$np")
    small=(--sizes 4K --tensors 1000 --rounds 7 --iters 5)
    if [[ $np == 2 ]]; then
      launcher+=("$repo/tests/gpu/multirank_rank.sh")
      small=(--sizes 4K --tensors 100 --rounds 3 --iters 2)
    fi
    if CHORUS_FUSION_THRESHOLD=4096 run "$pack_log" 120 "${launcher[@]}" \
         "$build/bench/nccl_allreduce_bench" "${small[@]}"; then
      line=$(grep '^RESULT size_bytes=4096 ' "$pack_log" | tail -1)
      overlap_figures+="${np} rank(s), $(field tensors "$line") batches: $(
                 field batches_per_s "$line") batches/s, raw NCCL $(field raw_per_s "$line")/s, +$(
                 field overhead_us "$line") µs per batch; "
    else
      verdict="failed (3-benches.log)"
      overlap_figures+="${np} rank(s): did not finish; "
    fi
    sed -i 's/^RESULT /RESULT-seen /' "$pack_log"
  done
  row 9 "small batches vs raw NCCL" "$verdict" "$overlap_figures" "$overlap_target"
fi

# --- 5. Chorus::torch and chorus.torch on the machine's torch ----------------------------------
built=""
if [[ -n $build_pid ]]; then
  wait "$build_pid" && built=yes
fi
torch_target="builds against this torch; CUDA tests pass on 1 and 2 ranks"
if ! wanted 5; then
  :
elif [[ -z $setup_ok ]]; then
  row 5 "Chorus::torch, chorus.torch on CUDA" "skipped: set-up failed" "" "$torch_target"
elif out_of_time; then
  row 5 "Chorus::torch, chorus.torch on CUDA" "failed: the budget ran out (5-torch.log)" "" \
      "$torch_target"
elif [[ -z $built ]]; then
  row 5 "Chorus::torch, chorus.torch on CUDA" "failed: the build (5-torch.log)" "" "$torch_target"
elif [[ -z $python ]]; then
  row 5 "Chorus::torch, chorus.torch on CUDA" \
      "skipped: no python3 that imports torch; the core built against the kit" "" "$torch_target"
elif ! configured CHORUS_WITH_TORCH; then
  row 5 "Chorus::torch, chorus.torch on CUDA" "failed: CMake did not find $python's LibTorch" \
      "(5-torch.log)" "$torch_target"
else
  # This build's own GPU tests: those of the adapter, on torch's CUDA (label torch).
  tests='^(torch[.]cuda|gpu[.]defect[.]output_order|gpu[.]multirank[.]torch)[.]'
  configured CHORUS_WITH_PYTHON && tests='^(torch[.]cuda|gpu[.]defect[.]output_order|'\
'gpu[.]multirank[.](torch|python)|gpu[.]python)[.]'
  run "$torch_log" 200 ctest --test-dir "$torch_build" -R "$tests" --output-on-failure \
      --no-tests=error
  rc=$?
  counts=$(ctest_counts "$torch_log")
  # The Python module is part of the check: configure says why it was left out.
  python_note=""
  configured CHORUS_WITH_PYTHON ||
    python_note="; chorus.torch not built: $(grep -o 'no Python module.*' "$torch_log" | head -1)"
  if [[ -z $device ]]; then
    if [[ $rc == 0 && $counts == "0 passed, 0 failed,"* && -z $python_note ]]; then
      row 5 "Chorus::torch, chorus.torch on CUDA" "$no_device; the build passed" "$counts" \
          "$torch_target"
    else
      row 5 "Chorus::torch, chorus.torch on CUDA" \
          "failed: without a device every test must skip, and all must build$python_note" \
          "$counts" "$torch_target"
    fi
  elif [[ $rc == 0 && $counts == *" 0 failed, 0 skipped" && $counts != "0 passed"* &&
          -z $python_note ]]; then
    row 5 "Chorus::torch, chorus.torch on CUDA" "passed" "$counts" "$torch_target"
  else
    row 5 "Chorus::torch, chorus.torch on CUDA" "failed (5-torch.log)$python_note" "$counts" \
        "$torch_target"
  fi
fi

# --- 6. trainers against DDP ----------------------------------------------------------------
trainers_log=$out/6-trainers.log
: >"$trainers_log"
trainer_target="overhead <= 3% vs DDP (NCCL), 1 rank"
if ! wanted 6; then
  :
elif [[ -z $device ]]; then
  row 6 "synthetic trainers vs PyTorch DDP" "$no_device" "" "$trainer_target"
elif [[ -z $built || -z $python ]]; then
  row 6 "synthetic trainers vs PyTorch DDP" "skipped: check 5 built nothing to run" "" \
      "$trainer_target"
elif out_of_time; then
  row 6 "synthetic trainers vs PyTorch DDP" "failed: the budget ran out" "" "$trainer_target"
else
  # Same model, batch and thread count for all three; mpirun does not bind (DDP runs
  # without it), and the order rotates from round to round. One rank has nothing to
  # exchange, and one round differs from the next by up to a fifth: five rounds each, and
  # the figures give each trainer's range beside its median.
  common=(--device cuda --model cnn --batch-size 64 --steps 100 --warmup 10 --threads 4)
  declare -A ips=()
  order=(cpp py ddp)
  for round in 0 1 2 3 4; do
    for i in 0 1 2; do
      impl=${order[(i + round) % 3]}
      case $impl in
        cpp) run "$trainers_log" 60 mpirun --bind-to none -np 1 \
               "$torch_build/examples/synthetic_benchmark" "${common[@]}" ;;
        py) run "$trainers_log" 60 mpirun --bind-to none -np 1 \
              -x PYTHONPATH="$torch_build/python" "$python" "$repo/bench/python_synthetic.py" \
              "${common[@]}" ;;
        ddp) MASTER_PORT=$((29600 + round)) run "$trainers_log" 60 "$python" \
               "$repo/bench/ddp_synthetic.py" "${common[@]}" ;;
      esac
      rc=$?
      line=$(grep '^RESULT ' "$trainers_log" | tail -1)
      # A run counts only when it also ended well.
      [[ $rc == 0 && -n $line ]] && ips[$impl]+="$(field ips_total "$line") "
      sed -i 's/^RESULT /RESULT-seen /' "$trainers_log"
    done
  done
  median() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
  range() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -g | awk 'NR == 1 {lo = $1} {hi = $1}
    END {printf "%.0f-%.0f, %d rounds", lo, hi, NR}'; }
  cpp=$(median "${ips[cpp]:-}") py=$(median "${ips[py]:-}") ddp=$(median "${ips[ddp]:-}")
  if [[ -z $cpp || -z $py || -z $ddp ]]; then
    row 6 "synthetic trainers vs PyTorch DDP" "failed: a trainer gave no result (6-trainers.log)" \
        "images/s: LibTorch ${cpp:-?}, Python ${py:-?}, DDP ${ddp:-?}" "$trainer_target"
  else
    figures=$(awk -v c="$cpp" -v p="$py" -v d="$ddp" -v cr="$(range "${ips[cpp]}")" \
      -v pr="$(range "${ips[py]}")" -v dr="$(range "${ips[ddp]}")" 'BEGIN {
      printf "images/s, medians: DDP %.0f (%s); LibTorch %.0f (%s), overhead %+.1f%%; " \
             "Python %.0f (%s), overhead %+.1f%%", d, dr, c, cr, 100 * (d - c) / d, p, pr,
             100 * (d - p) / d }')
    if awk -v c="$cpp" -v p="$py" -v d="$ddp" 'BEGIN {exit !(c >= 0.97 * d && p >= 0.97 * d)}'
    then
      row 6 "synthetic trainers vs PyTorch DDP" "passed" "$figures" "$trainer_target"
    else
      row 6 "synthetic trainers vs PyTorch DDP" "failed: above target" "$figures" \
          "$trainer_target"
    fi
  fi
fi

# --- 10. one rank per GPU, where there are several -------------------------------------------------
multi_log=$out/10-multi-gpu.log
: >"$multi_log"
multi_target="collectives and defect tests pass; 64 MiB >= 0.95x raw NCCL; hierarchical passes; trainers >= 1.0x DDP"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if ! wanted 10; then
  :
elif [[ -z $device ]]; then
  row 10 "np = N GPUs, one rank each" "$no_device" "" "$multi_target"
elif ((gpus < 2)); then
  row 10 "np = N GPUs, one rank each" "skipped: nvidia-smi lists $gpus GPU; runs with 2 or more" \
      "" "$multi_target"
elif out_of_time; then
  row 10 "np = $gpus GPUs, one rank each" "failed: the budget ran out" "" "$multi_target"
else
  problems=() multi_figures=""
  np=(mpirun --bind-to none -np "$gpus")
  run "$multi_log" 120 "${np[@]}" "$build/tests/gpu/gpu_collectives_test" ||
    problems+=("collectives suite")
  if run "$multi_log" 120 "${np[@]}" "$build/bench/nccl_allreduce_bench"; then
    big=$(grep '^RESULT size_bytes=67108864 ' "$multi_log" | tail -1)
    ratio=$(field ratio "$big")
    multi_figures+="64 MiB ${ratio:-?}x raw NCCL; "
    awk -v r="${ratio:-0}" 'BEGIN {exit !(r >= 0.95)}' || problems+=("64 MiB below 0.95x")
  else
    problems+=("nccl_allreduce_bench")
  fi
  # The defect tests, one rank per GPU: a test of np ranks uses GPUs 0..np-1 (local rank mod
  # N), each rank its own GPU once N covers the largest (4 ranks) under MULTIRANK_GPUS=own.
  part=$(mktemp)
  if ((gpus >= 4)); then
    MULTIRANK_GPUS=own run "$part" 240 ctest --test-dir "$build" --output-on-failure \
      --no-tests=error -R '^gpu[.]defect[.]' -LE 'torch|python'
  else
    run "$part" 240 ctest --test-dir "$build" --output-on-failure --no-tests=error \
      -R '^gpu[.]defect[.]' -LE 'torch|python'
  fi
  defect_counts=$(ctest_counts "$part")
  cat "$part" >>"$multi_log"
  rm -f "$part"
  multi_figures+="defect tests: $defect_counts; "
  [[ $defect_counts == *" 0 failed, 0 skipped" && $defect_counts != "0 passed"* ]] ||
    problems+=("defect tests")
  # Two fake hosts of N/2 ranks, each rank its own GPU; NCCL's hosts are the fake hosts
  # (NVLink inside one, sockets on loopback between them). The hierarchical allreduce (NCCL at
  # both levels) runs the collectives suite, then a 64 MiB allreduce flat against hierarchical.
  if ((gpus >= 4 && gpus % 2 == 0)); then
    fake=(env MULTIRANK_RANKS_PER_HOST=$((gpus / 2)) MULTIRANK_GPUS=own)
    if run "$multi_log" 120 "${fake[@]}" CHORUS_HIERARCHICAL_ALLREDUCE=1 CHORUS_LOG_LEVEL=debug \
         "${np[@]}" "$repo/tests/gpu/multirank_rank.sh" "$build/tests/gpu/gpu_collectives_test" &&
       grep -q 'nccl inside each node and across nodes' "$multi_log"; then
      multi_figures+="hierarchical on 2 x $((gpus / 2)) passed; "
    else
      problems+=("hierarchical allreduce")
    fi
    # chorus_us of each, CHORUS_HIERARCHICAL_ALLREDUCE=0 (flat) then 1.
    sed -i 's/^RESULT /RESULT-seen /' "$multi_log"
    timed=()
    for mode in 0 1; do
      run "$multi_log" 120 "${fake[@]}" CHORUS_HIERARCHICAL_ALLREDUCE=$mode "${np[@]}" \
        "$repo/tests/gpu/multirank_rank.sh" "$build/bench/nccl_allreduce_bench" --sizes 64M ||
        problems+=("64 MiB bench with CHORUS_HIERARCHICAL_ALLREDUCE=$mode")
      line=$(grep '^RESULT size_bytes=67108864 ' "$multi_log" | tail -1)
      sed -i 's/^RESULT /RESULT-seen /' "$multi_log"
      timed+=("$(field chorus_us "$line")")
    done
    multi_figures+="64 MiB on 2 x $((gpus / 2)): flat ${timed[0]:-?} µs, "
    multi_figures+="hierarchical ${timed[1]:-?} µs; "
  fi
  if [[ -n $built && -n $python ]] && configured CHORUS_WITH_TORCH; then
    common=(--device cuda --model cnn --batch-size 64 --steps 100 --warmup 10 --threads 4)
    run "$multi_log" 120 "${np[@]}" "$torch_build/examples/synthetic_benchmark" "${common[@]}"
    cpp=$(field ips_total "$(grep '^RESULT ' "$multi_log" | tail -1)")
    sed -i 's/^RESULT /RESULT-seen /' "$multi_log"
    MASTER_PORT=29610 run "$multi_log" 120 "${np[@]}" "$python" "$repo/bench/ddp_synthetic.py" \
      "${common[@]}"
    ddp=$(field ips_total "$(grep '^RESULT ' "$multi_log" | tail -1)")
    multi_figures+="images/s LibTorch ${cpp:-?}, DDP ${ddp:-?}"
    awk -v c="${cpp:-0}" -v d="${ddp:-0}" 'BEGIN {exit !(d > 0 && c >= d)}' ||
      problems+=("LibTorch trainer below DDP")
  else
    problems+=("no trainer built (check 5)")
  fi
  if [[ ${#problems[@]} == 0 ]]; then
    row 10 "np = $gpus GPUs, one rank each" "passed" "$multi_figures" "$multi_target"
  else
    row 10 "np = $gpus GPUs, one rank each" \
        "failed: $(IFS=','; echo "${problems[*]}") (10-multi-gpu.log)" "$multi_figures" "$multi_target"
  fi
fi

# --- the summary -------------------------------------------------------------------------------
{
  echo "# Chorus GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo
  sed 's/^/    /' <<<"$versions"
  echo
  echo "| # | check | result | figures | target |"
  echo "|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}" | sort -t '|' -k 2 -n
  echo
  echo "$passed passed, $failed failed, $skipped skipped in $((budget - deadline + $(date +%s))) s"
} >"$summary"
cat "$summary"
[[ $failed == 0 ]]
