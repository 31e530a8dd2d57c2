#!/usr/bin/env bash
# Builds the local cluster's images offline and imports them into its
# containerd. Every image is FROM scratch, made by hack/cluster/imagebuild out
# of static binaries built here, and tagged with the public name that real
# clusters pull, so that the same manifests work in both places.
#
#   hack/cluster/images.sh build IMAGE...   build the tarballs (cached), print their paths
#   hack/cluster/images.sh load IMAGE...    build, then import into the running cluster
#   hack/cluster/images.sh ref IMAGE        print NAME@DIGEST of the built image
#
# IMAGE is one of: pause coredns local-path-provisioner busybox etcd
# etcd-upgrade-from tend, or "all". Tarballs are cached in
# ~/.cache/tend/images under a hash of everything that goes into them, so an
# image is rebuilt only when an input changed, and imported only when
# containerd holds another digest under its name.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$root/hack/cluster/components.sh"

all_images=(pause coredns local-path-provisioner busybox etcd etcd-upgrade-from tend)

image_cache() { echo "$(dirname "$("$root/hack/toolchain.sh" --cache-dir)")/images"; }

# rootfs_etc writes /etc/passwd and /etc/group for an image into DIR and
# prints the imagebuild flags that add them, with /tmp. The users are those
# of distroless: root, nonroot (65532) and nobody.
rootfs_etc() {
	local dir=$1
	mkdir -p "$dir"
	printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' 'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' \
		'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' >"$dir/passwd"
	printf '%s\n' 'root:x:0:' 'nonroot:x:65532:' 'nobody:x:65534:' >"$dir/group"
	echo "-file $dir/passwd=/etc/passwd:0644 -file $dir/group=/etc/group:0644 -dir /tmp:1777 -dir /home/nonroot:0755"
}

# recipe IMAGE sets tags (the names, see recipe_tags) and flags (imagebuild's
# flags but -out and -tag) for IMAGE, building the binaries that go into it.
recipe() {
	local src
	src=$(image_cache)/src/$1
	mkdir -p "$src"
	recipe_tags "$1"
	flags=()
	case $1 in
	pause)
		# kubelet's sandbox image: kubernetes' own pause.c from the pinned
		# module, built static as build/pause/Makefile does.
		local kdir
		kdir=$(cd "$root/hack/tools/kubernetes" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
		grep -q "^TAG ?= $PAUSE_VERSION\$" "$kdir/build/pause/Makefile" ||
			die "PAUSE_VERSION=$PAUSE_VERSION in hack/versions.env, but k8s.io/kubernetes $KUBERNETES_VERSION builds pause $(sed -n 's/^TAG ?= //p' "$kdir/build/pause/Makefile")"
		local bin
		bin=$src/pause-$(cat "$kdir/build/pause/linux/pause.c" <(echo "$PAUSE_VERSION") <(gcc --version) | sha256sum | cut -c1-12)
		if [[ ! -x $bin ]]; then
			gcc -Os -Wall -Werror -static -DVERSION="v$PAUSE_VERSION" -o "$bin.tmp" "$kdir/build/pause/linux/pause.c" ||
				die "building pause from $kdir/build/pause/linux/pause.c failed (gcc and Debian's libc6-dev are needed)"
			mv -f "$bin.tmp" "$bin"
		fi
		flags=(-file "$bin=/pause:0755" -entrypoint '["/pause"]' -user 65535:65535)
		;;
	coredns)
		# shellcheck disable=SC2207
		flags=(-file "$(tool coredns)=/coredns:0755" $(rootfs_etc "$src") -entrypoint '["/coredns"]' -user 65532:65532)
		;;
	local-path-provisioner)
		# shellcheck disable=SC2207
		flags=(-file "$(tool local-path-provisioner)=/usr/bin/local-path-provisioner:0755" $(rootfs_etc "$src")
			-env PATH=/usr/local/bin:/usr/bin:/bin -cmd '["local-path-provisioner"]')
		;;
	busybox)
		# Debian's static busybox, with a link for every applet.
		local version applet
		version=$(/bin/busybox 2>&1 | sed -n '1s/^BusyBox v\([0-9.]*\) .*/\1/p')
		[[ $version == "$BUSYBOX_VERSION" ]] ||
			die "/bin/busybox is version '$version', but hack/cluster/lib.sh tags it $BUSYBOX_VERSION: update BUSYBOX_VERSION"
		# shellcheck disable=SC2207
		flags=(-file /bin/busybox=/bin/busybox:0755 $(rootfs_etc "$src") -dir /root:0700 -dir /var:0755
			-env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin -cmd '["sh"]')
		# Beware: this build's wget crashes (SIGSEGV) when given -T; bound
		# it with timeout(1) instead.
		for applet in $(/bin/busybox --list-full); do
			[[ $applet == bin/busybox ]] || flags+=(-symlink "/$applet=/bin/busybox")
		done
		;;
	etcd | etcd-upgrade-from)
		# As etcd's own Dockerfile lays it out, on scratch instead of distroless.
		local group=$1 version prefix=""
		version=$ETCD_VERSION
		if [[ $1 == etcd-upgrade-from ]]; then
			version=$ETCD_UPGRADE_FROM_VERSION
			prefix=$group/
		fi
		# shellcheck disable=SC2207
		flags=($(rootfs_etc "$src") -dir /var/etcd:0700 -dir /var/lib/etcd:0700 -workdir /var/lib/etcd/
			-env PATH=/usr/local/bin:/usr/bin:/bin -cmd '["/usr/local/bin/etcd"]')
		local b
		for b in etcd etcdctl etcdutl; do
			flags+=(-file "$("$root/hack/toolchain.sh" "$prefix$b")=/usr/local/bin/$b:0755")
		done
		;;
	tend)
		# The manager and the agents, static, as a non-root user, and the
		# kubectl plugin beside them (docs/plugin.md). CA certificates let
		# it reach real AWS endpoints in a real cluster.
		(cd "$root" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w" -o "$src/tend.tmp" ./cmd/tend &&
			CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w" -o "$src/kubectl-tend.tmp" ./cmd/kubectl-tend) ||
			die "building ./cmd/tend and ./cmd/kubectl-tend for the tend image failed; see the go output above"
		mv -f "$src/tend.tmp" "$src/tend"
		mv -f "$src/kubectl-tend.tmp" "$src/kubectl-tend"
		[[ -f /etc/ssl/certs/ca-certificates.crt ]] || die "/etc/ssl/certs/ca-certificates.crt is missing (Debian's ca-certificates)"
		# shellcheck disable=SC2207
		flags=(-file "$src/tend=/tend:0755" -file "$src/kubectl-tend=/usr/local/bin/kubectl-tend:0755"
			-file /etc/ssl/certs/ca-certificates.crt=/etc/ssl/certs/ca-certificates.crt:0644
			$(rootfs_etc "$src") -entrypoint '["/tend"]' -user 65532:65532)
		;;
	*) die "unknown image '$1'; known: ${all_images[*]}" ;;
	esac
}

# image_key prints a hash of everything that makes the image: imagebuild
# itself, the flags, the tags and the content of every input file.
image_key() {
	local builder=$1 arg
	{
		echo "$builder"
		printf '%s\n' "${tags[@]}" "${flags[@]}"
		for arg in "${flags[@]}"; do
			if [[ $arg == /*=/* && -f ${arg%%=*} ]]; then sha256sum "${arg%%=*}"; fi
		done
	} | sha256sum | cut -c1-16
}

# build IMAGE builds IMAGE's tarball unless the cache has it, and prints its
# path. The digest is in the file beside it, with .digest appended.
build() {
	local name=$1 builder key out start=$SECONDS t lock
	local -a tags flags
	builder=$(cluster_tool imagebuild)
	# One build of an image at a time: e2e runs and make run may overlap.
	mkdir -p "$(image_cache)"
	exec {lock}>"$(image_cache)/$name.lock"
	flock "$lock"
	recipe "$name"
	key=$(image_key "$builder")
	out=$(image_cache)/$name-$key.tar
	if [[ ! -f $out || ! -f $out.digest ]]; then
		local -a tagflags=()
		for t in "${tags[@]}"; do tagflags+=(-tag "$t"); done
		"$builder" -out "$out" "${tagflags[@]}" "${flags[@]}" >"$out.digest.tmp" ||
			die "imagebuild failed for the $name image"
		mv -f "$out.digest.tmp" "$out.digest"
		# Older builds of this image are of no more use.
		find "$(image_cache)" -maxdepth 1 -name "$name-????????????????.tar*" ! -name "$name-$key.tar*" -delete
		log "built the $name image ($(du -h "$out" | cut -f1)) in $((SECONDS - start))s: $out"
	fi
	exec {lock}>&-
	echo "$out"
}

# load IMAGE builds IMAGE and imports it into the cluster's containerd, unless
# containerd already holds that digest under each of its names. Imported
# images are pinned, so kubelet's image garbage collection keeps them.
load() {
	local name=$1 out digest t stale=""
	local -a tags flags
	out=$(build "$name")
	digest=$(<"$out.digest")
	recipe_tags "$name"
	# Each tag, and REPOSITORY@DIGEST (see imagebuild's importNames).
	for t in "${tags[@]}" "${tags[0]%:*}@$digest"; do
		[[ $(ctr images ls "name==$t" 2>/dev/null | awk 'NR == 2 {print $3}') == "$digest" ]] || stale=1
	done
	if [[ -n $stale ]]; then
		ctr images import --label io.cri-containerd.pinned=pinned "$out" >/dev/null ||
			die_component containerd "importing the $name image ($out) failed"
		log "imported ${tags[*]} ($digest)"
	fi
}

# prune_untagged removes the images that no tag names any more: the earlier
# builds of an image, under REPOSITORY@DIGEST and CRI's sha256:ID names.
# Running containers keep their snapshots; containerd's garbage collector
# frees the rest.
prune_untagged() {
	local list tagged name digest
	list=$(ctr images ls 2>/dev/null | awk 'NR > 1 {print $1, $3}')
	tagged=$(awk '$1 !~ /@|^sha256:/ {print $2}' <<<"$list" | sort -u)
	while read -r name digest; do
		[[ -n $name ]] || continue
		grep -qx "$digest" <<<"$tagged" && continue
		ctr images rm "$name" >/dev/null || log "could not remove the old image $name"
	done <<<"$list"
}

# recipe_tags IMAGE sets tags, the names of IMAGE, without building anything.
recipe_tags() {
	case $1 in
	pause) tags=("$PAUSE_IMAGE") ;;
	coredns) tags=("$COREDNS_IMAGE") ;;
	local-path-provisioner) tags=("$LOCAL_PATH_IMAGE") ;;
	busybox) tags=("$BUSYBOX_IMAGE" "${BUSYBOX_IMAGE%.*}") ;;
	etcd) tags=("$(etcd_image "$ETCD_VERSION")") ;;
	etcd-upgrade-from) tags=("$(etcd_image "$ETCD_UPGRADE_FROM_VERSION")") ;;
	tend) tags=("$TEND_IMAGE") ;;
	*) die "unknown image '$1'; known: ${all_images[*]}" ;;
	esac
}

# images_main CMD IMAGE... is the command line.
images_main() {
	local cmd=${1:-} name
	shift || true
	local -a names=("$@")
	if [[ ${names[*]:-} == all ]]; then names=("${all_images[@]}"); fi
	case $cmd in
	build)
		for name in "${names[@]}"; do build "$name"; done
		;;
	load)
		require_root
		take_lock
		running containerd || die "the local cluster is not running; start it with make cluster-up"
		for name in "${names[@]}"; do load "$name"; done
		prune_untagged
		;;
	ref)
		local out tags=()
		out=$(build "${names[0]}")
		recipe_tags "${names[0]}"
		echo "${tags[0]%:*}@$(<"$out.digest")"
		;;
	*)
		sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
		exit 2
		;;
	esac
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	images_main "$@"
fi
