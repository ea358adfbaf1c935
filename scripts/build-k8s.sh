#!/usr/bin/env bash
# Builds the pinned kube-apiserver, kubectl and etcd from the Go module proxy into a cache entry
# outside the repository, and prints the entry's directory on stdout (and nothing else there).
#
# The versions live in one place per Kubernetes minor: testdata/k8s-tools/v1.NN/go.mod. K8S_MINOR
# (default 1.37, the newest supported minor) picks one of them; K8S_TOOLS_MODULE names any other
# module directory. Every minor shares the default module and build caches.
#
# The entry is keyed by both versions, `go env GOVERSION` and the go.sum digest, built in a
# temporary directory beside it and renamed into place, so a killed build never leaves half an entry.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
module=${K8S_TOOLS_MODULE:-$repo/testdata/k8s-tools/v${K8S_MINOR:-1.37}}
cache_root=${QL3_CACHE:-$HOME/.cache/ql3}/k8s

cd "$module"
export GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 GOWORK=off

kube_version=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' go.mod)
etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2; exit }' go.mod)
if [[ -z "$kube_version" || -z "$etcd_version" ]]; then
	echo "build-k8s: cannot read the pinned versions from $module/go.mod" >&2
	exit 2
fi
go_version=$(go env GOVERSION)
sum_digest=$(sha256sum go.sum | cut -c1-16)
key="kube-${kube_version}_etcd-${etcd_version}_${go_version}_sum-${sum_digest}"
entry="$cache_root/$key"

if [[ -f "$entry/manifest.json" ]]; then
	echo "$entry"
	exit 0
fi

mkdir -p "$cache_root"
tmp=$(mktemp -d "$cache_root/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

minor=${kube_version#v1.}
minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
done

start=$(date +%s)
echo "build-k8s: building kube-apiserver and kubectl $kube_version, etcd $etcd_version with $go_version (cold: 6-10 minutes, 2.3 GB RAM)" >&2
mkdir "$tmp/bin"
# One go build for all three shares the dependency graph and both cores. -s -w strips the DWARF
# from the binaries, so the compiler need not write it either (about 4% of a cold build).
go build -trimpath -gcflags=all=-dwarf=false -ldflags "$ldflags" -o "$tmp/bin/" \
	k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl go.etcd.io/etcd/server/v3
# The etcd server module root is package main named by its path element before /v3.
mv "$tmp/bin/server" "$tmp/bin/etcd"

{
	printf '{\n  "kubernetesVersion": "%s",\n  "etcdVersion": "%s",\n  "goVersion": "%s",\n  "goSum": "sha256:%s",\n  "binaries": {\n' \
		"$kube_version" "$etcd_version" "$go_version" "$(sha256sum go.sum | cut -d' ' -f1)"
	sep=""
	for b in etcd kube-apiserver kubectl; do
		printf '%s    "%s": "sha256:%s"' "$sep" "$b" "$(sha256sum "$tmp/bin/$b" | cut -d' ' -f1)"
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
echo "build-k8s: done in $(($(date +%s) - start)) s" >&2
echo "$entry"
