#!/usr/bin/env bash
# Builds Tend's toolchain from pinned Go modules into a cache outside the
# repository, and prints where each tool is.
#
#   hack/toolchain.sh TOOL...      build what is missing, print each binary's path;
#                                  GROUP/TOOL names a tool of a group that
#                                  shares its name with another (etcd-upgrade-from/etcd)
#   hack/toolchain.sh --envtest    build kube-apiserver, etcd and kubectl, print
#                                  the directory to use as KUBEBUILDER_ASSETS
#   hack/toolchain.sh --all        build every tool
#   hack/toolchain.sh --parallel TOOL...  build what is missing, groups side by side
#   hack/toolchain.sh --cache-dir  print the cache directory
#
# Nothing is downloaded but Go modules. Each tool group (hack/tools/<group>) is
# cached under $TEND_CACHE/toolchain/<group>-<version>-<hash of its go.mod,
# go.sum and own cmd/ sources>/bin, so a version bump or a dependency change
# builds afresh while a fresh clone of the same commit (CI) reuses what an
# earlier run built. A build writes to a temporary directory and renames the
# binaries into place, so a build that was killed half-way never leaves a
# broken binary behind.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=versions.env
source "$root/hack/versions.env"
cache=${TEND_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tend}/toolchain

# group_of TOOL prints the hack/tools group that builds TOOL, which is either
# a binary's name or GROUP/BINARY.
group_of() {
	case $1 in
	*/*)
		if [[ -d $root/hack/tools/${1%%/*} ]]; then echo "${1%%/*}"; else
			echo "toolchain: unknown tool group in '$1'" >&2
			return 1
		fi
		;;
	kube-apiserver | kube-controller-manager | kube-scheduler | kubelet | kube-proxy | kubectl) echo kubernetes ;;
	etcd | etcdctl | etcdutl) echo etcd ;;
	containerd | containerd-shim-runc-v2 | ctr) echo containerd ;;
	coredns) echo coredns ;;
	local-path-provisioner) echo local-path-provisioner ;;
	kwok) echo kwok ;;
	controller-gen) echo controller-gen ;;
	golangci-lint) echo golangci-lint ;;
	helm) echo helm ;;
	krew) echo krew ;;
	*)
		echo "toolchain: unknown tool '$1'" >&2
		return 1
		;;
	esac
}

# package_of GROUP BINARY prints the Go package that GROUP builds BINARY from.
package_of() {
	case $1/$2 in
	kubernetes/*) echo "k8s.io/kubernetes/cmd/$2" ;;
	etcd/etcd) echo go.etcd.io/etcd/server/v3 ;;
	etcd-upgrade-from/etcd) echo ./cmd/etcd ;; # etcd v3.5's main lives in a module the proxy lacks
	etcd*/etcdctl | etcd*/etcdutl) echo "go.etcd.io/etcd/$2/v3" ;;
	containerd/*) echo "github.com/containerd/containerd/v2/cmd/$2" ;;
	coredns/coredns) echo ./cmd/coredns ;; # the plugins of the local cluster's Corefile only
	local-path-provisioner/local-path-provisioner) echo github.com/rancher/local-path-provisioner ;;
	kwok/kwok) echo sigs.k8s.io/kwok/cmd/kwok ;;
	controller-gen/controller-gen) echo sigs.k8s.io/controller-tools/cmd/controller-gen ;;
	golangci-lint/golangci-lint) echo github.com/golangci/golangci-lint/v2/cmd/golangci-lint ;;
	helm/helm) echo helm.sh/helm/v4/cmd/helm ;;
	krew/krew) echo sigs.k8s.io/krew/cmd/krew ;;
	*)
		echo "toolchain: group $1 builds no tool named '$2'" >&2
		return 1
		;;
	esac
}

version_of_group() {
	case $1 in
	kubernetes) echo "$KUBERNETES_VERSION" ;;
	etcd) echo "$ETCD_VERSION" ;;
	etcd-upgrade-from) echo "$ETCD_UPGRADE_FROM_VERSION" ;;
	containerd) echo "$CONTAINERD_VERSION" ;;
	coredns) echo "$COREDNS_VERSION" ;;
	local-path-provisioner) echo "$LOCAL_PATH_PROVISIONER_VERSION" ;;
	kwok) echo "$KWOK_VERSION" ;;
	controller-gen) echo "$CONTROLLER_TOOLS_VERSION" ;;
	golangci-lint) echo "$GOLANGCI_LINT_VERSION" ;;
	helm) echo "$HELM_VERSION" ;;
	krew) echo "$KREW_VERSION" ;;
	esac
}

# ldflags_of GROUP prints the linker flags that stamp the version a tool reports.
ldflags_of() {
	local v
	v=$(version_of_group "$1")
	case $1 in
	kubernetes)
		local major minor x
		major=${v#v}
		major=${major%%.*}
		minor=${v#v*.}
		minor=${minor%%.*}
		for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
			x+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
		done
		echo "-s -w$x"
		;;
	golangci-lint) echo "-s -w -X main.version=${v#v}" ;;
	helm) echo "-s -w -X helm.sh/helm/v4/internal/version.version=$v" ;;
	krew) echo "-s -w -X sigs.k8s.io/krew/internal/version.gitTag=$v" ;;
	containerd) echo "-s -w -X github.com/containerd/containerd/v2/version.Version=$v" ;;
	local-path-provisioner) echo "-s -w -X main.VERSION=$v" ;;
	*) echo "-s -w" ;;
	esac
}

# dir_of GROUP prints the cache directory for GROUP at its pinned version.
dir_of() {
	local src=$root/hack/tools/$1 sum
	# A group's own main packages (cmd/) are part of what it builds.
	sum=$(cat "$src/go.mod" "$src/go.sum" $(find "$src/cmd" -type f -name '*.go' 2>/dev/null | LC_ALL=C sort) | sha256sum | cut -c1-12)
	echo "$cache/$1-$(version_of_group "$1")-$sum"
}

# build TOOL builds TOOL unless the cache has it, and prints its path.
build() {
	local group
	group=$(group_of "$1")
	build_group "$group" "${1##*/}"
	echo "$(dir_of "$group")/bin/${1##*/}"
}

# build_group GROUP TOOL... builds those of GROUP's TOOLs that the cache lacks,
# all in one go build, so that they share its work and its links run side
# by side.
build_group() {
	local group=$1 dir tool pkg missing=() pkgs=()
	shift
	dir=$(dir_of "$group")
	mkdir -p "$dir/bin"
	# One builder at a time per group: a second caller waits, then finds the binaries.
	exec {lock}>"$dir/.lock"
	flock "$lock"
	for tool in "$@"; do
		if [[ ! -x $dir/bin/$tool ]]; then
			missing+=("$tool")
			pkgs+=("$(package_of "$group" "$tool")")
		fi
	done
	if ((${#missing[@]})); then
		local start=$SECONDS out=$dir/bin/.tmp.$$ i
		echo "toolchain: building ${missing[*]} $(version_of_group "$group") (this takes minutes the first time)" >&2
		rm -rf "$out" && mkdir -p "$out"
		(
			cd "$root/hack/tools/$group"
			CGO_ENABLED=0 go build -trimpath -ldflags "$(ldflags_of "$group")" -o "$out/" "${pkgs[@]}"
		) || {
			rm -rf "$out"
			echo "toolchain: building ${missing[*]} failed; see the go output above" >&2
			return 1
		}
		for i in "${!missing[@]}"; do
			mv -f "$out/$(binary_name "${pkgs[$i]}")" "$dir/bin/${missing[$i]}"
		done
		rm -rf "$out"
		echo "toolchain: built ${missing[*]} in $((SECONDS - start))s" >&2
	fi
	exec {lock}>&-
}

# binary_name PACKAGE prints the name go build gives PACKAGE's binary: the
# last element of its path, or the one before a major version suffix.
binary_name() {
	local p=${1%/} last
	last=${p##*/}
	if [[ $last =~ ^v[0-9]+$ ]]; then
		p=${p%/*}
		last=${p##*/}
	fi
	echo "$last"
}

# parallel TOOL... builds the groups of TOOLs two at a time, the largest
# first: a go build keeps two cores busy while it compiles but links alone,
# so a second build fills the gaps. It prints nothing.
parallel() {
	local tool group groups=() failed=0
	declare -A of=()
	for tool in "$@"; do
		group=$(group_of "$tool")
		[[ -v of[$group] ]] || groups+=("$group")
		of[$group]+=" ${tool##*/}"
	done
	for group in "${groups[@]}"; do
		while (($(jobs -rp | wc -l) >= 2)); do
			wait -n || failed=1
		done
		# shellcheck disable=SC2086 # of[] is a list of tool names
		build_group "$group" ${of[$group]} &
	done
	while (($(jobs -rp | wc -l) > 0)); do
		wait -n || failed=1
	done
	return "$failed"
}

# envtest builds the binaries that envtest runs and prints a directory holding
# all of them, for KUBEBUILDER_ASSETS.
envtest() {
	local assets=$cache/envtest-$KUBERNETES_VERSION-$ETCD_VERSION tool path
	mkdir -p "$assets"
	for tool in kube-apiserver etcd kubectl; do
		path=$(build "$tool")
		ln -sfn "$path" "$assets/$tool"
	done
	echo "$assets"
}

all_tools=(
	kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl
	etcd etcdctl etcdutl etcd-upgrade-from/etcd etcd-upgrade-from/etcdctl etcd-upgrade-from/etcdutl
	containerd containerd-shim-runc-v2 ctr coredns local-path-provisioner
	kwok controller-gen golangci-lint helm krew
)

case ${1:-} in
"")
	sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
--cache-dir) echo "$cache" ;;
--envtest) envtest ;;
--all) parallel "${all_tools[@]}" ;;
--parallel)
	shift
	parallel "$@"
	;;
*) for t in "$@"; do build "$t"; done ;;
esac
