#!/usr/bin/env bash
# Says which of the local cluster's host processes run, with their PIDs and
# logs, and whether the apiserver answers (make cluster-status). It changes
# nothing; make cluster-up starts what is missing.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

status=0
for name in etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy moto; do
	if running "$name"; then
		printf '%-24s running (pid %s)   %s\n' "$name" "$(pid_of "$name")" "$(log_file "$name")"
	else
		printf '%-24s NOT RUNNING        %s\n' "$name" "$(log_file "$name")"
		status=1
	fi
done
if [[ -f $PKI_DIR/admin.crt ]] && apiserver_ok /readyz; then
	echo "apiserver: ready at $APISERVER_URL; export KUBECONFIG=$ADMIN_KUBECONFIG"
else
	echo "apiserver: not answering at $APISERVER_URL"
	status=1
fi
exit $status
