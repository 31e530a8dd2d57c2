#!/usr/bin/env bash
# Deploys Tend with the manifests that users apply (kubectl apply -k
# config/<overlay>), with the manager's image set, and waits for the manager
# to be available.
#
#   hack/cluster/deploy.sh --local        the local cluster: build and import the
#                                         tend image, apply config/local with the
#                                         image pinned to its digest (make run, e2e)
#   hack/cluster/deploy.sh IMAGE          any cluster in $KUBECONFIG: apply
#                                         config/default with IMAGE (make deploy)
#
# Pinning the digest makes a new build roll out and an unchanged one a no-op.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# apply_with_image OVERLAY IMAGE applies config/OVERLAY with the manager's
# image replaced by IMAGE (NAME:TAG or NAME@DIGEST), through a kustomization
# in .cache/ (kustomize only takes resources by relative path).
apply_with_image() {
	local overlay=$1 image=$2 dir name ref
	mkdir -p "$root/.cache"
	dir=$(mktemp -d "$root/.cache/deploy-XXXXXX")
	# shellcheck disable=SC2064
	trap "rm -rf '$dir'" RETURN
	if [[ $image == *@* ]]; then
		name=${image%@*} ref="  digest: ${image#*@}"
	else
		name=${image%:*} ref="  newTag: ${image##*:}"
	fi
	cat >"$dir/kustomization.yaml" <<EOK
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../../config/$overlay
images:
- name: ghcr.io/tend-dev/tend
  newName: $name
$ref
EOK
	"$kubectl" apply --server-side --force-conflicts --field-manager tend-deploy -k "$dir" >/dev/null ||
		die "kubectl apply -k config/$overlay failed"
}

main() {
	local image overlay
	case ${1:-} in
	--local)
		require_root
		running kube-apiserver || die "the local cluster is not running; start it with make cluster-up"
		export KUBECONFIG=$ADMIN_KUBECONFIG
		"$root/hack/cluster/images.sh" load tend
		image=$("$root/hack/cluster/images.sh" ref tend)
		overlay=local
		;;
	"" | -*)
		sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
		exit 2
		;;
	*)
		image=$1
		overlay=default
		;;
	esac
	kubectl=$(tool kubectl)
	log "deploying config/$overlay with $image"
	apply_with_image "$overlay" "$image"
	"$kubectl" -n tend-system rollout status deployment/tend-manager --timeout 180s >&2 ||
		die "the manager did not become available; see kubectl -n tend-system describe pods and kubectl -n tend-system logs deployment/tend-manager"
	[[ $overlay == local ]] && wait_webhook_reachable
}

# wait_webhook_reachable waits until the conversion webhook's Service
# accepts connections from this host, where the local cluster's apiserver
# runs: a new manager pod is Ready some moments before kube-proxy routes
# the Service to it, and the apiserver's conversions fail until then.
wait_webhook_reachable() {
	local ip i
	ip=$("$kubectl" -n tend-system get service tend-webhook-service -o jsonpath='{.spec.clusterIP}') ||
		die "reading the webhook Service's address failed"
	for ((i = 0; i < 120; i++)); do
		if timeout 1 bash -c ">/dev/tcp/$ip/443" 2>/dev/null; then
			return 0
		fi
		sleep 0.5
	done
	die "the conversion webhook's Service ($ip:443) refuses connections a minute after the manager became available; see kubectl -n tend-system get endpointslices"
}

main "$@"
