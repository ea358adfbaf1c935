#!/usr/bin/env bash
# Builds the Go commands a tool module pins (testdata/tools/<name>/: go.mod, go.sum and a
# tools.go of blank imports) from the Go module proxy into a cache entry outside the repository,
# and prints the entry's directory on stdout (and nothing else there). The binaries are in
# <entry>/bin/, named by the last element of each command's package path.
#
#   scripts/build-tool.sh registry                  # testdata/tools/registry: distribution
#   scripts/build-tool.sh testdata/tools/oras       # a module directory works too
#
# The entry is $QL3_CACHE/tools/<name>/<version>_<go version>_sum-<go.sum digest>, <version>
# being that of the module of the first command; it is built in a temporary directory beside it and
# renamed into place, so a killed build never leaves half an entry and a cached entry is reused.
set -euo pipefail

if [[ $# -ne 1 ]]; then
	echo "usage: build-tool.sh <tool name | tool module directory>" >&2
	exit 2
fi
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [[ "$1" == */* ]]; then
	module=$(cd "$1" && pwd)
else
	module=$repo/testdata/tools/$1
fi
name=$(basename "$module")
cache_root=${QL3_CACHE:-$HOME/.cache/ql3}/tools/$name

cd "$module"
export GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 GOWORK=off

mapfile -t pkgs < <(go list -e -tags tools -f '{{join .Imports "\n"}}' .)
if [[ ${#pkgs[@]} -eq 0 ]]; then
	echo "build-tool: $module/tools.go imports no command" >&2
	exit 2
fi
version=$(go list -e -tags tools -f '{{with .Module}}{{.Version}}{{end}}' "${pkgs[0]}")
if [[ -z "$version" ]]; then
	echo "build-tool: cannot read the pinned version of ${pkgs[0]}" >&2
	exit 2
fi
go_version=$(go env GOVERSION)
sum_digest=$(sha256sum go.sum | cut -c1-16)
key="${version}_${go_version}_sum-${sum_digest}"
entry="$cache_root/$key"

if [[ -f "$entry/manifest.json" ]]; then
	echo "$entry"
	exit 0
fi

mkdir -p "$cache_root"
tmp=$(mktemp -d "$cache_root/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

start=$(date +%s)
echo "build-tool: building ${pkgs[*]} ($version) with $go_version" >&2
mkdir "$tmp/bin"
# -s -w strips the DWARF, so the compiler need not write it (as in build-k8s.sh).
go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w" -o "$tmp/bin/" "${pkgs[@]}"

{
	printf '{\n  "tool": "%s",\n  "version": "%s",\n  "goVersion": "%s",\n  "goSum": "sha256:%s",\n  "binaries": {\n' \
		"$name" "$version" "$go_version" "$(sha256sum go.sum | cut -d' ' -f1)"
	sep=""
	for b in "$tmp"/bin/*; do
		printf '%s    "%s": "sha256:%s"' "$sep" "$(basename "$b")" "$(sha256sum "$b" | cut -d' ' -f1)"
		sep=$',\n'
	done
	printf '\n  }\n}\n'
} >"$tmp/manifest.json"
chmod 0755 "$tmp" "$tmp/bin"
chmod 0555 "$tmp/bin/"*

# rename(2) onto an existing non-empty directory fails, so a concurrent builder that won the race
# keeps its entry and ours is discarded by the trap.
if mv -T "$tmp" "$entry" 2>/dev/null; then
	trap - EXIT
fi
echo "build-tool: $name done in $(($(date +%s) - start)) s" >&2
echo "$entry"
