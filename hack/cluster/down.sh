#!/usr/bin/env bash
# Stops the local cluster (make cluster-down), keeping its state: etcd's data,
# the images, the volumes. make cluster-up starts it again where it stopped;
# the pods come back as after a node reboot.
#
# The node goes first, as on a graceful shutdown: kubelet stops, then every
# pod sandbox is stopped and removed through CRI, which runs CNI DEL for each
# (so IP leases, veths and hostPort rules go), then containerd stops and
# kube-proxy removes its iptables chains. The control plane goes last. Safe
# to run on a stopped or half-dead cluster.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$root/hack/cluster/host.sh"
source "$root/hack/cluster/components.sh"

# drain_node removes every pod sandbox while containerd runs and kubelet does
# not (kubelet would start them again).
drain_node() {
	running containerd || return 0
	log "stopping every pod through CRI"
	"$(cluster_tool nodedrain)" -endpoint "unix://$CONTAINERD_SOCKET" >&2 ||
		log "some pods could not be stopped cleanly (see above); the next make cluster-up clears what they left"
}

main() {
	require_root
	take_lock
	stop_daemon moto
	stop_daemon kubelet
	drain_node
	stop_daemon containerd
	stop_daemon kube-proxy
	# kube-proxy --cleanup removes the KUBE-* chains of every proxy mode.
	"$(tool kube-proxy)" --cleanup >/dev/null 2>&1 || log "kube-proxy --cleanup failed; its chains stay until the next start"
	stop_daemon kube-scheduler
	stop_daemon kube-controller-manager
	stop_daemon kube-apiserver
	stop_daemon etcd
	# What a killed node may still hold (nothing, after a clean drain).
	kill_strays containerd-shim-runc-v2 "$RUN_DIR"
	kill_cgroup_tree
	unmount_under "$RUN_DIR/containerd" "$STATE_DIR/kubelet" "$STATE_DIR/containerd"
	host_network_down
	log "stopped; the state stays in $STATE_DIR (make cluster-up starts it again, make cluster-wipe deletes it)"
}

main "$@"
