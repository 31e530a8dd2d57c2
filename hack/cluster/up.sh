#!/usr/bin/env bash
# Brings up the local single-node cluster (make cluster-up), or repairs it.
#
# Each step is skipped when what it makes is already there and healthy, so
# running it again is cheap and safe. It also recovers a cluster that was
# killed: stale PID files are recognized (a PID file names a process by PID
# and start time), and starting containerd first clears what a dead node left
# behind (shims, pod processes, mounts, network namespaces, CNI leases).
#
# Afterwards: export KUBECONFIG=/var/lib/tend-cluster/kubeconfig
# docs/cluster.md describes the cluster and how to mend it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$root/hack/cluster/host.sh"
source "$root/hack/cluster/pki.sh"
source "$root/hack/cluster/components.sh"
source "$root/hack/cluster/images.sh"

# build_binaries builds whatever the node needs and the toolchain cache lacks.
# A cold build takes many minutes on two cores; later runs find everything.
build_binaries() {
	local t missing=()
	for t in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl \
		containerd containerd-shim-runc-v2 ctr coredns local-path-provisioner; do
		missing+=("$t")
	done
	"$root/hack/toolchain.sh" "${missing[@]}" >/dev/null
	cluster_tool nodedrain >/dev/null
	cluster_tool imagebuild >/dev/null
}

# epoch TIME prints an API time stamp in seconds since the epoch.
epoch() { date -u -d "$1" +%s; }

# node_ready_since SECONDS succeeds when the node is Ready and kubelet has
# renewed the node's Lease at SECONDS (since the epoch) or later (SECONDS
# empty: at any time). After a restart the Lease proves that this kubelet is
# up; the Ready condition may still be the killed one's, but a node that is
# not ready fails the add-ons' wait below.
node_ready_since() {
	local ready renewed
	ready=$(kubectl get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) || return 1
	[[ $ready == True ]] || return 1
	[[ -n $1 ]] || return 0
	renewed=$(kubectl -n kube-node-lease get lease "$NODE_NAME" -o jsonpath='{.spec.renewTime}' 2>/dev/null) || return 1
	[[ -n $renewed ]] && (($(epoch "$renewed") >= $1))
}

# pods_ready_since NAMESPACE SELECTOR SECONDS succeeds when a pod matching
# SELECTOR is Ready with every container started at SECONDS (since the epoch)
# or later (SECONDS empty: at any time), that is, by this containerd and not
# a killed one.
pods_ready_since() {
	local ready started t ok=""
	while read -r ready started; do
		[[ $ready == True && -n $started ]] || continue
		if [[ -n $3 ]]; then
			for t in $started; do (($(epoch "$t") >= $3)) || continue 2; done
		fi
		ok=1
	done < <(kubectl -n "$1" get pods -l "$2" \
		-o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status} {.status.containerStatuses[*].state.running.startedAt}{"\n"}{end}' 2>/dev/null)
	[[ -n $ok ]]
}

# apply_addons renders and applies CoreDNS and the local-path provisioner.
apply_addons() {
	local f out
	for f in "$root"/hack/cluster/addons/*.yaml; do
		out=$CONFIG_DIR/addons/$(basename "$f")
		render "$f" "$out"
		kubectl apply --server-side --force-conflicts --field-manager tend-cluster -f "$out" >/dev/null ||
			die "applying the add-on $f failed"
	done
}

main() {
	require_root
	take_lock
	# A node status or a pod status from before the start of kubelet (or of
	# containerd, which runs the containers) says nothing about the node now.
	local start=$SECONDS kubelet_since="" pods_since="" name
	mkdir -p "$STATE_DIR" "$RUN_DIR" "$LOG_DIR" "$CONFIG_DIR"

	host_ensure_packages
	build_binaries
	host_network_up
	pki_ensure

	for name in etcd kube-apiserver kube-controller-manager kube-scheduler; do
		ensure "$name"
	done
	if ! running containerd; then
		pods_since=$(date +%s)
		ensure containerd
	fi
	for name in pause coredns local-path-provisioner busybox; do
		load "$name"
	done
	prune_untagged
	if ! running kubelet; then
		kubelet_since=$(date +%s)
		ensure kubelet
	fi
	ensure kube-proxy
	ensure moto

	wait_ready kubelet 120 "node $NODE_NAME Ready" node_ready_since "$kubelet_since"
	log "node $NODE_NAME is Ready ($((SECONDS - start))s since the start)"
	apply_addons
	wait_ready kubelet 180 "CoreDNS Ready (kubectl -n kube-system get pods -l k8s-app=kube-dns)" \
		pods_ready_since kube-system k8s-app=kube-dns "$pods_since"
	wait_ready kubelet 180 "local-path-provisioner Ready (kubectl -n local-path-storage get pods)" \
		pods_ready_since local-path-storage app=local-path-provisioner "$pods_since"

	log "up in $((SECONDS - start))s: node $NODE_NAME ($NODE_IP) is Ready, CoreDNS and the local-path StorageClass serve"
	cat >&2 <<EOF

  export KUBECONFIG=$ADMIN_KUBECONFIG
  \$(hack/toolchain.sh kubectl) get pods -A      # or hack/cluster/kubectl.sh get pods -A

  moto (SQS, S3) for host and pods: $MOTO_URL
  logs: $LOG_DIR/<component>.log      stop: make cluster-down      docs: docs/cluster.md

EOF
}

main "$@"
