#!/usr/bin/env bash
# The pip route, as a user with torch in a virtualenv takes it: pip installs the package from
# bindings/python into a fresh venv (the build directory given is reused, so nothing is
# compiled again), and then, with only the venv on PATH:
#   - `chorusrun --version` and `chorus.__version__` say the project's version;
#   - `chorusrun --check-build` finds the libraries inside the venv's package, and they load;
#   - `chorus-trace` runs, and `chorusrun --check-job` runs the package's chorus-check-job;
#   - `chorusrun -np 2 python` runs a horovod.torch-style script on 2 ranks, each rank in the
#     venv (chorusrun passes PATH and VIRTUAL_ENV to mpirun's ranks).
#   pip_venv.sh BUILD_DIR SOURCE_DIR PYTHON VERSION
set -eu
build=$1 src=$2 python=$3 version=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# torch comes from the system's site-packages here (there is no package index to pip it from).
"$python" -m venv --system-site-packages "$work/venv"
CHORUS_BUILD_DIR=$build timeout 600 "$work/venv/bin/pip" install --no-build-isolation --no-index \
  --no-deps --quiet "$src/bindings/python" || fail "pip install"
export PATH=$work/venv/bin:/usr/bin:/bin VIRTUAL_ENV=$work/venv
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset PYTHONPATH LD_LIBRARY_PATH
cd "$work"

[ "$(command -v chorusrun)" = "$work/venv/bin/chorusrun" ] || fail "chorusrun is not the venv's"
said=$(chorusrun --version)
[ "$said" = "chorusrun (Chorus) $version" ] || fail "chorusrun --version says '$said'"
said=$(python -c 'import chorus; print(chorus.__version__)')
[ "$said" = "$version" ] || fail "chorus.__version__ is '$said'"

report=$(chorusrun --check-build)
echo "$report"
package=$(python -c 'import chorus, os; print(os.path.dirname(chorus.__file__))')
case "$package" in "$work/venv/"*) ;; *) fail "chorus imported from $package, not the venv" ;; esac
grep -qF "$package/libchorus.so.0: loads" <<<"$report" || fail "libchorus does not load from the venv"
grep -qF "imports chorus $version from $package" <<<"$report" || fail "python3 does not import the venv's chorus"
chorus-trace --help >/dev/null || fail "chorus-trace --help"
out=$(timeout -k 5 120 chorusrun --check-job -np 2 --oversubscribe --mpi-args "--bind-to none" 2>&1) \
  || { echo "$out"; fail "chorusrun --check-job"; }
echo "$out"
grep -q "job check: 2 ranks on 1 host(s)" <<<"$out" || fail "the venv's chorusrun --check-job"

cat >"$work/train.py" <<'PY'
import sys

import torch

import chorus.torch as hvd

hvd.init()
venv = sys.prefix
total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum)
print(f"rank {hvd.rank()}/{hvd.size()} in {venv}: sum {total.item():g}", flush=True)
assert total.item() == hvd.size() * (hvd.size() + 1) / 2
hvd.shutdown()
PY
out=$(timeout -k 5 180 chorusrun -np 2 --oversubscribe --mpi-args "--bind-to none" python "$work/train.py" 2>&1) \
  || { echo "$out"; fail "the 2-rank run"; }
echo "$out"
for rank in 0 1; do
  grep -qF "rank $rank/2 in $work/venv: sum 3" <<<"$out" || fail "rank $rank did not run in the venv"
done
echo "pip_venv: passed"
