#!/usr/bin/env bash
# Installs kubectl-tend with the pinned krew from an archive and manifest
# that hack/plugin-dist.sh builds for this machine, offline (krew install
# --manifest --archive checks the manifest and the archive's sha256), and
# runs the installed plugin.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
krew=$("$root/hack/toolchain.sh" krew)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
platform=$(go env GOOS)/$(go env GOARCH)
"$root/hack/plugin-dist.sh" v0.0.0-check "$work/dist" "$platform" >/dev/null
export KREW_ROOT=$work/krew
"$krew" install --manifest="$work/dist/tend.yaml" --archive="$work/dist/kubectl-tend_${platform/\//_}.tar.gz" >"$work/install.log" 2>&1 ||
	{ cat "$work/install.log" >&2; echo "krew-check: krew refused the manifest or the archive" >&2; exit 1; }
out=$("$KREW_ROOT/bin/kubectl-tend" version --kubeconfig=/dev/null 2>&1 || true)
[[ $out == *"kubectl-tend: v0.0.0-check"* ]] || { echo "krew-check: the installed plugin printed: $out" >&2; exit 1; }
echo "krew-check: krew installed kubectl-tend v0.0.0-check from the generated manifest"
