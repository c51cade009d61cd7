#!/usr/bin/env bash
# The install a site publishes, used through its Lmod modulefile: with nothing but the system's
# PATH and `module load chorus`, chorusrun is the prefix's, says its version, finds the
# prefix's libraries loadable, python3 imports the prefix's chorus.torch, and a 2-rank
# horovod.torch-style job runs through chorusrun. Skips (77) without Lmod.
#   modulefile.sh BUILD_DIR PYTHON VERSION
set -u
build=$1 python=$2 version=$3
lmod_init=/usr/share/lmod/lmod/init/bash
if [ ! -r "$lmod_init" ]; then
  echo "SKIP: no Lmod ($lmod_init; Debian package lmod)"; exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null || fail "cmake --install"
module_file=$prefix/share/modulefiles/chorus/$version.lua
[ -f "$module_file" ] || fail "no modulefile at $module_file"

env -i HOME="$HOME" PATH=/usr/bin:/bin OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  bash -c '
  set -u
  source "$1"; prefix=$2; version=$3; python=$4; work=$5
  fail() { echo "FAIL: $*"; exit 1; }
  module use "$prefix/share/modulefiles" && module load chorus || fail "module load chorus"
  module list 2>&1
  [ "$(command -v chorusrun)" = "$prefix/bin/chorusrun" ] || fail "chorusrun is not the prefix'"'"'s"
  [ "$CHORUS_ROOT" = "$prefix" ] || fail "CHORUS_ROOT is $CHORUS_ROOT"
  [ "$(chorusrun --version)" = "chorusrun (Chorus) $version" ] || fail "chorusrun --version"
  report=$(chorusrun --check-build) || fail "chorusrun --check-build"
  echo "$report"
  grep -q "^    $prefix/lib[^ ]*/libchorus.so.0: loads" <<<"$report" || fail "libchorus does not load"
  cat >"$work/train.py" <<PY
import chorus, torch
import chorus.torch as hvd
hvd.init()
total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum)
print(f"rank {hvd.rank()}/{hvd.size()} chorus from {chorus.__path__[0]}: sum {total.item():g}", flush=True)
hvd.shutdown()
PY
  out=$(timeout -k 5 180 chorusrun -np 2 --oversubscribe --mpi-args "--bind-to none" "$python" "$work/train.py" 2>&1) \
    || { echo "$out"; fail "the 2-rank run"; }
  echo "$out"
  for rank in 0 1; do
    grep -q "rank $rank/2 chorus from $prefix/lib.*/chorus: sum 3" <<<"$out" || fail "rank $rank"
  done
' bash "$lmod_init" "$prefix" "$version" "$python" "$work" || exit 1
echo "modulefile: passed"
