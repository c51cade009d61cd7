#!/usr/bin/env bash
# One stall class made on purpose on 3 ranks, classified twice: live, by the stall inspector,
# which says it on every rank and ends the job with the class's exit status; and afterwards,
# by chorus-trace stall, from the flight records the ranks wrote at the stall report.
#
#   stall_class.sh CHORUS_TRACE EXPECT_SH STATUS CLASS -- COMMAND...
#
# CLASS: the class's name as the lines begin with it (core/stall_classes.cc).
set -euo pipefail
trace=$1 expect=$2 status=$3 class=$4
shift 4
[[ ${1:-} == -- ]] && shift
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

CHORUS_STALL_CHECK_SECONDS=1 CHORUS_STALL_SHUTDOWN_SECONDS=2 CHORUS_DEBUG_DIR=$dir \
  "$expect" --status "$status" --within 90 \
  --regex "\\[chorus rank 0\\] .*stall inspector \\(global\\): $class" \
  --regex "\\[chorus rank 1\\] .*stall inspector \\(global\\): $class" \
  --regex "\\[chorus rank 2\\] .*stall inspector \\(global\\): $class" -- "$@"

for r in 0 1 2; do
  if [[ ! -s $dir/chorus-flight.rank$r.json ]]; then
    echo "stall_class: FAIL: rank $r wrote no flight record in $dir"
    exit 1
  fi
done
out=$("$trace" stall "$dir")
echo "chorus-trace stall $dir:"
echo "$out"
if ! grep -q "^$class (" <<<"$out"; then
  echo "stall_class: FAIL: chorus-trace stall does not say: $class"
  exit 1
fi
if ! grep -q "exits with status $status)" <<<"$out"; then
  echo "stall_class: FAIL: chorus-trace stall does not give exit status $status"
  exit 1
fi
echo "stall_class: ok ($class, status $status, live and from the flight records)"
