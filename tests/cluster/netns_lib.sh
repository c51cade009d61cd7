# Sourced (bash): fake hosts over a network, on one machine, for the cluster tests and the
# cross-host benchmark. Each fake host is a network namespace with its own address on a
# private bridge, and every process started "on" it also gets a UTS namespace whose
# hostname is the host's name (Open MPI's shared-memory transport names its segments after
# the hostname, so two fake hosts must not share one). mpirun starts its daemons there
# through plm_rsh_agent, a small script standing in for ssh, with the caller's environment.
#
#   netns_up N     creates hosts h1..hN, exports mpirun's variables, and removes everything
#                  at exit (trap); exits 77 where namespaces cannot be made here. With
#                  NETNS_RATE set (tc's form: 1gbit, 100mbit), each host's link is limited to
#                  that rate in both directions (a token bucket on either end of its veth), as
#                  an Ethernet cluster's links are.
#   netns_tx_bytes the bytes every host has sent over its link so far, summed.
#   netns_layout HxR  netns_up H, and sets netns_np (H x R) and netns_hostlist (mpirun's -H
#                  form: h1:R,h2:R,...), for a job of R ranks on each of H hosts.
#
# Sets: netns_tag (names of what it made, after this shell's pid), netns_state (a scratch
# folder, removed at exit), netns_subnet (the bridge's /24, first three octets). Callers
# define fail() and skip(); leftovers of runs killed outright are removed at the next start.

netns_hosts=()
netns_tag="chorus$$"
netns_bridge="chbr$$"
netns_state=""
netns_subnet=""

netns_cleanup() {
  local h ns p
  for h in "${netns_hosts[@]}"; do
    ns="$netns_tag-$h"
    ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$ns" || continue
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -TERM "$p" 2>/dev/null; done
    sleep 0.2
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    ip link del "veth$$$h" 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  ip link del "$netns_bridge" 2>/dev/null
  [ -n "$netns_state" ] && rm -rf "$netns_state"
}

netns_remove_leftovers() {
  local ns pid p br
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
}

netns_tx_bytes() {
  local h ns total=0 sent
  for h in "${netns_hosts[@]}"; do
    ns="$netns_tag-$h"
    sent=$(ip -n "$ns" -s link show eth0 | awk '/TX:/ {getline; print $1; exit}')
    total=$((total + sent))
  done
  echo "$total"
}

netns_up() {
  local n=$1 i h ns third
  [ "$(id -u)" = 0 ] || skip "needs root to create network namespaces (running as uid $(id -u))"
  command -v ip >/dev/null || fail "ip not found: install iproute2 (scripts/install-deps.sh)"
  command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"
  netns_remove_leftovers
  netns_state=$(mktemp -d /tmp/chorus-netns.XXXXXX)
  trap netns_cleanup EXIT
  trap 'exit 1' INT TERM
  # A /24 that nothing on this machine routes yet.
  for third in $(seq $(( $$ % 200 + 20 )) 250) $(seq 20 250); do
    if [ -z "$(ip -4 route show "10.213.$third.0/24" 2>/dev/null)" ]; then
      netns_subnet="10.213.$third"; break
    fi
  done
  [ -n "$netns_subnet" ] || fail "no free 10.213.x.0/24 subnet"
  if ! ip link add "$netns_bridge" type bridge 2>"$netns_state/err"; then
    skip "cannot create a bridge here ($(cat "$netns_state/err")); no CAP_NET_ADMIN?"
  fi
  ip addr add "$netns_subnet.254/24" dev "$netns_bridge" && ip link set "$netns_bridge" up ||
    fail "bridge setup"
  for ((i = 1; i <= n; i++)); do
    h="h$i"
    ns="$netns_tag-$h"
    netns_hosts+=("$h")
    if ! ip netns add "$ns" 2>"$netns_state/err"; then
      skip "cannot create a network namespace ($(cat "$netns_state/err"))"
    fi
    ip link add "veth$$$h" type veth peer name eth0 netns "$ns" || fail "veth for $h"
    ip link set "veth$$$h" master "$netns_bridge" up || fail "bridge port for $h"
    ip -n "$ns" addr add "$netns_subnet.$i/24" dev eth0 || fail "address of $h"
    ip -n "$ns" link set eth0 up && ip -n "$ns" link set lo up || fail "links of $h"
    if [ -n "${NETNS_RATE:-}" ]; then
      command -v tc >/dev/null || fail "tc not found: install iproute2 (scripts/install-deps.sh)"
      tc -n "$ns" qdisc add dev eth0 root tbf rate "$NETNS_RATE" burst 256kb latency 50ms &&
        tc qdisc add dev "veth$$$h" root tbf rate "$NETNS_RATE" burst 256kb latency 50ms ||
        fail "limiting $h's link to $NETNS_RATE"
    fi
    echo "$h $ns $netns_subnet.$i" >>"$netns_state/hosts"
  done
  if ! ip netns exec "$netns_tag-h1" unshare --uts /bin/sh -c 'hostname h1 && test "$(hostname)" = h1' \
    2>"$netns_state/err"; then
    skip "cannot enter a namespace with its own hostname ($(cat "$netns_state/err"))"
  fi
  for ((i = 1; i <= n; i++)); do
    ip netns exec "$netns_tag-h1" ping -c1 -W2 "$netns_subnet.$i" >/dev/null 2>&1 && continue
    # ping may be missing; the bridge is checked again by mpirun's own connections.
    command -v ping >/dev/null && fail "h1 cannot reach $netns_subnet.$i over the bridge"
  done

  # The rsh agent: "agent HOST COMMAND..." like ssh. The command runs through /bin/sh in the
  # host's network namespace, in a new UTS namespace named after the host, with the
  # caller's environment (paths to the build tree and Open MPI's variables).
  cat >"$netns_state/agent" <<AGENT
#!/bin/sh
host=\${1#*@}; shift
ns=\$(awk -v h="\$host" '\$1 == h || \$3 == h {print \$2}' "$netns_state/hosts")
[ -n "\$ns" ] || { echo "agent: unknown host '\$host'" >&2; exit 255; }
exec ip netns exec "\$ns" unshare --uts /bin/sh -c 'hostname "\$0" && exec /bin/sh -c "\$1"' \
  "\$(awk -v n="\$ns" '\$2 == n {print \$1}' "$netns_state/hosts")" "\$*"
AGENT
  chmod +x "$netns_state/agent"

  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_plm_rsh_agent="$netns_state/agent"
  export OMPI_MCA_oob_tcp_if_include="$netns_subnet.0/24"
  export OMPI_MCA_btl_tcp_if_include="$netns_subnet.0/24"
}

netns_layout() {
  local nhosts=${1%x*} ppr=${1#*x} i
  netns_up "$nhosts"
  netns_np=$((nhosts * ppr))
  netns_hostlist=""
  for ((i = 1; i <= nhosts; i++)); do netns_hostlist+="${netns_hostlist:+,}h$i:$ppr"; done
}
