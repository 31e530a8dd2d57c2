#!/usr/bin/env bash
# Fails when something derived is out of date: generated code and manifests,
# the tool pins against hack/versions.env, go.mod and go.sum, the kustomize
# trees. It regenerates in a scratch copy, so it never changes the work tree.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

status=0
fail() {
	echo "verify: $*" >&2
	status=1
}

hack/tools/sync.sh --check || fail "hack/tools/*/go.mod disagree with hack/versions.env"

go mod tidy -diff >/dev/null 2>&1 || fail "go.mod or go.sum is not tidy; run go mod tidy"

# Regenerate in a copy of the work tree (tracked files and new ones that git
# does not ignore), then compare.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
	[[ -e $f ]] && printf '%s\0' "$f"
done | tar --null -T - -cf - | tar -xf - -C "$scratch"
make -s -C "$scratch" generate manifests >/dev/null
for dir in api config dist; do
	[[ -d $dir || -d $scratch/$dir ]] || continue
	if ! diff -r -N "$dir" "$scratch/$dir" >"$scratch.diff" 2>&1; then
		fail "generated files under $dir/ are out of date; run make generate manifests:"
		head -40 "$scratch.diff" >&2
	fi
	rm -f "$scratch.diff"
done

kubectl=$(hack/toolchain.sh kubectl)
for k in config/default config/samples; do
	"$kubectl" kustomize "$k" >/dev/null || fail "kubectl kustomize $k fails"
done

exit $status
