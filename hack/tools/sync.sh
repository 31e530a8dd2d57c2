#!/usr/bin/env bash
# Keeps hack/tools/*/go.mod in step with hack/versions.env, the one place where
# versions are pinned.
#
#   hack/tools/sync.sh           rewrite each go.mod from versions.env, then tidy
#                                and align the shared modules (align.py)
#   hack/tools/sync.sh --check   fail if a go.mod disagrees with versions.env
#                                or the alignment (offline; `make verify` runs it)
set -euo pipefail

tools=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$tools/../.." && pwd)
# shellcheck source=../versions.env
source "$tools/../versions.env"

# The modules each group pins, as "group module version" lines. A module whose
# siblings must move with it (Kubernetes staging, etcd) is handled below.
pins() {
	echo "kubernetes k8s.io/kubernetes $KUBERNETES_VERSION"
	for m in etcdctl etcdutl server; do echo "etcd go.etcd.io/etcd/$m/v3 $ETCD_VERSION"; done
	for m in etcdctl etcdutl server; do echo "etcd-upgrade-from go.etcd.io/etcd/$m/v3 $ETCD_UPGRADE_FROM_VERSION"; done
	echo "containerd github.com/containerd/containerd/v2 $CONTAINERD_VERSION"
	echo "coredns github.com/coredns/coredns $COREDNS_VERSION"
	echo "local-path-provisioner github.com/rancher/local-path-provisioner $LOCAL_PATH_PROVISIONER_VERSION"
	echo "kwok sigs.k8s.io/kwok $KWOK_VERSION"
	echo "controller-gen sigs.k8s.io/controller-tools $CONTROLLER_TOOLS_VERSION"
	echo "golangci-lint github.com/golangci/golangci-lint/v2 $GOLANGCI_LINT_VERSION"
	echo "helm helm.sh/helm/v4 $HELM_VERSION"
	echo "krew sigs.k8s.io/krew $KREW_VERSION"
}

# aligned prints the module directories whose shared requirements align.py
# raises to one version each, so that the Go build cache serves their common
# packages once: the tools that make test builds before and beside its tests,
# Tend's own module (its test and image builds) and hack/cluster's. The etcd
# groups are not among them: they are Tend's operand, built with exactly the
# dependencies of their release. Nor are golangci-lint (its analysers follow
# their own golang.org/x/tools), kwok (benchmarks only) and krew (client-go
# v11, which no later client-go replaces).
aligned() {
	local group
	for group in kubernetes containerd coredns local-path-provisioner controller-gen helm; do
		echo "$tools/$group"
	done
	echo "$root"
	echo "$root/hack/cluster"
}

# align [--check] runs align.py over the aligned modules, leaving the pinned
# modules to versions.env.
align() {
	local exclude
	exclude=$(pins | awk '{print $2}' | sort -u | paste -sd,)
	# shellcheck disable=SC2046 # one directory per line, no spaces
	python3 "$tools/align.py" --exclude "$exclude" "$@" $(aligned)
}

# required GROUP MODULE prints the version that GROUP's go.mod requires of MODULE.
required() {
	(cd "$tools/$1" && go mod edit -json) |
		awk -v m="\"$2\"" '$1 == "\"Path\":" && $2 == m"," { getline; gsub(/[",]/, "", $2); print $2; exit }'
}

# replaced GROUP prints GROUP's replace directives as "old new version" lines.
replaced() {
	(cd "$tools/$1" && go mod edit -json) | python3 -c '
import json, sys
for r in json.load(sys.stdin).get("Replace") or []:
    print(r["Old"]["Path"], r["New"]["Path"], r["New"].get("Version", ""))'
}

# etcd_version GROUP prints the etcd version that an etcd group pins its
# sibling modules to.
etcd_version() {
	case $1 in
	etcd) echo "$ETCD_VERSION" ;;
	etcd-upgrade-from) echo "$ETCD_UPGRADE_FROM_VERSION" ;;
	esac
}

check() {
	local bad=0 group mod want got
	while read -r group mod want; do
		got=$(required "$group" "$mod")
		if [[ $got != "$want" ]]; then
			echo "hack/tools/$group/go.mod requires $mod $got, but hack/versions.env pins $want; run hack/tools/sync.sh" >&2
			bad=1
		fi
	done < <(pins)
	# Kubernetes staging modules sit at v0.MINOR.PATCH; etcd's siblings at the etcd version.
	local staging=v0.${KUBERNETES_VERSION#v1.}
	while read -r old new version; do
		if [[ $old != "$new" || $version != "$staging" ]]; then
			echo "hack/tools/kubernetes/go.mod replaces $old with $new $version, want $staging" >&2
			bad=1
		fi
	done < <(replaced kubernetes)
	for group in etcd etcd-upgrade-from; do
		want=$(etcd_version "$group")
		while read -r old new version; do
			if [[ $old != "$new" || $version != "$want" ]]; then
				echo "hack/tools/$group/go.mod replaces $old with $new $version, want $want" >&2
				bad=1
			fi
		done < <(replaced "$group")
	done
	align --check || bad=1
	return $bad
}

sync() {
	local group mod version
	while read -r group mod version; do
		(cd "$tools/$group" && go mod edit -require="$mod@$version")
	done < <(pins)
	local staging=v0.${KUBERNETES_VERSION#v1.} old
	for old in $(replaced kubernetes | awk '{print $1}'); do
		(cd "$tools/kubernetes" && go mod edit -replace="$old=$old@$staging")
	done
	for group in etcd etcd-upgrade-from; do
		for old in $(replaced "$group" | awk '{print $1}'); do
			(cd "$tools/$group" && go mod edit -replace="$old=$old@$(etcd_version "$group")")
		done
	done
	for group in $(pins | awk '{print $1}' | sort -u); do
		(cd "$tools/$group" && go mod tidy)
	done
	align
	check
}

case ${1:-} in
--check) check ;;
"") sync ;;
*)
	sed -n '2,7p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac
