#!/usr/bin/env bash
# Runs chorusrun with a recorded environment and checks what it prints and how it exits:
#   run_fixture.sh CHORUSRUN FIXTURE
# A fixture is a list of directives, one per line ('#' starts a comment line):
#   env NAME=VALUE     a variable of the recorded allocation (nothing else is set but PATH)
#   args WORD...       chorusrun's arguments, split on spaces ('{SP}' stands for a space)
#   stdout LINE        the next line chorusrun must print on stdout
#   stderr LINE        the next line it must print on stderr
#   exit N             its exit code
# @DIR@ in a value stands for the fixture's directory (files such as PE_HOSTFILE).
set -u
chorusrun=$1
fixture=$2
dir=$(cd "$(dirname "$fixture")" && pwd)
envs=(PATH=/usr/bin:/bin)
args=()
want_out=""
want_err=""
want_rc=0
while IFS= read -r line || [ -n "$line" ]; do
  line=${line//@DIR@/$dir}
  case "$line" in
    '#'* | '') ;;
    'env '*) envs+=("${line#env }") ;;
    'args '*)
      read -r -a words <<<"${line#args }"
      for w in "${words[@]}"; do args+=("${w//\{SP\}/ }"); done ;;
    'stdout '*) want_out+="${line#stdout }"$'\n' ;;
    'stderr '*) want_err+="${line#stderr }"$'\n' ;;
    'exit '*) want_rc=${line#exit } ;;
    *) echo "run_fixture.sh: $fixture: bad line: $line" >&2; exit 2 ;;
  esac
done <"$fixture"
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
timeout 20 env -i "${envs[@]}" "$chorusrun" "${args[@]}" >"$out" 2>"$err"
rc=$?
ok=1
if [ "$rc" != "$want_rc" ]; then
  echo "FAIL: exit code $rc, expected $want_rc"; ok=0
fi
if ! diff -u <(printf '%s' "$want_out") "$out"; then
  echo "FAIL: stdout differs (--- expected, +++ actual)"; ok=0
fi
if ! diff -u <(printf '%s' "$want_err") "$err"; then
  echo "FAIL: stderr differs (--- expected, +++ actual)"; ok=0
fi
echo "chorusrun ${args[*]}"
cat "$out" "$err"
[ $ok = 1 ] && echo "run_fixture.sh: $(basename "$fixture") ok"
[ $ok = 1 ]
