# shellcheck shell=bash
# Settings and helpers shared by the local cluster's scripts (up.sh, down.sh,
# wipe.sh, images.sh, deploy.sh). Source it; it defines no side effects but
# variables and functions.
#
# The cluster is one node on this machine, run as root: host processes
# (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd,
# kubelet, kube-proxy, moto_server) tracked by PID files, and in-cluster
# add-ons (CoreDNS, local-path-provisioner). Nothing it runs listens beyond
# 127.0.0.1 and the node address, which lives on an interface of its own.

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../versions.env
source "$root/hack/versions.env"

# --- Places -----------------------------------------------------------------
# STATE_DIR survives a stop: PKI, etcd data, images, volumes, logs. RUN_DIR is
# what a reboot would clear: PID files, sockets, containerd's runtime state.
STATE_DIR=/var/lib/tend-cluster
RUN_DIR=/run/tend-cluster
LOG_DIR=$STATE_DIR/logs
PKI_DIR=$STATE_DIR/pki
KUBECONFIG_DIR=$STATE_DIR/kubeconfigs
CONFIG_DIR=$STATE_DIR/config
LOCAL_PATH_DIR=$STATE_DIR/local-path
PID_DIR=$RUN_DIR/pids
CONTAINERD_SOCKET=$RUN_DIR/containerd/containerd.sock
# The administrator's kubeconfig: export KUBECONFIG=$ADMIN_KUBECONFIG.
ADMIN_KUBECONFIG=$STATE_DIR/kubeconfig
# Serializes up, down and wipe; outside the directories that wipe removes.
LOCK_FILE=/run/lock/tend-cluster.lock

# --- Network ----------------------------------------------------------------
# Nothing here may look like, or route to, a real network. The node address
# is in TEST-NET-2 (RFC 5737), on an interface of its own (see host.sh): this
# VM's eth0 already holds 192.0.2.2/24 in TEST-NET-1. Pods and services are
# in 198.18.0.0/15 (RFC 2544, benchmarking).
NODE_NAME=tend-node
NODE_IF=tend-node0
NODE_IP=198.51.100.10
NODE_CIDR=198.51.100.0/24
LOCAL_CIDR=198.18.0.0/15
CLUSTER_CIDR=198.18.0.0/16
POD_SUBNET=198.18.0.0/24
POD_GATEWAY=198.18.0.1
SERVICE_CIDR=198.19.0.0/16
KUBERNETES_SERVICE_IP=198.19.0.1
DNS_IP=198.19.0.10
REVERSE_ZONES="18.198.in-addr.arpa 19.198.in-addr.arpa"
BRIDGE=tend-cni0
APISERVER_URL=https://$NODE_IP:6443
ETCD_URL=http://127.0.0.1:12379
ETCD_PEER_URL=http://127.0.0.1:12380
# moto_server: SQS and S3 for the Queue and backup operators, reachable from
# the host and from pods at the same URL.
MOTO_URL=http://$NODE_IP:5000

# --- Images -----------------------------------------------------------------
# The public names that real clusters pull. Each is built offline by
# images.sh and imported into containerd; nothing is ever pulled.
BUSYBOX_VERSION=1.35.0 # Debian bookworm's busybox-static; images.sh checks it
PAUSE_IMAGE=registry.k8s.io/pause:$PAUSE_VERSION
COREDNS_IMAGE=registry.k8s.io/coredns/coredns:$COREDNS_VERSION
LOCAL_PATH_IMAGE=docker.io/rancher/local-path-provisioner:$LOCAL_PATH_PROVISIONER_VERSION
BUSYBOX_IMAGE=docker.io/library/busybox:$BUSYBOX_VERSION
TEND_IMAGE=ghcr.io/tend-dev/tend:dev
etcd_image() { echo "gcr.io/etcd-development/etcd:$1"; }

# The variables that config and add-on templates may use, as ${NAME}.
template_vars=(
	STATE_DIR RUN_DIR PKI_DIR KUBECONFIG_DIR CONFIG_DIR LOCAL_PATH_DIR CONTAINERD_SOCKET
	NODE_NAME NODE_IP NODE_CIDR LOCAL_CIDR CLUSTER_CIDR POD_SUBNET POD_GATEWAY SERVICE_CIDR
	DNS_IP REVERSE_ZONES BRIDGE PAUSE_IMAGE COREDNS_IMAGE LOCAL_PATH_IMAGE BUSYBOX_IMAGE
)

# --- Messages ---------------------------------------------------------------

log() { echo "cluster: $*" >&2; }

die() {
	echo "cluster: error: $*" >&2
	exit 1
}

# log_file NAME prints the log file of component NAME.
log_file() { echo "$LOG_DIR/$1.log"; }

# die_component NAME MESSAGE fails, naming the component and its log, and
# shows the log's last lines.
die_component() {
	local name=$1 msg=$2 file
	file=$(log_file "$1")
	{
		echo "cluster: error: $name: $msg"
		echo "cluster: $name's log is $file; its last lines:"
		tail -n 25 "$file" 2>/dev/null | sed 's/^/    /'
	} >&2
	exit 1
}

# require_root fails unless the script runs as root: the node mounts,
# creates network interfaces and cgroups.
require_root() {
	[[ $(id -u) == 0 ]] || die "the local cluster needs root (it mounts, and creates interfaces and cgroups)"
}

# take_lock holds the cluster lock until the calling script exits, so that
# two scripts never change the cluster at once.
take_lock() {
	mkdir -p "$(dirname "$LOCK_FILE")"
	exec {cluster_lock}>"$LOCK_FILE"
	if ! flock -n "$cluster_lock"; then
		log "waiting for another hack/cluster script to finish"
		flock "$cluster_lock"
	fi
}

# tool NAME prints the path of a toolchain binary, building it if needed.
tool() { "$root/hack/toolchain.sh" "$1"; }

# cluster_tool NAME prints the path of hack/cluster/NAME (imagebuild,
# nodedrain), building it into the toolchain cache when its sources changed.
cluster_tool() {
	local name=$1 src=$root/hack/cluster sum dir
	sum=$(cat "$src/go.mod" "$src/go.sum" "$src/$name"/*.go | sha256sum | cut -c1-12)
	dir=$("$root/hack/toolchain.sh" --cache-dir)/cluster-$name-$sum
	if [[ ! -x $dir/$name ]]; then
		mkdir -p "$dir"
		(cd "$src" && CGO_ENABLED=0 go build -trimpath -o "$dir/$name.tmp.$$" "./$name") ||
			die "building hack/cluster/$name failed; see the go output above"
		mv -f "$dir/$name.tmp.$$" "$dir/$name"
	fi
	echo "$dir/$name"
}

# kubectl runs the toolchain's kubectl as the cluster's administrator.
kubectl() { "$(tool kubectl)" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }

# render TEMPLATE OUT writes TEMPLATE with every ${NAME} of template_vars
# replaced, and fails on any placeholder it does not know.
render() {
	local text var
	text=$(<"$1")
	for var in "${template_vars[@]}"; do
		text=${text//"\${$var}"/${!var}}
	done
	# shellcheck disable=SC2016 # a literal ${
	if [[ $text == *'${'* ]]; then
		die "$1 uses a placeholder that hack/cluster/lib.sh does not define: $(grep -o '\${[^}]*}' <<<"$text" | sort -u | tr '\n' ' ')"
	fi
	mkdir -p "$(dirname "$2")"
	printf '%s\n' "$text" >"$2.tmp"
	mv -f "$2.tmp" "$2"
}

# --- Processes --------------------------------------------------------------
# A PID file holds the PID and the process's start time (in clock ticks
# since boot, /proc/PID/stat field 22). Together they name one process for
# good: a PID that the kernel reused for another process has another start
# time, so a stale PID file never makes us signal a stranger.

pid_file() { echo "$PID_DIR/$1.pid"; }

# start_time PID prints the start time of process PID, or fails.
start_time() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	# The command name (field 2) may hold spaces; count from after it.
	stat=${stat##*) }
	# shellcheck disable=SC2086
	set -- $stat
	# Field 3 (state) is $1 here, so field 22 is ${20}. A zombie is gone.
	[[ $1 != Z ]] || return 1
	echo "${20}"
}

# running NAME succeeds when NAME's PID file names a live process.
running() {
	local pid started
	[[ -f $(pid_file "$1") ]] || return 1
	read -r pid started <"$(pid_file "$1")" || return 1
	[[ $pid =~ ^[0-9]+$ ]] && [[ $(start_time "$pid" 2>/dev/null) == "$started" ]]
}

# pid_of NAME prints the PID of a running component.
pid_of() {
	local pid _
	read -r pid _ <"$(pid_file "$1")"
	echo "$pid"
}

# start_daemon NAME COMMAND... starts COMMAND in a session of its own (so that
# a Ctrl-C of make or the end of the caller's session does not reach it),
# appends its output to NAME's log and records its PID file. The previous
# run's log is kept as NAME.log.1.
start_daemon() {
	local name=$1 log pid started
	shift
	log=$(log_file "$name")
	mkdir -p "$LOG_DIR" "$PID_DIR"
	[[ -f $log ]] && mv -f "$log" "$log.1"
	echo "=== $(date -u +%FT%TZ) starting: $*" >"$log"
	# The daemon gets none of our file descriptors but stdin, stdout and
	# stderr: it must not hold the cluster lock, nor a pipe that a caller
	# (make, go test) waits on. Without job control the subshell is not a
	# process group leader, so setsid does not fork and $! is the daemon.
	(
		for fd in /proc/"$BASHPID"/fd/*; do
			fd=${fd##*/}
			if ((fd > 2)); then eval "exec $fd>&-" 2>/dev/null || true; fi
		done
		exec setsid "$@"
	) </dev/null >>"$log" 2>&1 &
	pid=$!
	started=$(start_time "$pid") || die_component "$name" "exited at once"
	echo "$pid $started" >"$(pid_file "$name").tmp"
	mv -f "$(pid_file "$name").tmp" "$(pid_file "$name")"
}

# stop_daemon NAME [SECONDS] sends SIGTERM, waits up to SECONDS (default 30)
# for the process to exit, then sends SIGKILL. Only the process that NAME's
# PID file names is signalled.
stop_daemon() {
	local name=$1 wait=${2:-30} pid i
	if ! running "$name"; then
		rm -f "$(pid_file "$name")"
		return 0
	fi
	pid=$(pid_of "$name")
	log "stopping $name (pid $pid)"
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < wait * 10; i++)); do
		running "$name" || break
		sleep 0.1
	done
	if running "$name"; then
		log "$name did not stop within ${wait}s; killing it"
		kill -KILL "$pid" 2>/dev/null || true
		for ((i = 0; i < 50; i++)); do
			running "$name" || break
			sleep 0.1
		done
	fi
	rm -f "$(pid_file "$name")"
}

# cmdline PID prints the command line of PID with spaces between arguments.
cmdline() { tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline"; }

# strays BASENAME MARKER prints the PIDs of processes whose program is named
# BASENAME and whose command line contains MARKER (a path or address that
# only this cluster uses), other than those the PID files name. They are
# what a killed cluster leaves behind: a daemon whose PID file was lost, a
# containerd shim whose containerd was killed.
strays() {
	local base=$1 marker=$2 p pid argv0 known=" "
	for p in "$PID_DIR"/*.pid; do
		[[ -f $p ]] || continue
		read -r pid _ <"$p" && known+="$pid "
	done
	for p in /proc/[0-9]*; do
		pid=${p#/proc/}
		[[ $known == *" $pid "* || $pid == "$$" ]] && continue
		argv0=$(tr '\0' '\n' 2>/dev/null <"$p/cmdline" | head -n1) || continue
		[[ $base == '*' || ${argv0##*/} == "$base" ]] || continue
		[[ $(cmdline "$pid") == *"$marker"* ]] && echo "$pid"
	done
	return 0
}

# kill_strays BASENAME MARKER kills the strays (see strays) with SIGKILL:
# they belong to a cluster that is already dead.
kill_strays() {
	local pids
	pids=$(strays "$1" "$2")
	[[ -n $pids ]] || return 0
	log "killing $1 left behind by an earlier run: pids $(tr '\n' ' ' <<<"$pids")"
	# shellcheck disable=SC2086
	kill -KILL $pids 2>/dev/null || true
}

# wait_ready NAME SECONDS WHAT CHECK... runs CHECK until it succeeds. It
# fails, naming NAME and its log, when NAME's process exits or SECONDS pass.
# NAME is the host process to blame: for an add-on, the kubelet that runs it.
wait_ready() {
	local name=$1 timeout=$2 what=$3 deadline
	shift 3
	deadline=$((SECONDS + timeout))
	until "$@" >/dev/null 2>&1; do
		if ! running "$name"; then
			die_component "$name" "exited while waiting for $what"
		fi
		if ((SECONDS >= deadline)); then
			die_component "$name" "$what: not within ${timeout}s"
		fi
		sleep 0.2
	done
}

# http_ok URL [CURL ARGS...] succeeds when URL answers 200.
http_ok() {
	local url=$1
	shift
	curl --silent --fail --max-time 2 --noproxy '*' "$@" "$url" >/dev/null
}

# apiserver_ok PATH succeeds when the apiserver answers PATH with 200.
apiserver_ok() {
	http_ok "$APISERVER_URL$1" --cacert "$PKI_DIR/ca.crt" --cert "$PKI_DIR/admin.crt" --key "$PKI_DIR/admin.key"
}

# --- Mounts and cgroups -----------------------------------------------------

# unmount_under DIR... unmounts every mount point at or below each DIR,
# deepest first (lazily when busy).
unmount_under() {
	local dir mnt
	for dir in "$@"; do
		[[ -d $dir ]] || continue
		findmnt -rn -o TARGET | awk -v d="$dir" '$0 == d || index($0, d "/") == 1' | sort -r | while read -r mnt; do
			# findmnt escapes spaces and the like as \x20.
			mnt=$(printf '%b' "$mnt")
			umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || log "could not unmount $mnt"
		done
	done
}

# kill_cgroup_tree kills every process in the pod cgroups (cgroupRoot /tend
# in kubelet.yaml) and removes those cgroups, in every hierarchy.
kill_cgroup_tree() {
	local roots procs tries
	roots=$(find /sys/fs/cgroup -mindepth 1 -maxdepth 2 -type d -name tend 2>/dev/null)
	[[ -n $roots ]] || return 0
	for ((tries = 0; tries < 50; tries++)); do
		# shellcheck disable=SC2086
		procs=$(find $roots -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)
		[[ -n $procs ]] || break
		((tries > 0)) || log "killing $(wc -w <<<"$procs") pod processes left behind by an earlier run"
		# shellcheck disable=SC2086
		kill -KILL $procs 2>/dev/null || true
		sleep 0.1
	done
	# shellcheck disable=SC2086
	find $roots -depth -type d -exec rmdir {} + 2>/dev/null || true
}
