# Sourced (bash) by the elastic cluster tests (netns_elastic.sh, netns_elastic_inplace.sh),
# after netns_lib.sh's netns_up: their arguments, one supervised job, and the checks on it.
#
#   elastic_args "$@"   CHORUSRUN PYTHON PYTHONPATH EXAMPLE DATA_DIR [CPP_EXAMPLE CPP_DATA_DIR]:
#                       sets chorusrun, python, example, data_dir, cpp_example, cpp_data_dir,
#                       check_samples, and exports PYTHONPATH
#   job NAME LIMIT CHORUSRUN-ARGS... -- PROGRAM-ARGS...
#                       one job under a hard timeout, with chorusrun's arguments in
#                       job_args first; its stores under $netns_state/NAME.shm, its output in
#                       $netns_state/NAME.log (printed without the training's lines and debug lines); sets rc
#   expect_line NAME REGEX WHY
#   same_saved_weights A B   the weights the Python example saved (--save-weights) in
#                       $netns_state/A.pt and B.pt are the same bits
#   same_digest A B     the LibTorch example's digests in A's and B's logs are the same
#
# Callers define fail().

elastic_args() {
  chorusrun=$1
  python=$2
  export PYTHONPATH=$3
  example=$4
  data_dir=$5
  cpp_example=${6:-}
  cpp_data_dir=${7:-}
  check_samples="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../elastic/check_samples.py"
}

job_args=()

job() {
  local name=$1 limit_s=$2 t0
  shift 2
  local opts=()
  while [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  echo "== $name: chorusrun ${job_args[*]} ${opts[*]}"
  t0=$(date +%s)
  CHORUS_ELASTIC_DIR="$netns_state/$name.shm" timeout -k 5 "$limit_s" \
    "$chorusrun" "${job_args[@]}" "${opts[@]}" "$@" >"$netns_state/$name.log" 2>&1
  rc=$?
  grep -v "^epoch \|^\[chorus rank .*\] \[debug\]" "$netns_state/$name.log" | sed 's/^/   /'
  [ $rc = 124 ] && fail "$name hung (hard timeout)"
  echo "== $name: exit $rc in $(( $(date +%s) - t0 )) s"
}

expect_line() {
  grep -Eq "$2" "$netns_state/$1.log" || fail "$1: $3 (no line matching '$2')"
}

same_saved_weights() {
  "$python" - "$netns_state/$1.pt" "$netns_state/$2.pt" <<'EOF'
import sys, torch
a, b = (torch.load(p) for p in sys.argv[1:3])
assert a.keys() == b.keys(), "different parameters"
for name in a:
    assert a[name].dtype == b[name].dtype and torch.equal(a[name], b[name]), name + " differs"
print(f"   the final weights are bit-identical ({len(a)} tensors)")
EOF
}

same_digest() {
  local a b
  a=$(grep "^final weights fnv1a" "$netns_state/$1.log")
  b=$(grep "^final weights fnv1a" "$netns_state/$2.log")
  [ -n "$a" ] && [ "$a" = "$b" ] && echo "   the final weights are bit-identical ($a)"
}
