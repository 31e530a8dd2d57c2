#!/usr/bin/env bash
# kubectl from the toolchain, as the local cluster's administrator:
#   hack/cluster/kubectl.sh get pods -A
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
exec "$(tool kubectl)" --kubeconfig "$ADMIN_KUBECONFIG" "$@"
