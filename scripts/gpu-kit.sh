#!/usr/bin/env bash
# Makes the GPU check kit: everything scripts/gpu-check.sh needs on a bare GPU machine that
# has CUDA, NCCL (in Python's nvidia-nccl package), torch, CMake and a compiler, but no Open
# MPI, hwloc, spdlog, fmt or GoogleTest. Run here, on Debian, after the build:
#
#   scripts/gpu-kit.sh [--build DIR] [--kit DIR]      (defaults: build, .gpu-kit)
#
# The kit (an ignored folder; send it along with the working tree) holds:
#   root/   Debian's packages unpacked with dpkg -x: Open MPI (run from here through
#           OPAL_PREFIX, never from /usr), PMIx, libevent, hwloc, spdlog, fmt, the headers
#           and GoogleTest for building against the machine's torch there, and every shared
#           library these and Chorus's binaries load that a minimal Debian or Ubuntu system
#           lacks (found with ldd until nothing new turns up). No docs or man pages.
#   cuda/   libcudart from this machine's CUDA, used only where the GPU machine has none.
#   build/  the GPU and CPU-check binaries of DIR (stripped of debug info; their CUDA code
#           must include sm_90 or PTX), and every CTestTestfile.cmake, so that
#           `ctest -L '^gpu$'` runs there as it would here.
#   kit.env where DIR and its sources were, which gpu-check.sh recreates there by links.
# It prints the kit's size: the working tree and the kit travel together, 64 MiB at most.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
build=$repo/build
kit=$repo/.gpu-kit
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --kit) kit=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "gpu-kit: unknown argument $1" >&2; exit 2 ;;
  esac
done
debs=${CHORUS_GPU_KIT_DEBS:-/var/cache/chorus/gpu-kit-debs}
arch=x86_64-linux-gnu

# What the check runs from the build tree: the GPU tests and benchmarks, and one CPU test
# that shows the kit's mpirun starting ranks (a small one: it links libchorus, where the
# statically linked tests each carry the CUDA kernels, and the kit must travel in 64 MiB).
targets=(gpu_probe gpu_kernels_test gpu_collectives_test gpu_nccl_error_test gpu_defects
         gpu_device_defects gpu_pack_bench nccl_allreduce_bench waiting_trainers)
cache=$build/CMakeCache.txt
if [[ ! -f $cache ]]; then
  echo "gpu-kit: $build is not a configured build tree (scripts/build.sh makes one)" >&2
  exit 1
fi
for option in CHORUS_WITH_CUDA CHORUS_WITH_NCCL; do
  if ! grep -q "^$option:BOOL=ON" "$cache"; then
    echo "gpu-kit: $build was configured without $option; the kit needs the GPU path" >&2
    exit 1
  fi
done
source_dir=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$cache")
# The GPU machines are Hopper: the kit's CUDA code must hold sm_90 or PTX it can compile.
if ! grep -q '^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=.*\(90\|virtual\)' "$cache"; then
  echo "gpu-kit: $build's CUDA code is for $(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' \
    "$cache") only; reconfigure with CMAKE_CUDA_ARCHITECTURES including 90" >&2
  exit 1
fi
cmake --build "$build" --target "${targets[@]}"

# Debian's packages: the runtime and the build-time pieces; the loop below adds the shared
# libraries they load. Fortran, Java and docs are left out.
packages=(openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libpmix2 libhwloc15
          libhwloc-dev libevent-core-2.1-7 libevent-pthreads-2.1-7 libspdlog1.10 libspdlog-dev
          libfmt9 libfmt-dev libgtest-dev libgmock-dev pkgconf pkgconf-bin libpkgconf3
          zlib1g-dev)

# What the GPU machine is taken to have already: Debian's essential packages, apt, Python and
# the C++ runtime, with everything they depend on. The rehearsal's bare root is made of the
# same, so a library missing from the kit shows there.
base_roots=(apt python3 libstdc++6 libgcc-s1
            $(dpkg-query -W -f='${Package} ${Essential}\n' | awk '$2 == "yes" {print $1}'))
mapfile -t base < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
  --no-breaks --no-replaces --no-enhances "${base_roots[@]}" | sed -n 's/^\([a-z0-9][^ :]*\).*/\1/p' |
  sort -u)
declare -A is_base=()
for p in "${base[@]}"; do is_base[$p]=1; done

rm -rf "$kit"
mkdir -p "$kit/root" "$kit/cuda" "$kit/build" "$debs"
declare -A unpacked=()
unpack() {  # unpack PACKAGE...: downloads (once, into $debs) and unpacks into the kit
  local p f
  (cd "$debs" && apt-get download "$@" >/dev/null 2>&1) ||
    { apt-get update -q >/dev/null && (cd "$debs" && apt-get download "$@" >/dev/null); }
  for p in "$@"; do
    f=$(ls -t "$debs/${p}"_*.deb | head -1)
    dpkg -x "$f" "$kit/root"
    unpacked[$p]=1
  done
}
unpack "${packages[@]}"

lib=$kit/root/usr/lib/$arch
prune() {
  rm -rf "$kit/root/usr/share/doc" "$kit/root/usr/share/man" "$kit/root/usr/share/lintian" \
         "$lib/fortran" "$lib"/libmpi_mpifh* "$lib"/libmpi_usempi* "$lib"/libmpi_java* \
         "$lib"/openmpi/lib/libmpi_mpifh* "$lib"/openmpi/lib/libmpi_usempi* \
         "$lib"/openmpi/lib/libmpi_java* "$lib"/openmpi/lib/*.mod "$kit/root/usr/bin"/mpif* \
         "$kit/root/usr/bin"/mpijavac*
}
prune

# The build tree's part: binaries, libchorus, the configured scripts, every CTest file.
# The rehearsal's work folder (gpu-rehearsal) holds a kit of its own: never copied.
in_build() {  # in_build FIND-ARGS...: find over the build tree, without the rehearsal's folder
  (cd "$build" && find . -path ./gpu-rehearsal -prune -o "$@" -print)
}
in_build -name CTestTestfile.cmake | (cd "$build" && xargs cp --parents -t "$kit/build")
copy_build() {  # copy_build RELATIVE_PATH...: keeps links as links
  local f
  for f in "$@"; do
    mkdir -p "$kit/build/$(dirname "$f")"
    cp -P "$build/$f" "$kit/build/$f"
  done
}
copy_build tests/mpi/run_mpi.sh
for t in "${targets[@]}"; do in_build -type f -name "$t" -perm -u+x; done |
  while read -r f; do copy_build "$f"; done
in_build -maxdepth 2 -name 'libchorus.so*' | while read -r f; do copy_build "$f"; done
find "$kit/build" -type f -perm -u+x ! -name '*.sh' -exec objcopy --strip-debug {} \;

# Shared libraries: every ELF file of the kit, resolved with the kit first, until each
# library it loads is in the kit, in the base set, or CUDA's (NCCL and the driver are the
# GPU machine's; the CUDA runtime goes to cuda/ as a fallback).
# kit_path: every folder of the kit holding shared libraries (Debian still installs some
# under /lib, and plugins such as UCX's transports load their siblings by name).
kit_path=""
lib_dirs() {
  (cd "$kit/root" && find . -name 'lib*.so*' -printf '%h\n' | sed 's|^\./||' | sort -u)
}
set_kit_path() {
  kit_path=$(lib_dirs | sed "s|^|$kit/root/|" | tr '\n' ':')$kit/build/src
}
set_kit_path
owner() {  # owner PATH: the Debian package that installed it (with or without /usr)
  local p=$1 alt
  alt=${p#/usr}
  [[ $alt == "$p" ]] && alt=/usr$p
  dpkg -S "$p" 2>/dev/null || dpkg -S "$alt" 2>/dev/null || true
}
while :; do
  mapfile -t outside < <(find "$kit/root" "$kit/build" -type f \( -name '*.so*' -o -perm -u+x \) |
    while read -r f; do
      [[ $(head -c4 "$f" | tr -d '\0') == $'\x7fELF' ]] || continue
      LD_LIBRARY_PATH=$kit_path ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
    done | sort -u | grep -v "^$kit/")
  new=()
  for path in "${outside[@]}"; do
    # The binaries' RPATH names the build tree, which the loader tries before
    # LD_LIBRARY_PATH: a library found there is one the kit carries a copy of.
    [[ $path == "$build/"* && -e $kit/build/${path#"$build"/} ]] && continue
    case $path in
      /usr/local/cuda*/libcudart.so*) cp -L "$path" "$kit/cuda/" ; continue ;;
      /usr/local/cuda*) continue ;;
    esac
    real=$(readlink -f "$path")
    p=$(owner "$real" | head -1 | cut -d: -f1)
    if [[ -z $p ]]; then
      echo "gpu-kit: no Debian package owns $path" >&2
      exit 1
    fi
    p=${p%%:*}
    [[ -n ${is_base[$p]:-} ]] && continue
    if [[ -n ${unpacked[$p]:-} ]]; then
      # In the kit under another name: a link that the package's scripts make through
      # /etc/alternatives (libpsm_infinipath), which dpkg -x does not run.
      [[ -e $kit/root$real ]] || { echo "gpu-kit: $real is not in the kit" >&2; exit 1; }
      ln -sr "$kit/root$real" "$lib/$(basename "$path")"
      continue
    fi
    new+=("$p")
  done
  mapfile -t new < <(printf '%s\n' "${new[@]}" | sed '/^$/d' | sort -u)
  if [[ ${#new[@]} -eq 0 ]]; then
    set_kit_path
    break
  fi
  echo "gpu-kit: adding the libraries of ${new[*]}"
  unpack "${new[@]}"
  prune
  set_kit_path
done
missing=$(find "$kit/root" "$kit/build" -type f \( -name '*.so*' -o -perm -u+x \) |
  while read -r f; do
    [[ $(head -c4 "$f" | tr -d '\0') == $'\x7fELF' ]] || continue
    LD_LIBRARY_PATH=$kit_path ldd "$f" 2>/dev/null | awk -v f="$f" '/not found/ {print f ": " $1}'
  done)
if [[ -n $missing ]]; then
  echo "gpu-kit: libraries that no package supplies:" >&2
  echo "$missing" >&2
  exit 1
fi

# Debian installs the launchers and wrappers under alternatives' names; the kit gives them
# their usual ones.
for name in mpirun mpiexec mpicc mpicxx; do
  ln -sf "$name.openmpi" "$kit/root/usr/bin/$name"
done

{
  echo "KIT_SOURCE_DIR=$source_dir"
  echo "KIT_BINARY_DIR=$build"
  echo "KIT_COMMIT=$(git -C "$repo" describe --always --dirty --abbrev=7 2>/dev/null || echo unknown)"
  echo "KIT_MADE=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "KIT_LIBRARY_DIRS=\"$(lib_dirs | tr '\n' ' ')\""
  echo "KIT_PACKAGES=\"$(printf '%s\n' "${!unpacked[@]}" | sort | tr '\n' ' ')\""
} >"$kit/kit.env"

size=$(du -sm "$kit" | cut -f1)
tree=$(cd "$repo" && git ls-files -z --cached --others --exclude-standard |
       du -cm --files0-from=- 2>/dev/null | tail -1 | cut -f1)
echo "gpu-kit: $kit is $size MiB (${#unpacked[@]} packages); the working tree that travels with" \
     "it is $tree MiB; together $((size + tree)) of 64 MiB"
if (( size + tree > 60 )); then
  echo "gpu-kit: too large to travel with room to spare (64 MiB at most)" >&2
  exit 1
fi
