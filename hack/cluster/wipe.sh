#!/usr/bin/env bash
# Deletes the local cluster (make cluster-wipe): stops it, then removes all
# of its state (etcd's data, PKI, containerd's images and snapshots, volumes,
# logs) and whatever it left on the machine. The next make cluster-up starts
# a new cluster. The image tarballs and the toolchain in ~/.cache/tend stay.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

main() {
	require_root
	"$root/hack/cluster/down.sh" || log "stopping failed (see above); removing the state anyway"
	take_lock
	source "$root/hack/cluster/host.sh"
	# down.sh stops what its PID files name; a cluster whose PID files are
	# lost may still run.
	local name
	for name in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy etcd containerd containerd-shim-runc-v2; do
		kill_strays "$name" "$STATE_DIR"
		kill_strays "$name" "$RUN_DIR"
	done
	kill_strays '*' "moto_server -H $NODE_IP"
	kill_cgroup_tree
	unmount_under "$RUN_DIR" "$STATE_DIR"
	host_network_down
	rm -rf "$STATE_DIR" "$RUN_DIR"
	# libcni caches each attachment's result under /var/lib/cni/results.
	rm -f /var/lib/cni/results/tend-* 2>/dev/null || true
	# kubelet links container logs into /var/log/containers.
	find /var/log/containers -maxdepth 1 -type l -lname "$STATE_DIR/*" -delete 2>/dev/null || true
	log "wiped $STATE_DIR and $RUN_DIR"
}

main "$@"
