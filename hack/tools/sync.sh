#!/usr/bin/env bash
# Keeps hack/tools/*/go.mod in step with hack/versions.env, the one place where
# versions are pinned.
#
#   hack/tools/sync.sh           rewrite each go.mod from versions.env, then tidy
#   hack/tools/sync.sh --check   fail if a go.mod disagrees with versions.env
#                                (offline; `make verify` runs it)
set -euo pipefail

tools=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../versions.env
source "$tools/../versions.env"

# The modules each group pins, as "group module version" lines. A module whose
# siblings must move with it (Kubernetes staging, etcd) is handled below.
pins() {
	echo "kubernetes k8s.io/kubernetes $KUBERNETES_VERSION"
	for m in etcdctl etcdutl server; do echo "etcd go.etcd.io/etcd/$m/v3 $ETCD_VERSION"; done
	echo "controller-gen sigs.k8s.io/controller-tools $CONTROLLER_TOOLS_VERSION"
	echo "golangci-lint github.com/golangci/golangci-lint/v2 $GOLANGCI_LINT_VERSION"
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
	while read -r old new version; do
		if [[ $old != "$new" || $version != "$ETCD_VERSION" ]]; then
			echo "hack/tools/etcd/go.mod replaces $old with $new $version, want $ETCD_VERSION" >&2
			bad=1
		fi
	done < <(replaced etcd)
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
	for old in $(replaced etcd | awk '{print $1}'); do
		(cd "$tools/etcd" && go mod edit -replace="$old=$old@$ETCD_VERSION")
	done
	for group in $(pins | awk '{print $1}' | sort -u); do
		(cd "$tools/$group" && go mod tidy)
	done
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
