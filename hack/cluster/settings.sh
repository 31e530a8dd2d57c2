#!/usr/bin/env bash
# Prints the local cluster's settings that tools and tests rely on, as
# KEY=value lines (test/e2e/framework reads them), so that hack/cluster/lib.sh
# and hack/versions.env stay the only places that define them.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cat <<EOF
KUBECONFIG=$ADMIN_KUBECONFIG
STATE_DIR=$STATE_DIR
LOG_DIR=$LOG_DIR
NODE_NAME=$NODE_NAME
NODE_IP=$NODE_IP
MOTO_URL=$MOTO_URL
STORAGE_CLASS=local-path
BUSYBOX_IMAGE=$BUSYBOX_IMAGE
PAUSE_IMAGE=$PAUSE_IMAGE
TEND_IMAGE=$TEND_IMAGE
ETCD_VERSION=$ETCD_VERSION
ETCD_IMAGE=$(etcd_image "$ETCD_VERSION")
ETCD_UPGRADE_FROM_VERSION=$ETCD_UPGRADE_FROM_VERSION
ETCD_UPGRADE_FROM_IMAGE=$(etcd_image "$ETCD_UPGRADE_FROM_VERSION")
EOF
