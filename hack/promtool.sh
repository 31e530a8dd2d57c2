#!/usr/bin/env bash
# Prints the path of promtool, Prometheus' rule checker, taken from Debian's
# prometheus package at the version hack/versions.env pins
# (PROMETHEUS_DEB_VERSION). The package is downloaded, not installed: only
# promtool is unpacked, into the cache outside the repository, so no
# Prometheus server or service lands on the machine. (promtool's Go module
# cannot be built here: one of its dependencies is refused by the proxy.)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=versions.env
source "$root/hack/versions.env"
: "${PROMETHEUS_DEB_VERSION:?hack/versions.env pins no PROMETHEUS_DEB_VERSION}"
cache=${TEND_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tend}/promtool-$PROMETHEUS_DEB_VERSION
bin=$cache/promtool
if [[ ! -x $bin ]]; then
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	cd "$work"
	if ! apt-get download -q "prometheus=$PROMETHEUS_DEB_VERSION" >/dev/null 2>&1; then
		# The package lists may be missing or stale on a fresh machine.
		apt-get update -qq >&2
		apt-get download -q "prometheus=$PROMETHEUS_DEB_VERSION" >/dev/null ||
			{ echo "promtool: cannot download Debian's prometheus $PROMETHEUS_DEB_VERSION" >&2; exit 1; }
	fi
	dpkg-deb --fsys-tarfile prometheus_*.deb | tar -x ./usr/bin/promtool
	mkdir -p "$cache"
	mv usr/bin/promtool "$bin.tmp"
	mv "$bin.tmp" "$bin"
fi
echo "$bin"
