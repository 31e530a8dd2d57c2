#!/usr/bin/env bash
# Builds kubectl-tend's release archives and its krew manifest.
#
#   hack/plugin-dist.sh VERSION [DIR [OS/ARCH ...]]
#
# writes DIR (default dist/plugin) /kubectl-tend_OS_ARCH.tar.gz for each
# platform (default linux/amd64 linux/arm64 darwin/amd64 darwin/arm64) and
# DIR/tend.yaml, the krew manifest whose URIs point at the GitHub release
# VERSION and whose sha256 are the archives'. `make plugin-dist` runs it;
# `make test-chart` installs a host archive with krew, offline.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
version=${1:?usage: hack/plugin-dist.sh VERSION [DIR [OS/ARCH ...]]}
dir=${2:-$root/dist/plugin}
shift $(($# < 2 ? $# : 2))
platforms=("$@")
[[ ${#platforms[@]} -gt 0 ]] || platforms=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)
mkdir -p "$dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

entries=""
for p in "${platforms[@]}"; do
	os=${p%/*} arch=${p#*/}
	name=kubectl-tend_${os}_${arch}
	mkdir -p "$work/$name"
	(cd "$root" && CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath \
		-ldflags "-s -w -X github.com/tend-dev/tend/internal/plugin.Version=$version" \
		-o "$work/$name/kubectl-tend" ./cmd/kubectl-tend)
	# Reproducible: fixed owner, mode and time.
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 --mode=0755 \
		-C "$work/$name" -czf "$dir/$name.tar.gz" kubectl-tend
	sha=$(sha256sum "$dir/$name.tar.gz" | cut -d' ' -f1)
	entries+="  - selector:
      matchLabels:
        os: $os
        arch: $arch
    uri: https://github.com/tend-dev/tend/releases/download/$version/$name.tar.gz
    sha256: $sha
    bin: kubectl-tend
    files:
    - from: kubectl-tend
      to: .
"
done
cat >"$dir/tend.yaml" <<EOM
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: tend
spec:
  version: $version
  homepage: https://github.com/tend-dev/tend
  shortDescription: Inspect and operate Tend's etcd clusters, PodSets and Queues
  description: |
    kubectl tend explains Tend's resources at a glance (members, backups,
    certificates, conditions, warnings), writes support bundles with Secrets
    redacted, and takes backups, restores, pauses and resumes by creating or
    patching Tend's resources.
  platforms:
$entries
EOM
echo "$dir/tend.yaml"
