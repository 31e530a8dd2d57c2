# shellcheck shell=bash
# What the local cluster needs of the machine: Debian packages, the node
# address, sysctls and a firewall guard. Source it after lib.sh.

# The Debian packages the node uses, as "package file-it-installs" pairs. We
# use Debian's runc, CNI plugins and busybox-static but our own containerd
# build, so Debian's containerd package is not installed at all (runc and
# containernetworking-plugins do not depend on it).
host_packages=(
	"runc /usr/sbin/runc"
	"containernetworking-plugins /usr/lib/cni/bridge"
	"iptables /usr/sbin/iptables"
	"conntrack /usr/sbin/conntrack"
	"busybox-static /bin/busybox"
)

# host_ensure_packages installs the packages whose files are missing.
host_ensure_packages() {
	local missing=() pair pkg file
	for pair in "${host_packages[@]}"; do
		read -r pkg file <<<"$pair"
		if [[ ! -x $file ]] || ! dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed'; then
			missing+=("$pkg")
		fi
	done
	((${#missing[@]} > 0)) || return 0
	log "installing Debian packages: ${missing[*]}"
	apt-get update -qq || die "apt-get update failed; the node needs the packages ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
		die "apt-get install ${missing[*]} failed"
}

# host_network_up gives the node its address on an interface of its own,
# routes the pod and service ranges to that interface (so that nothing in
# them leaves through eth0; the pod subnet's route through the CNI bridge is
# more specific), sets the sysctls that pod networking needs, and installs
# the guard.
#
# The interface is a bridge without ports, which is what a dummy interface
# would be: this VM's kernel has no dummy driver ("Unknown device type").
# What is routed to it goes nowhere, and its own address is local, so the
# host and pods (through the CNI bridge) reach the node address and nothing
# beyond it.
host_network_up() {
	if ! ip link show "$NODE_IF" >/dev/null 2>&1; then
		ip link add "$NODE_IF" type bridge || die "cannot create the node's interface $NODE_IF (a bridge without ports)"
	fi
	[[ ! -e /proc/sys/net/ipv6/conf/$NODE_IF ]] || sysctl -qw "net.ipv6.conf.$NODE_IF.disable_ipv6=1"
	ip addr replace "$NODE_IP/${NODE_CIDR#*/}" dev "$NODE_IF"
	ip link set "$NODE_IF" up
	ip route replace "$LOCAL_CIDR" dev "$NODE_IF"
	# Remember the machine's ip_forward, for host_network_down.
	mkdir -p "$RUN_DIR"
	[[ -f $RUN_DIR/ip_forward.orig ]] || cat /proc/sys/net/ipv4/ip_forward >"$RUN_DIR/ip_forward.orig"
	sysctl -qw net.ipv4.ip_forward=1
	[[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]] || modprobe br_netfilter 2>/dev/null ||
		die "bridged pod traffic cannot reach iptables: /proc/sys/net/bridge is missing and modprobe br_netfilter failed"
	sysctl -qw net.bridge.bridge-nf-call-iptables=1
	host_guard_up
}

# host_guard_up keeps pod traffic on the machine, whatever the routes say:
# pods may reach each other (through the bridge) and this host, and nothing
# is forwarded between the bridge and any other interface. It sits in the
# mangle table, which kube-proxy and the CNI plugins leave alone, so their
# ACCEPT rules in the filter table cannot come before it.
host_guard_up() {
	iptables -t mangle -N TEND-GUARD 2>/dev/null || iptables -t mangle -F TEND-GUARD
	iptables -t mangle -A TEND-GUARD -i "$BRIDGE" -o "$BRIDGE" -j RETURN
	iptables -t mangle -A TEND-GUARD -i "$BRIDGE" -j DROP
	iptables -t mangle -A TEND-GUARD -o "$BRIDGE" -j DROP
	iptables -t mangle -A TEND-GUARD -d "$LOCAL_CIDR" -j DROP
	iptables -t mangle -A TEND-GUARD -s "$LOCAL_CIDR" -j DROP
	iptables -t mangle -C FORWARD -j TEND-GUARD 2>/dev/null || iptables -t mangle -I FORWARD 1 -j TEND-GUARD
}

# node_chains matches the iptables chains that the node leaves once every pod
# is gone: kubelet's (KUBE-FIREWALL and its canaries) and the portmap CNI
# plugin's top-level chains. kube-proxy --cleanup removes kube-proxy's.
node_chains='^(KUBE-FIREWALL|KUBE-KUBELET-CANARY|KUBE-IPTABLES-HINT|CNI-HOSTPORT-(DNAT|MASQ|SETMARK))$'

# host_iptables_cleanup removes node_chains and every rule that jumps to
# them, in each table, for IPv4 and IPv6.
host_iptables_cleanup() {
	local cmd table line chain target
	for cmd in iptables ip6tables; do
		command -v "$cmd" >/dev/null || continue
		for table in filter nat mangle; do
			while read -r line; do
				target=${line##* -j }
				target=${target%% *}
				[[ $target =~ $node_chains ]] || continue
				# iptables-save quotes comments as the shell does.
				eval "$cmd -t $table ${line/#-A/-D}" 2>/dev/null || true
			done < <("$cmd-save" -t "$table" 2>/dev/null | grep '^-A ')
			for chain in $("$cmd-save" -t "$table" 2>/dev/null | sed -n 's/^:\([^ ]*\) .*/\1/p'); do
				if [[ $chain =~ $node_chains ]]; then
					"$cmd" -t "$table" -F "$chain" 2>/dev/null || true
					"$cmd" -t "$table" -X "$chain" 2>/dev/null || true
				fi
			done
		done
	done
}

# host_network_down undoes host_network_up: the bridge, the node's chains,
# the guard, the route, the node's interface, and ip_forward as it was.
host_network_down() {
	ip link del "$BRIDGE" 2>/dev/null || true
	host_iptables_cleanup
	while iptables -t mangle -D FORWARD -j TEND-GUARD 2>/dev/null; do :; done
	iptables -t mangle -F TEND-GUARD 2>/dev/null || true
	iptables -t mangle -X TEND-GUARD 2>/dev/null || true
	ip route del "$LOCAL_CIDR" dev "$NODE_IF" 2>/dev/null || true
	ip link del "$NODE_IF" 2>/dev/null || true
	if [[ -f $RUN_DIR/ip_forward.orig ]]; then
		sysctl -qw net.ipv4.ip_forward="$(cat "$RUN_DIR/ip_forward.orig")"
		rm -f "$RUN_DIR/ip_forward.orig"
	fi
}
