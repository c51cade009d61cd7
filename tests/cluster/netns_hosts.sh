#!/usr/bin/env bash
# Several hosts over a network, on one machine: each fake host is a network namespace
# with its own address on a private bridge, and every process started "on" it also gets
# a UTS namespace whose hostname is the host's name. mpirun starts its daemons there
# through plm_rsh_agent (a small script standing in for ssh), so ranks on different fake
# hosts see different host names and talk over TCP across the bridge.
#
#   netns_hosts.sh MAP_PROBE CHORUSRUN FAULTS
#
# Runs, each under a hard timeout:
#   1. mpirun -np 4 -H h1:2,h2:2 -map-by ppr:2:node map_probe
#   2. chorusrun -np 3 --ppr 1 -H h1:2,h2:2,h3:2 map_probe   (the launcher end to end)
#   3. mpirun --enable-recovery -np 3 -H h1:1,h2:1,h3:1 faults peer_exits_idle
# and checks the map every rank printed (host, local and cross ranks), that rank 0 printed
# the host table, that no launcher variable disagreed, and that map_probe's allreduce
# across the hosts was right; then that when the rank on h3 exits while idle, the ranks on
# h1 and h2 fail their collective within CHORUS_LIVENESS_SECONDS and the roll call, naming
# rank 2 alone (tests/faults/faults.cc). Everything it creates is named after this shell's pid and
# removed on exit, failure or interruption; leftovers of runs killed outright are removed
# at the next start. Exit 77 (skipped) only when namespaces cannot be made here.
set -u
probe=$1
chorusrun=$2
faults=$3
SKIP=77
skip() { echo "netns_hosts.sh: SKIPPED: $*"; exit $SKIP; }
fail() { echo "netns_hosts.sh: FAIL: $*"; exit 1; }

[ "$(id -u)" = 0 ] || skip "needs root to create network namespaces (running as uid $(id -u))"
command -v ip >/dev/null || fail "ip not found: install iproute2 (scripts/install-deps.sh)"
command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"

tag="chorus$$"
hosts=(h1 h2 h3)
state=$(mktemp -d /tmp/chorus-netns.XXXXXX)
bridge="chbr$$"
subnet=""

# Leftovers of earlier runs that were killed before their cleanup ran.
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^chorus[0-9]+-h[0-9]+$'); do
  pid=${ns#chorus}; pid=${pid%%-*}
  if ! kill -0 "$pid" 2>/dev/null; then
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  fi
done
for br in $(ip -o link show type bridge 2>/dev/null | awk -F': ' '{print $2}' | grep -E '^chbr[0-9]+$'); do
  kill -0 "${br#chbr}" 2>/dev/null || ip link del "$br" 2>/dev/null
done

cleanup() {
  local h ns p
  for h in "${hosts[@]}"; do
    ns="$tag-$h"
    ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$ns" || continue
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -TERM "$p" 2>/dev/null; done
    sleep 0.2
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    ip link del "veth$$$h" 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  ip link del "$bridge" 2>/dev/null
  rm -rf "$state"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# A /24 that nothing on this machine routes yet.
for third in $(seq $(( $$ % 200 + 20 )) 250) $(seq 20 250); do
  if [ -z "$(ip -4 route show "10.213.$third.0/24" 2>/dev/null)" ]; then subnet="10.213.$third"; break; fi
done
[ -n "$subnet" ] || fail "no free 10.213.x.0/24 subnet"

if ! ip link add "$bridge" type bridge 2>"$state/err"; then
  skip "cannot create a bridge here ($(cat "$state/err")); no CAP_NET_ADMIN?"
fi
ip addr add "$subnet.254/24" dev "$bridge" && ip link set "$bridge" up || fail "bridge setup"
i=0
for h in "${hosts[@]}"; do
  i=$((i + 1))
  ns="$tag-$h"
  if ! ip netns add "$ns" 2>"$state/err"; then
    skip "cannot create a network namespace ($(cat "$state/err"))"
  fi
  ip link add "veth$$$h" type veth peer name eth0 netns "$ns" || fail "veth for $h"
  ip link set "veth$$$h" master "$bridge" up || fail "bridge port for $h"
  ip -n "$ns" addr add "$subnet.$i/24" dev eth0 || fail "address of $h"
  ip -n "$ns" link set eth0 up && ip -n "$ns" link set lo up || fail "links of $h"
  echo "$h $ns $subnet.$i" >>"$state/hosts"
done
if ! ip netns exec "$tag-h1" unshare --uts /bin/sh -c 'hostname h1 && test "$(hostname)" = h1' \
  2>"$state/err"; then
  skip "cannot enter a namespace with its own hostname ($(cat "$state/err"))"
fi
for i in 1 2 3; do
  ip netns exec "$tag-h1" ping -c1 -W2 "$subnet.$i" >/dev/null 2>&1 && continue
  # ping may be missing; the bridge is checked again by mpirun's own connections.
  command -v ping >/dev/null && fail "h1 cannot reach $subnet.$i over the bridge"
done

# The rsh agent: "agent HOST COMMAND..." like ssh. The command runs through /bin/sh in the
# host's network namespace, in a new UTS namespace named after the host, with the
# caller's environment (paths to the build tree and Open MPI's variables).
cat >"$state/agent" <<AGENT
#!/bin/sh
host=\${1#*@}; shift
ns=\$(awk -v h="\$host" '\$1 == h || \$3 == h {print \$2}' "$state/hosts")
[ -n "\$ns" ] || { echo "agent: unknown host '\$host'" >&2; exit 255; }
exec ip netns exec "\$ns" unshare --uts /bin/sh -c 'hostname "\$0" && exec /bin/sh -c "\$1"' \
  "\$(awk -v n="\$ns" '\$2 == n {print \$1}' "$state/hosts")" "\$*"
AGENT
chmod +x "$state/agent"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_plm_rsh_agent="$state/agent"
export OMPI_MCA_oob_tcp_if_include="$subnet.0/24"
export OMPI_MCA_btl_tcp_if_include="$subnet.0/24"
export CHORUS_LOG_LEVEL=info

# check_run OUTPUT NP HOSTS_PER_RANK...: every rank's line, the table and no disagreement.
check_run() {
  local out=$1 np=$2 ppr=$3 nhosts=$4 r host
  grep -q "rank map: $np ranks on $nhosts hosts, layout ppr:$ppr:node" "$out" ||
    fail "rank 0 did not print the host table with layout ppr:$ppr:node"
  for ((r = 0; r < np; r++)); do
    host="h$((r / ppr + 1))"
    grep -qE "^chorus-map rank=$r size=$np host=$host local_rank=$((r % ppr)) local_size=$ppr cross_rank=$((r / ppr)) cross_size=$nhosts .* ok$" "$out" ||
      fail "rank $r: expected host=$host local_rank=$((r % ppr)) cross_rank=$((r / ppr)) cross_size=$nhosts"
  done
  [ "$(grep -c '^chorus-map ' "$out")" = "$np" ] || fail "expected $np map lines"
  if grep -q "disagrees" "$out"; then fail "a launcher variable disagreed with the map"; fi
}

start=$(date +%s)
echo "== mpirun -np 4 -H h1:2,h2:2 -map-by ppr:2:node (subnet $subnet.0/24)"
timeout -k 5 90 mpirun -np 4 -H h1:2,h2:2 -map-by ppr:2:node --bind-to none \
  -x CHORUS_LOG_LEVEL "$probe" >"$state/run1" 2>&1
rc=$?
cat "$state/run1"
[ $rc = 124 ] && fail "mpirun hung (hard timeout)"
[ $rc = 0 ] || fail "mpirun exited $rc"
check_run "$state/run1" 4 2 2

echo "== chorusrun -np 3 --ppr 1 -H h1:2,h2:2,h3:2"
timeout -k 5 90 "$chorusrun" -np 3 --ppr 1 -H h1:2,h2:2,h3:2 --explain \
  --mpi-args "--bind-to none" "$probe" >"$state/run2" 2>&1
rc=$?
cat "$state/run2"
[ $rc = 124 ] && fail "chorusrun hung (hard timeout)"
[ $rc = 0 ] || fail "chorusrun exited $rc"
grep -q "^h3    2     0 " "$state/run2" || fail "chorusrun --explain did not list rank 2 on h3"
check_run "$state/run2" 3 1 3
echo "== mpirun --enable-recovery -np 3 -H h1:1,h2:1,h3:1 faults peer_exits_idle"
run3_start=$(date +%s)
timeout -k 5 60 mpirun -np 3 -H h1:1,h2:1,h3:1 --bind-to none --enable-recovery \
  -x CHORUS_LOG_LEVEL -x CHORUS_LIVENESS_SECONDS=3 -x FAULTS_DIR="$state" \
  "$faults" peer_exits_idle >"$state/run3" 2>&1
rc=$?
cat "$state/run3"
[ $rc = 124 ] && fail "a rank's exit across hosts hung the others (hard timeout)"
for r in 0 1; do
  grep -qE "^rank $r: peer_exits_idle ok: .*ranks \[2\] took no part" "$state/run3" ||
    fail "rank $r did not fail its collective naming rank 2 alone"
done
[ $(( $(date +%s) - run3_start )) -le 40 ] || fail "the lost rank took more than 40 s to detect"
echo "netns_hosts.sh: ok in $(( $(date +%s) - start )) s"
