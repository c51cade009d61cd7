#!/usr/bin/env bash
# Installs the build into a fresh prefix and uses it as a site's users would: the installed
# programs and libraries carry an RPATH (a job with only the chorus module loaded finds what
# they were linked against, and what those link), chorusrun says the package's version, a C++-only consumer builds
# with find_package(Chorus) without loading LibTorch and runs on 2 ranks, and, with `torch`,
# a LibTorch consumer asks for the component torch and runs on 2 ranks.
#   check.sh BUILD_DIR SOURCE_DIR RUN_MPI [torch]
set -eu
build=$1 src=$2 run_mpi=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name 'libchorus.so.*' -type f | head -1)")

for file in "$prefix/bin/chorusrun" "$prefix/bin/chorus-trace" "$libdir"/libchorus*.so.*.*; do
  rpath=$(readelf -d "$file" | sed -n 's/.*(RPATH).*\[\(.*\)\]/\1/p')
  case "$rpath" in
    *'$ORIGIN'*) ;;
    *) echo "FAIL: $file has no RPATH with \$ORIGIN (RPATH: '$rpath'; readelf -d says:"
       readelf -d "$file" | grep -E 'R(UN)?PATH'; exit 1 ;;
  esac
done

version=$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")$/\1/p' "$libdir/cmake/Chorus/ChorusConfigVersion.cmake")
said=$(env -u LD_LIBRARY_PATH "$prefix/bin/chorusrun" --version)
if [ "$said" != "chorusrun (Chorus) $version" ]; then
  echo "FAIL: chorusrun --version says '$said', the package is $version"
  exit 1
fi

cmake -S "$src/tests/package/consumer" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/build" >/dev/null
out=$("$run_mpi" 2 60 "$work/build/consumer")
echo "$out"
if ! grep -q "consumer: Chorus $version, sum over 2 ranks = 3" <<<"$out"; then
  echo "FAIL: the consumer did not say Chorus $version and the sum over 2 ranks"
  exit 1
fi
if [ "${4:-}" = torch ]; then
  cmake -S "$src/tests/package/consumer" -B "$work/build-torch" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCONSUMER_WITH_TORCH=ON >/dev/null
  cmake --build "$work/build-torch" >/dev/null
  "$run_mpi" 2 120 "$work/build-torch/torch_consumer"
fi
