#!/usr/bin/env bash
# Rehearses an install on a cluster, as its users have it, on this machine:
#
#   scripts/site-rehearsal.sh [--work DIR] [--root-only]
#   (--root-only: step 1 alone, so that CTest makes the root while other tests run)
#
#   1. makes a bare Debian root (mmdebstrap; cached in CHORUS_REHEARSAL_CACHE, default
#      /var/cache/chorus): a compiler, CMake, Python and Lmod, and none of Chorus's
#      dependencies;
#   2. puts each dependency in its own prefix under /opt behind an Lmod module, copied from
#      this machine's packages (scripts/site/make_prefixes.py): openmpi, hwloc, spdlog,
#      pybind11, torch (LibTorch and the Python torch); and, where this machine has CUDA, a
#      cuda module (this machine's toolkit, at /opt/cuda/<version>) and an nccl module,
#      while /usr/local/cuda in the root holds another toolkit, which must not be used;
#   3. makes a user without root, gives it a tarball of the working tree's tracked files
#      (git archive of `git stash create`, so HEAD when the tree is clean), and runs
#      scripts/site/rehearse.sh as that user under chroot in a mount namespace of its own:
#      configure, build, install with a modulefile, and jobs with only that module loaded, a
#      LibTorch consumer, and the pip route into a venv (that script says what it checks).
# The configure summary, chorusrun --check-build and the modulefile are left in WORK/out
# (default WORK: build/site-rehearsal). Exits 77, CTest's skip, with the reason where it
# cannot run: not root, no mount namespace, no root image and no way to make one.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
work=$repo/build/site-rehearsal
root_only=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --work) work=$2; shift 2 ;;
    --root-only) root_only=1; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "site-rehearsal: unknown argument $1" >&2; exit 2 ;;
  esac
done
skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "site-rehearsal: FAILED: $*"; exit 1; }

[[ $(id -u) == 0 ]] || skip "the rehearsal needs root (chroot, bind mounts, a user to run as)"
unshare -m true 2>/dev/null || skip "no mount namespace can be made here (unshare -m)"

includes=python3,python3-dev,python3-venv,python3-pip,python3-wheel,python3-setuptools,cmake,ninja-build,g++,make,pkg-config,lmod,passwd
# shellcheck source=scripts/bare-root.sh
source "$repo/scripts/bare-root.sh"
bare_root site-rehearsal "$includes"
if [[ $root_only == 1 ]]; then echo "site-rehearsal: the root is ready: $root_tar"; exit 0; fi

rm -rf "$work"
mkdir -p "$work/out"
rootfs=$work/rootfs
mkdir -p "$rootfs"
trap 'rm -rf "$rootfs"' EXIT
tar -C "$rootfs" -xf "$root_tar"
for tool in mpirun mpicc ompi_info hwloc-ls nvcc; do
  if chroot "$rootfs" sh -c "command -v $tool" >/dev/null; then fail "the bare root has $tool"; fi
done
chroot "$rootfs" python3 -c 'import torch' 2>/dev/null && fail "the bare root's python3 imports torch"

/usr/bin/python3 "$repo/scripts/site/make_prefixes.py" "$rootfs"

# CUDA and NCCL as modules, and a decoy toolkit at /usr/local/cuda that configure must not take.
cuda_arch=""
if [[ -x /usr/local/cuda/bin/nvcc ]]; then
  version=$(/usr/local/cuda/bin/nvcc --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
  [[ -n $version ]] || fail "cannot read /usr/local/cuda/bin/nvcc's version"
  mkdir -p "$rootfs/opt/cuda/$version" "$rootfs/opt/modulefiles/cuda" "$rootfs/opt/modulefiles/nccl"
  cat >"$rootfs/opt/modulefiles/cuda/$version.lua" <<EOF
whatis("Name: cuda")
local prefix = "/opt/cuda/$version"
setenv("CUDA_HOME", prefix)
prepend_path("PATH", pathJoin(prefix, "bin"))
prepend_path("LD_LIBRARY_PATH", pathJoin(prefix, "lib64"))
EOF
  if [[ -f /usr/local/cuda/include/nccl.h ]]; then
    nccl=$(sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) *\([0-9]*\).*/\2/p' /usr/local/cuda/include/nccl.h | paste -sd.)
    nccl_root=$rootfs/opt/nccl/$nccl
    mkdir -p "$nccl_root/include" "$nccl_root/lib"
    for f in /usr/local/cuda/include/nccl*; do ln -s "/opt/cuda/$version/include/$(basename "$f")" "$nccl_root/include/"; done
    for f in /usr/local/cuda/lib64/libnccl*; do ln -s "/opt/cuda/$version/lib64/$(basename "$f")" "$nccl_root/lib/"; done
    cat >"$rootfs/opt/modulefiles/nccl/$nccl.lua" <<EOF
whatis("Name: nccl")
local prefix = "/opt/nccl/$nccl"
setenv("NCCL_HOME", prefix)
prepend_path("LD_LIBRARY_PATH", pathJoin(prefix, "lib"))
EOF
    cuda_arch=90
  fi
  mkdir -p "$rootfs/usr/local/cuda/bin" "$rootfs/usr/local/cuda/include"
  printf '#!/bin/sh\necho "Cuda compilation tools, release 11.0, V11.0.1"\nexit 1\n' >"$rootfs/usr/local/cuda/bin/nvcc"
  chmod +x "$rootfs/usr/local/cuda/bin/nvcc"
  touch "$rootfs/usr/local/cuda/include/cuda.h"
fi

chroot "$rootfs" useradd --create-home --uid 4242 --shell /bin/bash rehearsal
home=$rootfs/home/rehearsal
tree=$(cd "$repo" && { git stash create 2>/dev/null || true; })
git -C "$repo" archive --format=tar.gz -o "$home/chorus.tar.gz" "${tree:-HEAD}"
cp "$repo/scripts/site/rehearse.sh" "$home/"
mkdir -p "$home/out"
chroot "$rootfs" chown -R rehearsal:rehearsal /home/rehearsal

rc=0
unshare -m bash -euc '
  rootfs=$1 version=$2
  for fs in proc sys dev; do mount --rbind "/$fs" "$rootfs/$fs"; done
  if [[ -n $version ]]; then
    mount --bind /usr/local/cuda "$rootfs/opt/cuda/$version"
    mount -o remount,bind,ro "$rootfs/opt/cuda/$version"
  fi
  exec chroot --userspec=rehearsal:rehearsal "$rootfs" /usr/bin/env -i HOME=/home/rehearsal \
    USER=rehearsal LANG=C.UTF-8 TMPDIR=/tmp PATH=/usr/local/bin:/usr/bin:/bin \
    bash /home/rehearsal/rehearse.sh /home/rehearsal/chorus.tar.gz /home/rehearsal/out "$3"
' rehearsal "$rootfs" "${version:-}" "$cuda_arch" 2>&1 | tee "$work/out/rehearsal.log" || rc=$?
cp -r "$home/out/." "$work/out/"
cp "$home/opt/chorus/share/modulefiles/chorus/"*.lua "$work/out/" 2>/dev/null || true
[[ $rc == 0 ]] || fail "the user's part exited $rc (log: $work/out/rehearsal.log)"
grep -q "site rehearsal: the user's part passed" "$work/out/rehearsal.log" || fail "the user's part did not finish"
echo "site-rehearsal: passed (summary, check-build, modulefile and log in $work/out)"
