#!/usr/bin/env bash
# The user's part of the site rehearsal (scripts/site-rehearsal.sh), run inside the bare root
# as a user without root, with every dependency behind an Lmod module under /opt:
#   1. unpack the source tarball; configure with the modules loaded, from a module CUDA
#      while another toolkit sits at /usr/local/cuda; the summary must show each component
#      from its module;
#   2. build and install into ~/opt/chorus (with an Lmod modulefile);
#   3. with only `module load chorus`: chorusrun --check-build (libchorus loads), a C++
#      consumer built with find_package(Chorus) and no LibTorch, run on 2 ranks, and
#      chorusrun --check-job on 2 ranks;
#   4. with the torch module too: every library loads, and a LibTorch consumer (COMPONENTS
#      torch) runs on 2 ranks;
#   5. pip install of the Python package into a venv, and a horovod.torch-style script on 2
#      ranks through the venv's chorusrun.
#   rehearse.sh TARBALL OUT_DIR [CUDA_ARCH]
set -euo pipefail
tarball=$1 out=$2 cuda_arch=${3:-}
step() { echo; echo "== site rehearsal: $*"; }
fail() { echo "site rehearsal: FAIL: $*"; exit 1; }
expect() {  # expect TEXT WHAT: TEXT must contain WHAT
  grep -qF -- "$2" <<<"$1" || fail "expected '$2' in:"$'\n'"$1"
}
set +u
source /usr/share/lmod/lmod/init/bash
set -u
export MODULEPATH=/opt/modulefiles
cd "$HOME"
[ "$(id -u)" != 0 ] || fail "the rehearsal runs as root; it must not"

step "unpack $(basename "$tarball")"
mkdir -p chorus && tar -xzf "$tarball" -C chorus

step "configure with modules: $(module -t avail 2>&1 | grep -v '[:/]$' | tr '\n' ' ')"
modules=(openmpi hwloc spdlog torch pybind11)
cuda_args=()
if [ -n "$cuda_arch" ]; then
  modules+=(cuda nccl)
  cuda_args=(-DCMAKE_CUDA_ARCHITECTURES="$cuda_arch")
fi
module load "${modules[@]}"
cmake -S chorus -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$HOME/opt/chorus" \
  -DCHORUS_BUILD_TESTS=OFF -DCHORUS_BUILD_BENCH=OFF -DCHORUS_BUILD_EXAMPLES=OFF \
  -DCHORUS_MODULE_DEPENDS_ON=openmpi "${cuda_args[@]}" 2>&1 | tee "$out/configure.log"
summary=$(sed -n '/Chorus .* configured (/,/^$/p' "$out/configure.log")
[ -n "$summary" ] || fail "configure printed no summary"
echo "$summary" >"$out/summary.txt"
expect "$summary" "MPI             yes"
expect "$(grep '^  MPI ' <<<"$summary")" "/opt/openmpi/"
expect "$(grep '^  hwloc ' <<<"$summary")" "/opt/hwloc/"
expect "$(grep '^  LibTorch ' <<<"$summary")" "yes    1.13"
expect "$(grep '^  LibTorch ' <<<"$summary")" "/opt/torch/"
expect "$(grep '^  chorus.torch ' <<<"$summary")" "yes"
if [ -n "$cuda_arch" ]; then
  expect "$(grep '^  CUDA ' <<<"$summary")" "(from CUDA_HOME=/opt/cuda/"
  expect "$(grep '^  NCCL ' <<<"$summary")" "(from NCCL_HOME)"
fi

step "build and install"
cmake --build build -j "$(nproc)"
cmake --install build | tail -n 3
module purge

step "only the chorus module"
module use "$HOME/opt/chorus/share/modulefiles"
module load chorus
module -t list 2>&1 | tee "$out/modules.txt"
for var in LD_LIBRARY_PATH CMAKE_PREFIX_PATH PYTHONPATH; do echo "$var=${!var:-}"; done
chorusrun --version
chorusrun --check-build | tee "$out/check-build.txt"
# libchorus needs nothing loaded; libchorus_torch needs LibTorch, checked below with it.
expect "$(cat "$out/check-build.txt")" "$HOME/opt/chorus/lib/libchorus.so.0: loads"
cmake -S chorus/tests/package/consumer -B consumer >/dev/null
cmake --build consumer >/dev/null
run=$(timeout -k 5 120 chorusrun -np 2 ./consumer/consumer 2>&1) || { echo "$run"; fail "C++ consumer"; }
echo "$run"
expect "$run" "sum over 2 ranks = 3"
run=$(timeout -k 5 120 chorusrun --check-job -np 2 2>&1) || { echo "$run"; fail "chorusrun --check-job"; }
echo "$run" | tee "$out/check-job.txt"
expect "$run" "job check: 2 ranks on 1 host(s)"
expect "$run" "host memory    median"

step "a LibTorch consumer (module load torch)"
module load torch
chorusrun --check-build | tee "$out/check-build-torch.txt"
if grep -q 'does not load' "$out/check-build-torch.txt"; then fail "a library does not load"; fi
cmake -S chorus/tests/package/consumer -B torch-consumer -DCONSUMER_WITH_TORCH=ON >/dev/null
cmake --build torch-consumer >/dev/null
run=$(timeout -k 5 180 chorusrun -np 2 ./torch-consumer/torch_consumer 2>&1) || { echo "$run"; fail "LibTorch consumer"; }
echo "$run"

step "pip install into a venv, and a horovod.torch-style script on 2 ranks"
module purge
module load openmpi torch pybind11
python3 -m venv --system-site-packages "$HOME/venv"
source "$HOME/venv/bin/activate"
CHORUS_BUILD_DIR=$HOME/build pip install --no-build-isolation --no-index --no-deps --quiet ./chorus/bindings/python
[ "$(command -v chorusrun)" = "$HOME/venv/bin/chorusrun" ] || fail "chorusrun is not the venv's"
chorusrun --check-build | tee "$out/check-build-venv.txt"
cat >train.py <<'PY'
import sys

import torch

import chorus.torch as hvd

hvd.init()
total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum)
print(f"rank {hvd.rank()}/{hvd.size()} in {sys.prefix}: sum {total.item():g}", flush=True)
hvd.shutdown()
PY
run=$(timeout -k 5 180 chorusrun -np 2 python train.py 2>&1) || { echo "$run"; fail "the Python job"; }
echo "$run"
expect "$run" "rank 0/2 in $HOME/venv: sum 3"
expect "$run" "rank 1/2 in $HOME/venv: sum 3"
echo
echo "site rehearsal: the user's part passed"
