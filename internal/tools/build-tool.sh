#!/usr/bin/env bash
# Builds a pinned third-party CLI from the Go module proxy into a cache entry outside the
# repository, and prints the entry's bin directory on stdout (and nothing else there).
#
#   internal/tools/build-tool.sh NAME
#
# NAME is a tool module under testdata/tools/NAME: a go.mod and go.sum that pin the tool, and a
# tools.go (build tag `tools`) whose blank imports name the main packages to build, one per line
# (`_ "example.com/x/cmd/x"`). The binary takes the last element of the package path (a trailing
# /vN is skipped). The versions live in that go.mod only.
#
# The entry is $QL3_CACHE/tools/NAME/<key> (QL3_CACHE defaults to $HOME/.cache/ql3), keyed by the
# versions of the modules that provide the built packages, `go env GOVERSION` and the go.sum
# digest. It is built in a temporary directory beside it and renamed into place, so a killed build
# never leaves half an entry, and a concurrent builder that won the race keeps its entry. Run cold
# builds under the shared heavy-build lock:
#
#   nice -n 10 flock /tmp/ql3-heavy-build.lock internal/tools/build-tool.sh cosign
set -euo pipefail

if [[ $# -ne 1 || ! $1 =~ ^[a-z0-9][a-z0-9-]*$ ]]; then
	echo "usage: build-tool.sh NAME (a module under testdata/tools/NAME)" >&2
	exit 2
fi
name=$1
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
module=$repo/testdata/tools/$name
cache_root=${QL3_CACHE:-$HOME/.cache/ql3}/tools/$name
if [[ ! -f $module/go.mod || ! -f $module/go.sum || ! -f $module/tools.go ]]; then
	echo "build-tool: $module needs go.mod, go.sum and tools.go" >&2
	exit 2
fi

cd "$module"
export GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 GOWORK=off

mapfile -t pkgs < <(sed -n 's/^[[:space:]]*_[[:space:]]*"\([^"]*\)".*/\1/p' tools.go)
if [[ ${#pkgs[@]} -eq 0 ]]; then
	echo "build-tool: $module/tools.go names no package" >&2
	exit 2
fi
# The module of each package and its pinned version, e.g. github.com/sigstore/cosign/v3@v3.1.3.
mapfile -t mods < <(go list -f '{{.Module.Path}}@{{.Module.Version}}' "${pkgs[@]}" | sort -u)
versions=""
for m in "${mods[@]}"; do
	path=${m%@*}
	[[ $path =~ /v[0-9]+$ ]] && path=${path%/v*} # github.com/sigstore/cosign/v3 -> cosign
	versions+="${versions:+_}$(basename "$path")-${m#*@}"
done
go_version=$(go env GOVERSION)
sum_digest=$(sha256sum go.sum | cut -d' ' -f1)
key="${versions}_${go_version}_sum-${sum_digest:0:16}"
entry="$cache_root/$key"

if [[ -f $entry/manifest.json ]]; then
	echo "$entry/bin"
	exit 0
fi

mkdir -p "$cache_root"
tmp=$(mktemp -d "$cache_root/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

start=$(date +%s)
echo "build-tool: building $name (${mods[*]}) with $go_version" >&2
mkdir "$tmp/bin"
# One go build for every package shares the dependency graph and both cores.
go build -trimpath -ldflags "-s -w" -o "$tmp/bin/" "${pkgs[@]}"

{
	printf '{\n  "tool": "%s",\n  "modules": [' "$name"
	sep=""
	for m in "${mods[@]}"; do
		printf '%s"%s"' "$sep" "$m"
		sep=", "
	done
	printf '],\n  "goVersion": "%s",\n  "goSum": "sha256:%s",\n  "binaries": {\n' "$go_version" "$sum_digest"
	sep=""
	for b in "$tmp"/bin/*; do
		printf '%s    "%s": "sha256:%s"' "$sep" "$(basename "$b")" "$(sha256sum "$b" | cut -d' ' -f1)"
		sep=$',\n'
	done
	printf '\n  },\n  "buildSeconds": %d\n}\n' "$(($(date +%s) - start))"
} >"$tmp/manifest.json"
chmod 0755 "$tmp" "$tmp/bin"
chmod 0555 "$tmp/bin/"*

# rename(2) onto an existing non-empty directory fails, so a concurrent builder that won the race
# keeps its entry and ours is discarded by the trap.
if mv -T "$tmp" "$entry" 2>/dev/null; then
	trap - EXIT
fi
echo "build-tool: $name done in $(($(date +%s) - start)) s" >&2
echo "$entry/bin"
