#!/usr/bin/env bash
# A real Slurm cluster on one machine: a private munged, slurmctld and two slurmd (nodes
# cn1, cn2), each slurmd in its own UTS namespace so the tasks of each node see that
# node's host name. All state, sockets and logs live in a temporary directory; nothing in
# /etc is touched. Then:
#   1. srun -N 2 --ntasks-per-node 2 --mpi=pmix map_probe    (PMIx direct launch; the
#      SLURM_* variables of the step are compared with the map and must agree)
#   2. sbatch -N 2 --ntasks-per-node 2 launch/slurm_sbatch.sh map_probe
#      (chorusrun inside the allocation: srun with the --mpi that srun --mpi=list offers)
#   3. sbatch of the same script running EXAMPLE (a Fashion-MNIST trainer: the LibTorch CNN
#      where LibTorch is built) briefly
#   3b. chorusrun --check-job under salloc: a row per rank on cn1 and cn2, a timed allreduce
# and checks the map each rank computed. Every daemon is stopped on exit, failure or
# interruption; daemons of runs killed outright are stopped at the next start.
#
#   4. (with PYTHON BUILD_DIR PY_EXAMPLE) sbatch of launch/computecanada_sbatch.sh: a venv
#      made on each node in the job, chorus installed from a wheel (built here first from
#      BUILD_DIR with pip wheel), and `srun python` of a chorus.torch example script,
#      checking that it ran on 4 ranks from the nodes' venvs and reached its accuracy floor
#
#   5. (with ELASTIC_EXAMPLE in the environment: the LibTorch elastic example) sbatch of the
#      job script running chorusrun --max-restarts 2: cn2's ranks die at commit 2 and
#      chorusrun relaunches on cn1 inside the allocation, from that commit; the final weights
#      equal a reference restarted by hand from commit 2 on cn1; with PYTHON, the same for
#      examples/python/elastic_mnist.py.
#   6. salloc + srun python of examples/python/ddp_mnist.py: PyTorch DDP on the chorus backend,
#      with MPI (srun --mpi=pmix) and, where the build has Gloo, without (srun --mpi=none).
#
#   slurm_cluster.sh MAP_PROBE JOB_SCRIPT EXAMPLE CHORUSRUN [PYTHON BUILD_DIR PY_EXAMPLE]
#
# Exit 77 (skipped) only when this machine cannot do it (not root, no UTS namespaces).
set -u
probe=$(readlink -f "$1")
job_script=$(readlink -f "$2")
example=$(readlink -f "$3")
chorusrun=$(readlink -f "$4")
py_interp=${5:-}
py_build=${6:-}
py_example=${7:+$(readlink -f "$7")}
venv_script=$(dirname "$job_script")/computecanada_sbatch.sh
SKIP=77
skip() { echo "slurm_cluster.sh: SKIPPED: $*"; exit $SKIP; }
fail() {
  echo "slurm_cluster.sh: FAIL: $*"
  # state is set once the cluster directory exists; checks before that have no logs.
  [ -n "${state:-}" ] || exit 1
  for f in "$state"/log/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -n 20 "$f"; }; done
  exit 1
}

[ "$(id -u)" = 0 ] || skip "needs root to run slurmd and munged (running as uid $(id -u))"
unshare --uts /bin/true 2>/dev/null || skip "cannot create UTS namespaces here (unshare --uts failed)"
for b in slurmctld slurmd srun sbatch squeue scontrol sinfo munged munge; do
  command -v "$b" >/dev/null || fail "$b not found: install slurm-wlm and munge (scripts/install-deps.sh)"
done

alive() { [ -n "${1:-}" ] && [ -e "/proc/$1" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }

# kill every process whose UTS namespace is that of pid $1's (a node's slurmd and its steps)
kill_node() {
  local ns p; ns=$(readlink "/proc/$1/ns/uts" 2>/dev/null) || return 0
  [ "$ns" != "$(readlink /proc/$$/ns/uts)" ] || return 0
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/ns/uts" 2>/dev/null)" = "$ns" ] && kill -KILL "${p#/proc/}" 2>/dev/null
  done
}

stop_cluster() {  # $1: state directory
  local d=$1 pid
  for pid in $(cat "$d"/nodes/*/slurmd.pid 2>/dev/null); do alive "$pid" && kill_node "$pid"; done
  for f in "$d/ctld/slurmctld.pid" "$d/munge/munged.pid"; do
    pid=$(cat "$f" 2>/dev/null) || continue
    alive "$pid" && kill -TERM "$pid" 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do alive "$pid" || break; sleep 0.2; done
    alive "$pid" && kill -KILL "$pid" 2>/dev/null
  done
  rm -rf "$d"
}

# Clusters of earlier runs whose harness was killed before cleaning up.
for d in /tmp/chorus-slurm.*; do
  [ -f "$d/owner" ] || continue
  alive "$(cat "$d/owner")" || stop_cluster "$d"
done

state=$(mktemp -d /tmp/chorus-slurm.XXXXXX)
chmod 755 "$state"
echo $$ >"$state/owner"
trap 'stop_cluster "$state"' EXIT
trap 'exit 1' INT TERM

# Free TCP ports for slurmctld and the two slurmd.
ports=()
for p in $(seq $(( 20000 + $$ % 20000 )) 45000); do
  ss -Htln "sport = :$p" | grep -q . || ports+=("$p")
  [ ${#ports[@]} = 3 ] && break
done
[ ${#ports[@]} = 3 ] || fail "no free ports"

mkdir -p "$state"/{etc,ctld,log,munge}
conf=$state/etc/slurm.conf
cat >"$conf" <<CONF
ClusterName=chorustest
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=${ports[0]}
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$state/munge/munge.socket
StateSaveLocation=$state/ctld
SlurmctldPidFile=$state/ctld/slurmctld.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdSpoolDir=$state/nodes/%n/spool
SlurmdPidFile=$state/nodes/%n/slurmd.pid
SlurmdLogFile=$state/log/slurmd-%n.log
# One TmpFS per node: the PMIx plugin makes its directories there, and two slurmd on one
# machine would collide in a shared /tmp.
TmpFS=$state/nodes/%n/tmp
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# CPUs=4 per node on a machine with fewer cores.
SlurmdParameters=config_overrides
MpiDefault=pmix
ReturnToService=2
EnforcePartLimits=ALL
MailProg=/bin/true
KillWait=5
MinJobAge=300
# Job ids differ between runs: Open MPI names its shared-memory segments after the job
# (PMIx namespace), so a leftover segment of an earlier run must not match this one's.
FirstJobId=$(( ($$ % 40000) * 50 + 1000 ))
NodeName=cn1 NodeAddr=127.0.0.1 Port=${ports[1]} CPUs=4 State=UNKNOWN
NodeName=cn2 NodeAddr=127.0.0.1 Port=${ports[2]} CPUs=4 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=10 State=UP
CONF
export SLURM_CONF=$conf

# munge: a private key and socket.
chown munge:munge "$state/munge" && chmod 0755 "$state/munge"
dd if=/dev/urandom of="$state/munge/munge.key" bs=1024 count=1 status=none
chown munge:munge "$state/munge/munge.key" && chmod 0400 "$state/munge/munge.key"
runuser -u munge -- munged --socket="$state/munge/munge.socket" \
  --key-file="$state/munge/munge.key" --pid-file="$state/munge/munged.pid" \
  --log-file="$state/munge/munged.log" --seed-file="$state/munge/munged.seed" ||
  fail "munged did not start"
munge -n -S "$state/munge/munge.socket" | unmunge -S "$state/munge/munge.socket" >/dev/null ||
  fail "munge credentials do not round-trip"

slurmctld -c -f "$conf" || fail "slurmctld did not start"
for i in $(seq 1 100); do
  timeout 5 scontrol ping 2>/dev/null | grep -q UP && break
  [ "$i" = 100 ] && fail "slurmctld does not answer"
  sleep 0.2
done
for n in cn1 cn2; do
  mkdir -p "$state/nodes/$n/spool" "$state/nodes/$n/tmp" && chmod 1777 "$state/nodes/$n/tmp"
  unshare --uts /bin/sh -c 'hostname "$0" && exec slurmd -f "$1" -N "$0"' "$n" "$conf" ||
    fail "slurmd $n did not start"
done
for i in $(seq 1 150); do
  states=$(timeout 5 sinfo -h -N -o '%N %t' 2>/dev/null | sort -u)
  [ "$(echo "$states" | grep -c ' idle$')" = 2 ] && break
  [ "$i" = 150 ] && fail "nodes not idle after 30 s: $states"
  sleep 0.2
done
for n in cn1 cn2; do
  pid=$(cat "$state/nodes/$n/slurmd.pid")
  [ "$(readlink "/proc/$pid/ns/uts")" != "$(readlink /proc/$$/ns/uts)" ] ||
    fail "slurmd $n is not in a UTS namespace of its own"
done
echo "cluster up: $(sinfo -h -o '%D nodes %T, partition %P')"

# Open MPI between the "nodes" of this machine: TCP over loopback.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_btl_tcp_if_include=lo
export CHORUS_LOG_LEVEL=info
# The job scripts find chorusrun on PATH, as after `module load chorus`.
export PATH=$(dirname "$chorusrun"):$PATH

check_map() {  # OUTPUT: 4 ranks, ppr:2:node on cn1, cn2
  local out=$1 r
  grep -q "rank map: 4 ranks on 2 hosts, layout ppr:2:node" "$out" ||
    fail "rank 0 did not print the host table with layout ppr:2:node"
  for r in 0 1 2 3; do
    grep -qE "chorus-map rank=$r size=4 host=cn$((r / 2 + 1)) local_rank=$((r % 2)) local_size=2 cross_rank=$((r / 2)) cross_size=2 .* ok$" "$out" ||
      fail "rank $r: expected host=cn$((r / 2 + 1)) local_rank=$((r % 2)) cross_rank=$((r / 2))"
  done
  [ "$(grep -c 'chorus-map ' "$out")" = 4 ] || fail "expected 4 map lines"
  if grep -q "disagrees" "$out"; then fail "a launcher variable disagreed with the map"; fi
}

start=$(date +%s)
echo "== srun -N 2 --ntasks-per-node 2 --mpi=pmix map_probe"
CHORUS_LOG_LEVEL=debug timeout -k 5 90 srun -N 2 --ntasks-per-node 2 --mpi=pmix "$probe" \
  >"$state/srun.out" 2>&1
rc=$?
cat "$state/srun.out"
[ $rc = 124 ] && fail "srun hung (hard timeout)"
[ $rc = 0 ] || fail "srun exited $rc"
check_map "$state/srun.out"
grep -q "launcher check: Slurm: 3 variable(s) agree" "$state/srun.out" ||
  fail "the SLURM_* variables of the srun step were not compared with the map"

echo "== sbatch $(basename "$job_script") with map_probe and with the example"
cd "$state"
probe_job=$(sbatch --parsable -N 2 --ntasks-per-node 2 -t 5 -o "$state/probe-%j.out" "$job_script" "$probe") ||
  fail "sbatch refused the job script"
example_job=$(sbatch --parsable -N 2 --ntasks-per-node 2 -t 5 -o "$state/example-%j.out" "$job_script" \
  "$example" --epochs 1 --limit 6000 --min-accuracy 50) || fail "sbatch refused the example job"
for i in $(seq 1 450); do
  [ -z "$(squeue -h -j "$probe_job,$example_job" 2>/dev/null)" ] && break
  [ "$i" = 450 ] && { scancel "$probe_job" "$example_job"; fail "jobs still running after 90 s"; }
  sleep 0.2
done
for job in "$probe_job" "$example_job"; do
  f=$(ls "$state"/*-"$job".out)
  echo "--- job $job ($f)"; cat "$f"
  scontrol show job "$job" | grep -q "JobState=COMPLETED" ||
    fail "job $job did not complete: $(scontrol show job "$job" | grep -o 'JobState=[A-Z_]* Reason=[^ ]*')"
done
check_map "$state/probe-$probe_job.out"
grep -q "rank map: 4 ranks on 2 hosts, layout ppr:2:node" "$state/example-$example_job.out" ||
  fail "the example job did not run on 4 ranks over 2 hosts"
grep -qE "test accuracy:? [0-9.]+%" "$state/example-$example_job.out" ||
  fail "the example job did not finish training"

echo "== chorusrun --check-job in an allocation (salloc -N 2 --ntasks-per-node 2)"
timeout -k 5 90 salloc -N 2 --ntasks-per-node 2 -t 5 chorusrun --check-job >"$state/check-job.out" 2>&1 ||
  { cat "$state/check-job.out"; fail "chorusrun --check-job in the allocation"; }
grep -v '^\[chorus' "$state/check-job.out"
grep -q "job check: 4 ranks on 2 host(s); MPI: Open MPI" "$state/check-job.out" ||
  fail "--check-job did not report 4 ranks on 2 hosts"
for r in 0 1 2 3; do
  grep -qE "^cn$((r / 2 + 1)) +$r +$((r % 2)) " "$state/check-job.out" || fail "--check-job has no row for rank $r on cn$((r / 2 + 1))"
done
grep -qE "host memory +median [0-9.]+ ms" "$state/check-job.out" || fail "--check-job timed no allreduce"
if [ -n "${ELASTIC_EXAMPLE:-}" ]; then
  # A node lost inside the allocation: chorusrun --max-restarts in the job script; cn2's
  # ranks die after commit 2 with their node's commits (CHORUS_TEST_FAIL_AT_COMMIT), and
  # chorusrun relaunches srun on cn1 inside the same allocation, from commit 2. For the
  # LibTorch example, and for the Python one where the package is built; then the LibTorch
  # reference: the same failure with --max-restarts 0, and a job on cn1 alone started from
  # the stores it left, whose final weights must be the survivor's, bit for bit.
  #
  # elastic_job NAME NODES FAIL CHORUSRUN-ARGS...: sbatch of the job script, waited for; sets
  # out (its output) and state_of (its JobState).
  elastic_job() {
    local name=$1 nodes=$2 fault=$3 id i
    shift 3
    echo "== sbatch -N $nodes $(basename "$job_script") chorusrun $*"
    id=$(CHORUS_TEST_FAIL_AT_COMMIT=$fault CHORUS_ELASTIC_JOB=$name \
      CHORUS_ELASTIC_DIR=$state/elastic-shm CHORUS_LIVENESS_SECONDS=20 \
      sbatch --parsable -N "$nodes" --ntasks-per-node 2 -w "$( [ "$nodes" = 1 ] && echo cn1 || echo cn1,cn2)" \
      -t 5 -o "$state/$name-%j.out" "$job_script" "$@") || fail "sbatch refused the $name job"
    for i in $(seq 1 900); do
      [ -z "$(squeue -h -j "$id" 2>/dev/null)" ] && break
      [ "$i" = 900 ] && { scancel "$id"; fail "the $name job still running after 180 s"; }
      sleep 0.2
    done
    out=$state/$name-$id.out
    grep -v '^\[chorus rank .*\] \[\(debug\|info\)\]\|^epoch ' "$out"
    state_of=$(scontrol show job "$id" | grep -o 'JobState=[A-Z_]*')
  }
  survived() {  # NAME PROGRAM...: the job that loses cn2 and finishes on cn1
    local name=$1
    shift
    elastic_job "$name" 2 cn2:2 --max-restarts 2 --min-np 2 "$@"
    [ "$state_of" = JobState=COMPLETED ] || fail "the $name job did not complete ($state_of)"
    grep -qE "^chorusrun: launch 1: 4 ranks on cn1:2,cn2:2$" "$out" || fail "$name: the first launch was not 2 x 2"
    grep -qE "^chorusrun: restart 1 of 2 after rank [23] on cn2 ended \(srun: Killed\); launch 2: 2 ranks on cn1:2 \(excluded: cn2\)$" "$out" ||
      fail "$name: the restart line does not leave cn2 out"
    grep -q "^chorus.elastic: resumed from commit 2 " "$out" || fail "$name: the relaunch did not resume from commit 2"
    grep -q "^finished 1 epochs on 2 ranks" "$out" || fail "$name: the job did not finish on cn1"
  }
  # reference NAME PROGRAM...: the same failure with no restart, then a job on cn1 alone from
  # the stores it left (it must resume commit 2).
  reference() {
    local name=$1
    shift
    elastic_job "$name-reference" 2 cn2:2 --max-restarts 0 --min-np 2 "$@"
    [ "$state_of" = JobState=COMPLETED ] && fail "the $name reference's failing job completed"
    elastic_job "$name-reference" 1 "" --max-restarts 0 "$@"
    [ "$state_of" = JobState=COMPLETED ] || fail "the $name reference job did not complete ($state_of)"
    grep -q "^chorus.elastic: resumed from commit 2 " "$out" ||
      fail "the $name reference did not resume from commit 2"
  }
  elastic_args=(--epochs 1 --limit 2000 --batch-size 32 --batches-per-commit 5)
  survived elastic-cpp "$ELASTIC_EXAMPLE" "${elastic_args[@]}"
  survivor=$(grep "^final weights fnv1a" "$out")
  reference elastic-cpp "$ELASTIC_EXAMPLE" "${elastic_args[@]}"
  [ -n "$survivor" ] && [ "$(grep "^final weights fnv1a" "$out")" = "$survivor" ] ||
    fail "the LibTorch survivor's final weights differ from the reference restart's"
  echo "   the final weights are bit-identical ($survivor)"
  if [ -n "$py_example" ]; then
    py_elastic=("$py_interp" "$(dirname "$py_example")/elastic_mnist.py" "${elastic_args[@]}"
                --data-dir "$state/py-elastic-data")
    export PYTHONPATH=$py_build/python
    survived elastic-py "${py_elastic[@]}" --save-weights "$state/elastic-py.pt"
    reference elastic-py "${py_elastic[@]}" --save-weights "$state/elastic-py-reference.pt"
    "$py_interp" - "$state/elastic-py.pt" "$state/elastic-py-reference.pt" <<'EOF' ||
import sys, torch
a, b = (torch.load(p) for p in sys.argv[1:3])
assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), "weights differ"
print(f"   the final weights are bit-identical ({len(a)} tensors)")
EOF
      fail "the Python survivor's final weights differ from the reference restart's"
    unset PYTHONPATH
  fi
fi
if [ -n "$py_example" ]; then
  echo "== sbatch $(basename "$venv_script") $(basename "$py_example"): a venv per node, srun python"
  wheels=$state/wheels
  CHORUS_BUILD_DIR=$py_build timeout 300 "$py_interp" -m pip wheel --no-build-isolation --no-deps \
    --no-index --quiet -w "$wheels" "$(dirname "$job_script")/../bindings/python" ||
    fail "pip wheel of the Python package"
  mkdir -p "$state/py-data"
  # The Python the wheel was built for comes first on PATH, as after `module load python`;
  # torch comes from its system site-packages here (no package index), which the venvs see.
  mkdir -p "$state/python/bin"
  ln -s "$py_interp" "$state/python/bin/python3"
  venv_job=$(PATH=$state/python/bin:$PATH CHORUS_WHEELHOUSE=$wheels CHORUS_VENV_OPTIONS=--system-site-packages \
    sbatch --parsable -N 2 --ntasks-per-node 2 -t 5 -o "$state/venv-%j.out" "$venv_script" \
    "$py_example" --epochs 1 --limit 8000 --lr 0.025 --momentum 0.9 --min-accuracy 50 \
    --data-dir "$state/py-data") || fail "sbatch refused $(basename "$venv_script")"
  for i in $(seq 1 750); do
    [ -z "$(squeue -h -j "$venv_job" 2>/dev/null)" ] && break
    [ "$i" = 750 ] && { scancel "$venv_job"; fail "the venv job still running after 150 s"; }
    sleep 0.2
  done
  out=$state/venv-$venv_job.out
  cat "$out"
  scontrol show job "$venv_job" | grep -q "JobState=COMPLETED" ||
    fail "the venv job did not complete: $(scontrol show job "$venv_job" | grep -o 'JobState=[A-Z_]* Reason=[^ ]*')"
  for n in cn1 cn2; do
    grep -q "^$n: chorus [0-9.]* torch" "$out" || fail "node $n did not make its venv with chorus"
  done
  grep -q "srun --mpi=pmix" "$out" || fail "the venv job did not choose srun --mpi=pmix"
  grep -q "rank map: 4 ranks on 2 hosts, layout ppr:2:node" "$out" ||
    fail "the Python example did not run on 4 ranks over 2 hosts"
  grep -qE "final test accuracy: [0-9.]+% \(4 ranks\)" "$out" ||
    fail "the Python example did not finish training on 4 ranks"

  # A PyTorch DDP script on the torch.distributed backend chorus, launched as the Compute
  # Canada guide launches its DDP test: srun python in an allocation, ranks from srun, the
  # group's store at tcp://MASTER_ADDR:port. ddp_under_srun PLUGIN PORT EXPECTED [VAR=value...]:
  # one run under srun --mpi=PLUGIN, whose output must hold EXPECTED and the final accuracy.
  ddp_under_srun() {
    local plugin=$1 port=$2 expected=$3 ddp_out=$state/ddp.$1.out
    shift 3
    echo "== salloc -N 2 srun --mpi=$plugin python ddp_mnist.py --backend chorus"
    env PYTHONPATH="$py_build/python" CHORUS_LOG_LEVEL=info "$@" timeout -k 5 180 \
      salloc -N 2 --ntasks-per-node 2 -t 5 srun --mpi="$plugin" "$py_interp" \
      "$(dirname "$py_example")/ddp_mnist.py" --backend chorus --init-method tcp://127.0.0.1:"$port" \
      --epochs 1 --limit 8000 --min-accuracy 50 --data-dir "$state/py-data" >"$ddp_out" 2>&1 ||
      { cat "$ddp_out"; fail "the DDP script on chorus under srun --mpi=$plugin"; }
    cat "$ddp_out"
    grep -q "$expected" "$ddp_out" ||
      fail "the DDP script under srun --mpi=$plugin did not print '$expected'"
    grep -qE "final test accuracy: [0-9.]+% \(4 ranks, chorus\)" "$ddp_out" ||
      fail "the DDP script did not finish training on chorus under srun --mpi=$plugin"
  }
  ddp_under_srun pmix 29561 "rank map: 4 ranks on 2 hosts, layout ppr:2:node"
  # The same without MPI (srun --mpi=none): the default group starts Chorus on Gloo, its ranks
  # meeting in torch's store at tcp://MASTER_ADDR:port, where a build has Gloo.
  if "$py_interp" -c "import sys; sys.path.insert(0, '$py_build/python'); import chorus.torch as h; sys.exit(0 if h.gloo_built() else 1)"; then
    ddp_under_srun none 29562 "the job's world: gloo, 4 ranks" MASTER_ADDR=127.0.0.1
  fi
fi
echo "slurm_cluster.sh: ok in $(( $(date +%s) - start )) s (after the cluster started)"
