# shellcheck shell=bash
# How each host process of the local cluster starts and when it is ready.
# Source it after lib.sh. Each start_X starts X unless it runs already, and
# returns once X is ready; each fails naming X and its log.

# ensure COMPONENT starts COMPONENT if its PID file names no live process. A
# process of ours that lost its PID file (see strays) is killed first, so
# that it cannot hold the port.
ensure() {
	local name=$1
	if running "$name"; then
		return 0
	fi
	rm -f "$(pid_file "$name")"
	case $name in
	moto) kill_strays '*' "moto_server -H $NODE_IP" ;; # a Python script: any interpreter
	*) kill_strays "$name" "$STATE_DIR" ;;
	esac
	local start=$SECONDS
	log "starting $name"
	"start_${name//-/_}"
	log "$name is ready ($((SECONDS - start))s)"
}

start_etcd() {
	mkdir -p "$STATE_DIR/etcd"
	chmod 700 "$STATE_DIR/etcd"
	start_daemon etcd "$(tool etcd)" --name "$NODE_NAME" --data-dir "$STATE_DIR/etcd" \
		--listen-client-urls "$ETCD_URL" --advertise-client-urls "$ETCD_URL" \
		--listen-peer-urls "$ETCD_PEER_URL" --initial-advertise-peer-urls "$ETCD_PEER_URL" \
		--initial-cluster "$NODE_NAME=$ETCD_PEER_URL" \
		--quota-backend-bytes $((4 << 30)) --log-level warn
	wait_ready etcd 60 "etcd health at $ETCD_URL/health" http_ok "$ETCD_URL/health"
}

start_kube_apiserver() {
	cp "$root/hack/cluster/config/audit-policy.yaml" "$CONFIG_DIR/audit-policy.yaml"
	start_daemon kube-apiserver "$(tool kube-apiserver)" \
		--advertise-address "$NODE_IP" --bind-address "$NODE_IP" --secure-port 6443 \
		--etcd-servers "$ETCD_URL" \
		--service-cluster-ip-range "$SERVICE_CIDR" \
		--client-ca-file "$PKI_DIR/ca.crt" \
		--tls-cert-file "$PKI_DIR/apiserver.crt" --tls-private-key-file "$PKI_DIR/apiserver.key" \
		--kubelet-client-certificate "$PKI_DIR/apiserver-kubelet-client.crt" \
		--kubelet-client-key "$PKI_DIR/apiserver-kubelet-client.key" \
		--kubelet-preferred-address-types InternalIP \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$PKI_DIR/sa.pub" \
		--service-account-signing-key-file "$PKI_DIR/sa.key" \
		--authorization-mode Node,RBAC \
		--enable-admission-plugins NodeRestriction \
		--allow-privileged \
		--audit-policy-file "$CONFIG_DIR/audit-policy.yaml" \
		--audit-log-path "$LOG_DIR/audit.log" --audit-log-format json \
		--audit-log-maxsize 100 --audit-log-maxbackup 1 \
		--profiling=false \
		--v 1
	wait_ready kube-apiserver 120 "the apiserver's /readyz at $APISERVER_URL" apiserver_ok /readyz
}

start_kube_controller_manager() {
	local kc=$KUBECONFIG_DIR/kube-controller-manager.kubeconfig
	start_daemon kube-controller-manager "$(tool kube-controller-manager)" \
		--kubeconfig "$kc" --authentication-kubeconfig "$kc" --authorization-kubeconfig "$kc" \
		--bind-address "$NODE_IP" --secure-port 10257 \
		--leader-elect=false \
		--use-service-account-credentials \
		--service-account-private-key-file "$PKI_DIR/sa.key" --root-ca-file "$PKI_DIR/ca.crt" \
		--cluster-signing-cert-file "$PKI_DIR/ca.crt" --cluster-signing-key-file "$PKI_DIR/ca.key" \
		--allocate-node-cidrs --cluster-cidr "$CLUSTER_CIDR" --node-cidr-mask-size 24 \
		--service-cluster-ip-range "$SERVICE_CIDR" \
		--profiling=false \
		--v 1
	wait_ready kube-controller-manager 60 "kube-controller-manager's /healthz" \
		http_ok "https://$NODE_IP:10257/healthz" --insecure
}

start_kube_scheduler() {
	local kc=$KUBECONFIG_DIR/kube-scheduler.kubeconfig
	render "$root/hack/cluster/config/kube-scheduler.yaml" "$CONFIG_DIR/kube-scheduler.yaml"
	start_daemon kube-scheduler "$(tool kube-scheduler)" --config "$CONFIG_DIR/kube-scheduler.yaml" \
		--authentication-kubeconfig "$kc" --authorization-kubeconfig "$kc" \
		--bind-address "$NODE_IP" --secure-port 10259 --profiling=false --v 1
	wait_ready kube-scheduler 60 "kube-scheduler's /healthz" http_ok "https://$NODE_IP:10259/healthz" --insecure
}

# start_containerd starts containerd on a clean runtime state (see
# node_reset_runtime), then removes the pod sandboxes that its metadata still
# lists from an earlier run, which releases their IP leases.
start_containerd() {
	node_reset_runtime
	render "$root/hack/cluster/config/containerd.toml" "$CONFIG_DIR/containerd.toml"
	render "$root/hack/cluster/config/10-tend.conflist" "$CONFIG_DIR/cni/10-tend.conflist"
	mkdir -p "$STATE_DIR/containerd" "$RUN_DIR/containerd"
	# PATH finds our containerd-shim-runc-v2. Image pulls go to a dead proxy,
	# so that a missing image fails at once instead of reaching out.
	start_daemon containerd env \
		PATH="$(dirname "$(tool containerd-shim-runc-v2)"):/usr/sbin:/usr/bin:/sbin:/bin" \
		HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 NO_PROXY= \
		"$(tool containerd)" --config "$CONFIG_DIR/containerd.toml"
	wait_ready containerd 60 "containerd's socket $CONTAINERD_SOCKET" ctr version
	"$(cluster_tool nodedrain)" -endpoint "unix://$CONTAINERD_SOCKET" >/dev/null ||
		die_component containerd "could not remove the pod sandboxes of an earlier run"
	# No sandbox exists now: every lease left is stale.
	find "$STATE_DIR/cni/networks" -type f ! -name lock ! -name 'last_reserved_ip*' -delete 2>/dev/null || true
}

# ensure_cgroup_root makes the cgroup that kubelet puts every pod under
# (cgroupRoot in kubelet.yaml) in each cgroup v1 hierarchy; kubelet refuses
# to start without it. A new cpuset cgroup starts with no CPUs and no memory
# nodes, so it gets its parent's.
ensure_cgroup_root() {
	local mnt
	while read -r mnt; do
		mkdir -p "$mnt/tend"
		if [[ -f $mnt/tend/cpuset.cpus && -z $(<"$mnt/tend/cpuset.cpus") ]]; then
			cat "$mnt/cpuset.cpus" >"$mnt/tend/cpuset.cpus"
			cat "$mnt/cpuset.mems" >"$mnt/tend/cpuset.mems"
		fi
	done < <(awk '$3 == "cgroup" {print $2}' /proc/mounts)
}

start_kubelet() {
	ensure_cgroup_root
	render "$root/hack/cluster/config/kubelet.yaml" "$CONFIG_DIR/kubelet.yaml"
	cp "$root/hack/cluster/config/resolv.conf" "$CONFIG_DIR/resolv.conf"
	mkdir -p "$STATE_DIR/kubelet" "$STATE_DIR/pod-logs"
	start_daemon kubelet "$(tool kubelet)" --config "$CONFIG_DIR/kubelet.yaml" \
		--kubeconfig "$KUBECONFIG_DIR/kubelet.kubeconfig" \
		--root-dir "$STATE_DIR/kubelet" --cert-dir "$PKI_DIR/kubelet-serving" \
		--hostname-override "$NODE_NAME" --node-ip "$NODE_IP" \
		--v 1
	wait_ready kubelet 60 "kubelet's /healthz" http_ok "http://$NODE_IP:10248/healthz"
}

start_kube_proxy() {
	render "$root/hack/cluster/config/kube-proxy.yaml" "$CONFIG_DIR/kube-proxy.yaml"
	start_daemon kube-proxy "$(tool kube-proxy)" --config "$CONFIG_DIR/kube-proxy.yaml" --v 1
	wait_ready kube-proxy 60 "kube-proxy's /livez" http_ok "http://$NODE_IP:10256/livez"
}

# start_moto starts moto_server on the node address, where both this host and
# pods reach it. Its own outbound HTTP goes to a dead proxy.
start_moto() {
	local bin
	bin=$(moto_binary)
	start_daemon moto env -u AWS_PROFILE -u AWS_ENDPOINT_URL \
		HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 \
		http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9 \
		NO_PROXY="127.0.0.1,localhost,$NODE_IP" no_proxy="127.0.0.1,localhost,$NODE_IP" \
		AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_DEFAULT_REGION=us-east-1 \
		"$bin" -H "$NODE_IP" -p "${MOTO_URL##*:}"
	wait_ready moto 60 "moto_server at $MOTO_URL" moto_answers
}

# moto_binary prints moto_server's path: $MOTO_SERVER, PATH, then pyenv's
# shims, as internal/testing/moto finds it.
moto_binary() {
	local p
	for p in "${MOTO_SERVER:-}" "$(command -v moto_server || true)" "${PYENV_ROOT:-$HOME/.pyenv}/shims/moto_server"; do
		[[ -n $p && -x $p ]] && {
			echo "$p"
			return
		}
	done
	die "moto_server is not in \$MOTO_SERVER, PATH or ~/.pyenv/shims: install it with pip install 'moto[server]==5.2.1'"
}

# moto_answers succeeds when moto, and not some other server, answers at
# MOTO_URL: moto refuses a GET of its reset endpoint in its own words.
moto_answers() {
	curl --silent --max-time 2 --noproxy '*' "$MOTO_URL/moto-api/reset" | grep -q 'reset Moto'
}

# ctr runs our ctr against our containerd, in the namespace that CRI uses.
# Its warning that cgroup v1 is deprecated, printed at every call, is dropped.
ctr() {
	"$(tool ctr)" --address "$CONTAINERD_SOCKET" --namespace k8s.io "$@" 2> >(grep -v 'support for cgroup v1 is deprecated' >&2)
}

# node_reset_runtime clears what a killed containerd and kubelet leave
# behind, as a reboot would: shims and pod processes, mounts (rootfs
# overlays, /dev/shm of sandboxes, network namespaces, pod volumes),
# containerd's runtime state and the bridge. It runs only while containerd is
# down, and stops kubelet first. Images, snapshots and containerd's metadata
# stay; start_containerd then removes the stale sandboxes through CRI.
node_reset_runtime() {
	stop_daemon kubelet
	kill_strays containerd-shim-runc-v2 "$RUN_DIR"
	kill_strays containerd "$STATE_DIR"
	kill_cgroup_tree
	unmount_under "$RUN_DIR/containerd" "$STATE_DIR/kubelet" "$STATE_DIR/containerd"
	rm -rf "$RUN_DIR/containerd"
	ip link del "$BRIDGE" 2>/dev/null || true
}
