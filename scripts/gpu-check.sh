#!/usr/bin/env bash
# The GPU check: runs Chorus's whole GPU path on a GPU machine that has no Open MPI, from the
# kit that scripts/gpu-kit.sh made here (sent along as .gpu-kit). One command:
#
#   scripts/gpu-check.sh [--kit DIR] [--out DIR] [--budget SECONDS]
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
#      1 rank each, same model and batch.
# Without a CUDA device each GPU check says so and is skipped; what needs no device (0, and
# the build of 5) still runs. It writes DIR/gpu-summary.md (default DIR: $OUT, else
# ./gpu-check-out), one row per check, and one log per check beside it (7 at most). Exit
# status: 0 when no check failed, 1 otherwise. Write nothing else into DIR on a machine that
# returns at most 8 files.
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
kit=$repo/.gpu-kit
out=${OUT:-$repo/gpu-check-out}
budget=450
while [[ $# -gt 0 ]]; do
  case $1 in
    --kit) kit=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
deadline=$(($(date +%s) + budget))
summary=$out/gpu-summary.md
rows=()
failed=0 passed=0 skipped=0

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
       -R '^mpi[.]collectives_test[.]np2$'; then
    row 0 "set-up: kit libraries, mpirun of a CPU test" "passed" \
        "every kit binary finds its libraries; mpi.collectives_test.np2 passed" "all"
  else
    row 0 "set-up: kit libraries, mpirun of a CPU test" \
        "failed: mpi.collectives_test.np2 under the kit's mpirun (0-setup.log)" "" "passes"
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
if [[ -n $setup_ok ]]; then
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
      targets+=(gpu_probe chorus_torch torch_cuda_test synthetic_benchmark)
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
if [[ -z $setup_ok ]]; then
  row 1 "GPU tests (ctest -L ^gpu$)" "skipped: set-up failed" "" "all pass"
else
  # The torch and Python GPU tests belong to the build of check 5.
  run "$tests_log" 240 ctest --test-dir "$build" -L '^gpu$' -LE 'torch|python' \
      --output-on-failure --no-tests=error -j 3
  rc=$?
  counts=$(ctest_counts "$tests_log")
  if [[ -z $device ]]; then
    if [[ $rc == 0 && $counts == "0 passed, 0 failed,"* ]]; then
      row 1 "GPU tests (ctest -L ^gpu$)" "$no_device" "$counts" "all pass"
    else
      row 1 "GPU tests (ctest -L ^gpu$)" "failed: without a device every test must skip" \
          "$counts" "all pass"
    fi
  elif [[ $rc == 0 && $counts == *" 0 failed, 0 skipped" && $counts != "0 passed"* ]]; then
    row 1 "GPU tests (ctest -L ^gpu$)" "passed" "$counts" "all pass"
  else
    row 1 "GPU tests (ctest -L ^gpu$)" "failed (1-gpu-tests.log)" "$counts" "all pass"
  fi
fi

# --- 2. compute-sanitizer -------------------------------------------------------------------
memcheck_log=$out/2-memcheck.log
: >"$memcheck_log"
sanitizer=$(command -v compute-sanitizer ||
            ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda-*/bin/compute-sanitizer \
               /opt/nvidia/*/compute-sanitizer 2>/dev/null | head -1)
if [[ -z $device ]]; then
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
pack_log=$out/3-pack-bench.log
: >"$pack_log"
if [[ -z $device ]]; then
  row 3 "gpu_pack_bench vs device copy" "$no_device" "" ">= 0.8x one copy of the same bytes"
else
  figures=() verdict=passed
  for shape in "160 100000" "1000 1000"; do
    read -r n floats <<<"$shape"
    if ! run "$pack_log" 60 "$build/bench/gpu_pack_bench" "$n" "$floats"; then
      verdict="failed (3-pack-bench.log)"
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
      verdict="failed: the device time includes the host's enqueueing (3-pack-bench.log)"
    fi
    if [[ -z $ratio ]]; then
      verdict="failed: no result (3-pack-bench.log)"
    elif awk -v r="$ratio" 'BEGIN {exit !(r < 0.8)}'; then
      verdict="failed: below target"
    fi
  done
  row 3 "gpu_pack_bench vs device copy" "$verdict" "$(IFS=';'; echo "${figures[*]}")" \
      ">= 0.8x one copy of the same bytes"
fi

# --- 4. allreduce on NCCL against raw NCCL ----------------------------------------------------
nccl_log=$out/4-nccl-bench.log
: >"$nccl_log"
nccl_target="64 MiB >= 0.95x raw with 2+ GPUs; on 1 rank, overhead in µs"
if [[ -z $device ]]; then
  row 4 "allreduce on NCCL vs raw NCCL, 1 rank" "$no_device" "" "$nccl_target"
elif run "$nccl_log" 90 mpirun --bind-to none -np 1 "$build/bench/nccl_allreduce_bench"; then
  # The bench exits 0 only when every element of every size was right. On one rank NCCL's
  # in-place allreduce moves no data, so raw is an empty stream round trip and the ratio
  # compares fixed costs: the figure that matters there is Chorus's overhead in µs. The
  # 0.95x target applies with one rank per GPU on two or more GPUs.
  figures=$(grep '^RESULT ' "$nccl_log" | while read -r line; do
    echo -n "$(field size_bytes "$line") B: $(field ratio "$line")x, +$(field overhead_us "$line") µs; "
  done)
  big=$(grep '^RESULT ' "$nccl_log" | grep 'size_bytes=67108864 ' | head -1)
  if [[ -z $big ]]; then
    row 4 "allreduce on NCCL vs raw NCCL, 1 rank" "failed: no 64 MiB result" "$figures" \
        "$nccl_target"
  else
    row 4 "allreduce on NCCL vs raw NCCL, 1 rank" "passed: results right; ratio not judged" \
        "$figures" "$nccl_target"
  fi
else
  row 4 "allreduce on NCCL vs raw NCCL, 1 rank" "failed (4-nccl-bench.log)" "" "$nccl_target"
fi

# --- 5. Chorus::torch and chorus.torch on the machine's torch ----------------------------------
built=""
if [[ -n $build_pid ]]; then
  wait "$build_pid" && built=yes
fi
torch_target="builds against this torch; CUDA tests pass on 1 and 2 ranks"
if [[ -z $setup_ok ]]; then
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
  tests='^torch[.]cuda[.]'
  configured CHORUS_WITH_PYTHON && tests='^(torch[.]cuda|gpu[.]python)[.]'
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
if [[ -z $device ]]; then
  row 6 "synthetic trainers vs PyTorch DDP" "$no_device" "" "$trainer_target"
elif [[ -z $built || -z $python ]]; then
  row 6 "synthetic trainers vs PyTorch DDP" "skipped: check 5 built nothing to run" "" \
      "$trainer_target"
elif out_of_time; then
  row 6 "synthetic trainers vs PyTorch DDP" "failed: the budget ran out" "" "$trainer_target"
else
  # Same model, batch and thread count for all three; mpirun does not bind (DDP runs
  # without it), and the order rotates from round to round.
  common=(--device cuda --model cnn --batch-size 64 --steps 100 --warmup 10 --threads 4)
  declare -A ips=()
  order=(cpp py ddp)
  for round in 0 1 2; do
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
  cpp=$(median "${ips[cpp]:-}") py=$(median "${ips[py]:-}") ddp=$(median "${ips[ddp]:-}")
  if [[ -z $cpp || -z $py || -z $ddp ]]; then
    row 6 "synthetic trainers vs PyTorch DDP" "failed: a trainer gave no result (6-trainers.log)" \
        "images/s: LibTorch ${cpp:-?}, Python ${py:-?}, DDP ${ddp:-?}" "$trainer_target"
  else
    figures=$(awk -v c="$cpp" -v p="$py" -v d="$ddp" 'BEGIN {
      printf "images/s, median of 3: DDP %.0f; LibTorch %.0f, overhead %+.1f%%; " \
             "Python %.0f, overhead %+.1f%%", d, c, 100 * (d - c) / d, p, 100 * (d - p) / d }')
    if awk -v c="$cpp" -v p="$py" -v d="$ddp" 'BEGIN {exit !(c >= 0.97 * d && p >= 0.97 * d)}'
    then
      row 6 "synthetic trainers vs PyTorch DDP" "passed" "$figures" "$trainer_target"
    else
      row 6 "synthetic trainers vs PyTorch DDP" "failed: above target" "$figures" \
          "$trainer_target"
    fi
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
  printf '%s\n' "${rows[@]}"
  echo
  echo "$passed passed, $failed failed, $skipped skipped in $((budget - deadline + $(date +%s))) s"
} >"$summary"
cat "$summary"
[[ $failed == 0 ]]
