#!/usr/bin/env bash
# Rehearses the GPU check here, on a machine without a GPU, as it will run on a bare GPU
# machine:
#
#   scripts/gpu-check-rehearsal.sh [--build DIR] [--work DIR] [--root-only]
#   (--root-only: step 2 alone, so that CTest makes the root while other tests run)
#
#   1. makes the kit from the build tree DIR (scripts/gpu-kit.sh; default: build);
#   2. makes a bare Debian root with what the GPU machine has and nothing of what the kit
#      brings: mmdebstrap's apt variant plus python3, cmake, ninja and g++; no Open MPI, hwloc,
#      spdlog, fmt, GoogleTest or LibTorch. It is cached (CHORUS_REHEARSAL_CACHE, default
#      /var/cache/chorus), so only the first run downloads it;
#   3. copies into it what travels to the GPU machine, the working tree's tracked and
#      untracked-but-not-ignored files with the kit as .gpu-kit, and shares this machine's
#      /usr/local/cuda read-only, as the GPU machine has CUDA (and NCCL) of its own;
#   4. runs scripts/gpu-check.sh under chroot in a mount namespace of its own.
# It passes when the check does: set-up passed (every kit binary finds its libraries, the
# kit's mpirun ran 2 ranks of a CPU test), each GPU check reported "no CUDA device" and was
# skipped, the build against the kit passed, and the summary has all eleven rows. The summary
# and logs are left in WORK/out (default WORK: DIR/gpu-rehearsal). Exits 77, CTest's skip,
# with the reason when it cannot run here: not root, no mount namespace, no root and no way
# to make one.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
build=$repo/build
work=""
root_only=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --work) work=$2; shift 2 ;;
    --root-only) root_only=1; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "gpu-check-rehearsal: unknown argument $1" >&2; exit 2 ;;
  esac
done
work=${work:-$build/gpu-rehearsal}
skip() { echo "SKIPPED: $*"; exit 77; }

[[ $(id -u) == 0 ]] || skip "the rehearsal needs root (chroot and bind mounts)"
unshare -m true 2>/dev/null || skip "no mount namespace can be made here (unshare -m)"

includes=python3,cmake,ninja-build,g++
# shellcheck source=scripts/bare-root.sh
source "$repo/scripts/bare-root.sh"
bare_root gpu-rehearsal "$includes"
if [[ $root_only == 1 ]]; then echo "gpu-check-rehearsal: the root is ready: $root_tar"; exit 0; fi

rm -rf "$work"
mkdir -p "$work/out"
# pipefail: a kit that was not made ends the rehearsal here.
"$repo/scripts/gpu-kit.sh" --build "$build" --kit "$work/kit" 2>&1 | sed 's/^/  /'

rootfs=$work/rootfs
mkdir -p "$rootfs"
tar -C "$rootfs" -xf "$root_tar"
for tool in mpirun ompi_info hwloc-ls; do
  if chroot "$rootfs" sh -c "command -v $tool" >/dev/null; then
    echo "gpu-check-rehearsal: the bare root has $tool: it is not bare" >&2
    exit 1
  fi
done
mkdir -p "$rootfs/repo"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done |
  xargs -0 cp --parents -P -t "$rootfs/repo")
cp -a "$work/kit" "$rootfs/repo/.gpu-kit"
mkdir -p "$rootfs/usr/local/cuda" "$rootfs/out"

rc=0
unshare -m bash -euc '
  rootfs=$1
  for fs in proc sys dev; do mount --rbind "/$fs" "$rootfs/$fs"; done
  if [[ -d /usr/local/cuda ]]; then
    mount --bind /usr/local/cuda "$rootfs/usr/local/cuda"
    mount -o remount,bind,ro "$rootfs/usr/local/cuda"
  fi
  mount --bind "$2" "$rootfs/out"
  exec chroot "$rootfs" /usr/bin/env -i HOME=/root TMPDIR=/tmp LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    bash -c "cd /repo && scripts/gpu-check.sh --out /out --budget 1200"
' rehearsal "$rootfs" "$work/out" || rc=$?
rm -rf "$rootfs"

summary=$work/out/gpu-summary.md
verdict() { echo "gpu-check-rehearsal: $*"; }
[[ -f $summary ]] || { verdict "FAILED: no summary written"; exit 1; }
problems=()
[[ $rc == 0 ]] || problems+=("gpu-check.sh exited $rc")
[[ $(grep -cE '^[|] ([0-9]|10) [|]' "$summary") == 11 ]] ||
  problems+=("the summary does not have rows 0-10")
grep -q '^| 0 | .* | passed |' "$summary" || problems+=("set-up did not pass")
for n in 1 2 3 4 6 7 8 9 10; do
  grep -q "^| $n | .* | skipped: no CUDA device" "$summary" ||
    problems+=("check $n did not skip for want of a device")
done
grep -q '^| 5 | .* | skipped: .*\(build\|built\)' "$summary" ||
  problems+=("check 5 did not build against the kit")
if [[ ${#problems[@]} -gt 0 ]]; then
  verdict "FAILED: $(IFS=';'; echo "${problems[*]}") (logs in $work/out)"
  exit 1
fi
verdict "passed (summary and logs in $work/out)"
