#!/usr/bin/env bash
# Runs a command and checks how it ended and what it printed:
#   expect.sh [--fail|--any-exit|--status N] [--within SECONDS] [--regex ERE]... [--json FILE]...
#             -- COMMAND...
# --fail: the command must exit non-zero (but not by the hard timeout: 124 means it hung).
# --status: the command must exit with status N (mpirun passes on its ranks' status).
# --any-exit: any exit code but the hard timeout's (a job that lost a rank on purpose, whose
#   launcher's exit code says so).
# --within: the command must end within this many seconds.
# --regex: an extended regular expression that must match the output (stdout and stderr).
# --json: FILE must exist and parse as JSON (checked with python3).
set -u
want_fail=0
any_exit=0
want_status=""
within=0
regexes=()
jsons=()
while [ $# -gt 0 ]; do
  case "$1" in
    --fail) want_fail=1; shift ;;
    --any-exit) any_exit=1; shift ;;
    --status) want_status=$2; shift 2 ;;
    --within) within=$2; shift 2 ;;
    --regex) regexes+=("$2"); shift 2 ;;
    --json) jsons+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) echo "expect.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s)
"$@" >"$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
echo "expect.sh: exit code $rc after ${elapsed}s"
# 77: the command skipped itself (a GPU test without a GPU); the test reports that.
if [ $rc -eq 77 ]; then echo "expect.sh: SKIPPED"; exit 77; fi
ok=1
if [ $rc -eq 124 ]; then
  echo "expect.sh: FAIL: the command hit its hard timeout (a hang)"; ok=0
elif [ -n "$want_status" ]; then
  [ "$rc" -eq "$want_status" ] || { echo "expect.sh: FAIL: expected exit code $want_status"; ok=0; }
elif [ $want_fail -eq 1 ] && [ $rc -eq 0 ]; then
  echo "expect.sh: FAIL: expected a non-zero exit code"; ok=0
elif [ $any_exit -eq 1 ]; then
  :
elif [ $want_fail -eq 0 ] && [ $rc -ne 0 ]; then
  echo "expect.sh: FAIL: expected exit code 0"; ok=0
fi
if [ "$within" -gt 0 ] && [ "$elapsed" -gt "$within" ]; then
  echo "expect.sh: FAIL: took ${elapsed}s, more than ${within}s"; ok=0
fi
for re in "${regexes[@]+"${regexes[@]}"}"; do
  if ! grep -Eq -- "$re" "$out"; then echo "expect.sh: FAIL: output does not match: $re"; ok=0; fi
done
for f in "${jsons[@]+"${jsons[@]}"}"; do
  if ! python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$f"; then
    echo "expect.sh: FAIL: $f is not valid JSON"; ok=0
  fi
done
[ $ok -eq 1 ] && echo "expect.sh: PASS"
[ $ok -eq 1 ]
