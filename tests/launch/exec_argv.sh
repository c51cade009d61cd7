#!/usr/bin/env bash
# chorusrun really executes the launcher with an argv vector: a stand-in `mpirun` first on
# PATH records the arguments it received, one per line, and they must be exactly the
# ones given, spaces, quotes and shell syntax included (nothing was re-parsed by a shell).
# The job's variables reach the ranks (-x), but not the launcher's own (OMPI_*, SLURM_*).
#   exec_argv.sh CHORUSRUN
set -u
chorusrun=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/mpirun" <<'SCRIPT'
#!/bin/sh
for a in "$@"; do printf '[%s]\n' "$a"; done
SCRIPT
chmod +x "$dir/mpirun"
actual=$(cd "$dir" && timeout 20 env -i PATH="$dir:/usr/bin:/bin" CHORUS_LOG_LEVEL=debug \
  MY_DATA=/scratch/data OMPI_MCA_pml=ob1 SLURM_PROCID=3 "$chorusrun" -H 'node-a:1' --mpi-args "--tag-output -mca 'key with space' v" \
  ./train 'two words' '$(touch pwned)' "it's" '*' '' 2>&1)
rc=$?
expected='[-np]
[1]
[-H]
[node-a:1]
[-map-by]
[ppr:1:node]
[-x]
[CHORUS_LOG_LEVEL]
[-x]
[MY_DATA]
[-x]
[PATH]
[--tag-output]
[-mca]
[key with space]
[v]
[./train]
[two words]
[$(touch pwned)]
[it'"'"'s]
[*]
[]'
echo "$actual"
if [ $rc -ne 0 ]; then echo "FAIL: chorusrun exited $rc"; exit 1; fi
if [ "$actual" != "$expected" ]; then
  echo "FAIL: the launcher got other arguments; expected:"; echo "$expected"; exit 1
fi
if [ -e "$dir/pwned" ]; then echo "FAIL: an argument was run by a shell"; exit 1; fi
# A launcher that is not there is a clear error, not a silent success.
out=$(timeout 20 env PATH="$dir/none" "$chorusrun" -H a:1 --launcher srun ./train 2>&1)
rc=$?
echo "$out"
[ $rc -eq 127 ] || { echo "FAIL: exit code $rc for a missing srun, expected 127"; exit 1; }
case "$out" in
  *"cannot run 'srun': No such file or directory"*) ;;
  *) echo "FAIL: no clear message for a missing srun"; exit 1 ;;
esac
echo "exec_argv.sh: ok"
