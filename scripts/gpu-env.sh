# Sourced, not run: `source scripts/gpu-env.sh KIT` sets up a shell on the GPU machine to use
# the kit that scripts/gpu-kit.sh made (default: .gpu-kit beside scripts/):
#   - Open MPI, PMIx and the other Debian libraries from KIT/root, relocated with OPAL_PREFIX
#     and the PMIx prefixes, first on PATH and LD_LIBRARY_PATH;
#   - NCCL and the CUDA runtime of the machine: those of Python's torch (the nvidia-* wheels)
#     when it has them, so that every process of the check loads the same libraries torch
#     does; else /usr/local/cuda; the CUDA runtime else the kit's copy;
#   - the build tree's absolute paths: the kit's build/ answers at the path it was made at.
# It exports GPU_KIT, GPU_KIT_NCCL_LIB (the libnccl.so.2 in use, or empty) and
# GPU_KIT_PYTHON, and returns non-zero with a message when the kit is unusable.

gpu_env_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GPU_KIT=$(cd "${1:-$gpu_env_repo/.gpu-kit}" 2>/dev/null && pwd) || {
  echo "gpu-env: no kit at ${1:-$gpu_env_repo/.gpu-kit}: make it with scripts/gpu-kit.sh" >&2
  return 1
}
export GPU_KIT
# shellcheck disable=SC1091  # written by gpu-kit.sh
source "$GPU_KIT/kit.env"

gpu_env_root=$GPU_KIT/root/usr
gpu_env_lib=$gpu_env_root/lib/x86_64-linux-gnu
export OPAL_PREFIX=$gpu_env_root
export PMIX_INSTALL_PREFIX=$gpu_env_lib/pmix2
# PMIx itself looks for its plugins under PMIX_PREFIX and PMIX_PKGLIBDIR, else at the path it
# was built for, where a machine's own, different PMIx may answer (and fail to load).
export PMIX_PREFIX=$gpu_env_lib/pmix2 PMIX_PKGLIBDIR=$gpu_env_lib/pmix2/lib/pmix
export PATH=$gpu_env_root/bin:$PATH
export PKG_CONFIG_PATH=$gpu_env_lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
# Debian's .pc files say prefix=/usr: pkgconf puts the kit's root in front of their paths.
export PKG_CONFIG_SYSROOT_DIR=$GPU_KIT/root
export CMAKE_PREFIX_PATH=$gpu_env_root${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
# Debian's multiarch headers (hwloc's autogen/config.h), which the compiler finds by default
# only under /usr/include/x86_64-linux-gnu.
export CPATH=$gpu_env_root/include/x86_64-linux-gnu${CPATH:+:$CPATH}
# One host, no ssh: mpirun starts every rank itself.
export OMPI_MCA_plm=isolated
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Ranks on one host copy through shared memory without cross-process reads (CMA), which
# VMs and containers often refuse.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# pytest with only its own plugins: a venv's many (xdist, timeout, cov...) stay out of mpirun.
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
# The build tree's run_mpi.sh takes its launcher from here (tests/mpi/run_mpi.sh.in).
export CHORUS_MPIEXEC=$gpu_env_root/bin/mpiexec

# The Python the check builds chorus.torch for: the first on PATH that imports torch.
GPU_KIT_PYTHON=""
for gpu_env_py in python3 /usr/bin/python3; do
  if command -v "$gpu_env_py" >/dev/null && "$gpu_env_py" -c "import torch" 2>/dev/null; then
    GPU_KIT_PYTHON=$(command -v "$gpu_env_py")
    break
  fi
done
export GPU_KIT_PYTHON

# NCCL and the CUDA runtime: torch's wheels first, then /usr/local/cuda, then the kit.
gpu_env_find() {  # gpu_env_find FILE DIR...: the first DIR holding FILE
  local d
  for d in "${@:2}"; do
    if [[ -e $d/$1 ]]; then echo "$d"; return; fi
  done
}
gpu_env_site=()
if [[ -n $GPU_KIT_PYTHON ]]; then
  mapfile -t gpu_env_site < <("$GPU_KIT_PYTHON" -c \
    'import site, sys; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' \
    2>/dev/null)
fi
gpu_env_nccl_dirs=() gpu_env_cudart_dirs=()
for gpu_env_s in "${gpu_env_site[@]}"; do
  gpu_env_nccl_dirs+=("$gpu_env_s/nvidia/nccl/lib")
  gpu_env_cudart_dirs+=("$gpu_env_s/nvidia/cu13/lib" "$gpu_env_s/nvidia/cuda_runtime/lib")
done
gpu_env_nccl=$(gpu_env_find libnccl.so.2 "${gpu_env_nccl_dirs[@]}" /usr/local/cuda/lib64)
gpu_env_cudart=$(gpu_env_find libcudart.so.13 "${gpu_env_cudart_dirs[@]}" /usr/local/cuda/lib64 \
                 "$GPU_KIT/cuda")
export GPU_KIT_NCCL_LIB=${gpu_env_nccl:+$gpu_env_nccl/libnccl.so.2}
gpu_env_ld=""
for gpu_env_d in $KIT_LIBRARY_DIRS; do
  gpu_env_ld=$gpu_env_ld${gpu_env_ld:+:}$GPU_KIT/root/$gpu_env_d
done
for gpu_env_d in "$gpu_env_nccl" "$gpu_env_cudart"; do
  [[ -n $gpu_env_d ]] && gpu_env_ld=$gpu_env_ld:$gpu_env_d
done
export LD_LIBRARY_PATH=$gpu_env_ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# The build tree answers at its old path: KIT_SOURCE_DIR links to this checkout, and its
# build/ to the kit's copy (unless this checkout has its own build tree there).
gpu_env_link() {  # gpu_env_link PATH TARGET: PATH -> TARGET, unless PATH already is TARGET
  if [[ -e $1 || -L $1 ]]; then
    [[ $(readlink -f "$1") == "$(readlink -f "$2")" ]] && return 0
    echo "gpu-env: $1 exists and is not $2: the kit's build tree cannot answer there" >&2
    return 1
  fi
  mkdir -p "$(dirname "$1")" && ln -s "$2" "$1"
}
gpu_env_link "$KIT_SOURCE_DIR" "$gpu_env_repo" || return 1
if [[ ! -e $KIT_BINARY_DIR/CMakeCache.txt ]]; then
  gpu_env_link "$KIT_BINARY_DIR" "$GPU_KIT/build" || return 1
fi
unset gpu_env_py gpu_env_s gpu_env_d gpu_env_site gpu_env_nccl_dirs gpu_env_cudart_dirs
