#!/usr/bin/env bash
# demo.sh (make demo): the operator flow end to end on the local cluster. Preflight, apply, apply
# again (returned offline from the store), the offline audit and store verify. The last two lines are
# `store: <abs path>` and `receipt: sha256:<hex>`.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd -P)
cd "$root"
ql3="$root/bin/ql3"
: "${QL3_K8S_TOOLS:?QL3_K8S_TOOLS must name the k8s tools dir (make demo sets it)}"
[[ -x $ql3 ]] || CGO_ENABLED=0 go build -trimpath -o "$ql3" ./cmd/ql3

log() { printf 'demo: %s\n' "$*" >&2; }

log "starting the local cluster"
go run ./internal/testbed/testcluster/cmd/ql3-cluster up >&2
# `env` prints KEY=value lines for the running cluster.
while IFS='=' read -r k v; do
	case $k in
	*KUBECONFIG*) kubeconfig_src=$v ;;
	*TOKEN_CONTEXT*) ;;
	*CONTEXT*) context=$v ;;
	esac
done < <(go run ./internal/testbed/testcluster/cmd/ql3-cluster env | sed -e 's/^export //' -e "s/[\"']//g")
: "${kubeconfig_src:?ql3-cluster env printed no kubeconfig}" "${context:?ql3-cluster env printed no context}"

kubectl="$QL3_K8S_TOOLS/bin/kubectl"
kubectl_digest="sha256:$(sha256sum "$kubectl" | cut -d' ' -f1)"

# A private 0700 working area: ql3 refuses inputs that others could read or swap.
work=$(mktemp -d "${TMPDIR:-/tmp}/ql3-demo.XXXXXX")
chmod 0700 "$work"
work=$(cd "$work" && pwd -P)
umask 077
in="$work/in"
mkdir -m 0700 "$in"
install -m 0600 "$kubeconfig_src" "$in/kubeconfig"
log "ql3 lock materialize: the synthetic release 3.4.1"
"$ql3" lock materialize --catalog testdata/release-3.4.1/catalog.json \
	--manifest testdata/release-3.4.1/unlocked.yaml --out "$in" >&2
log "ql3 lock verify"
"$ql3" lock verify --manifest "$in/locked.yaml" --lock-report "$in/lock-report.json" >&2
store="$work/store"

k() { env -i HOME="$work" KUBERC=off KUBECTL_KUBERC=false "$kubectl" --kubeconfig="$in/kubeconfig" --context="$context" "$@"; }
log "creating namespace qinglong"
k create namespace qinglong --dry-run=client -o yaml | k apply --server-side --field-manager=ql3-demo -f - >&2
uid=$(k get namespace kube-system -o 'jsonpath={.metadata.uid}')
log "kube-system uid $uid"

digest() { printf 'sha256:%s' "$(sha256sum "$1" | cut -d' ' -f1)"; }
cmds="$work/commands"
mkdir -m 0700 "$cmds"
cat >"$cmds/preflight.json" <<JSON
{
  "schema": "qinglong/cluster-deployment-command@v1",
  "command": "cluster.deployment.preflight",
  "store": "$store",
  "manifest": {"path": "$in/locked.yaml", "digest": "$(digest "$in/locked.yaml")"},
  "lockReport": {"path": "$in/lock-report.json", "digest": "$(digest "$in/lock-report.json")"},
  "kubeconfig": {"path": "$in/kubeconfig", "digest": "$(digest "$in/kubeconfig")", "context": "$context"},
  "kubectl": {"path": "$kubectl", "digest": "$kubectl_digest"},
  "expectedClusterUid": "$uid",
  "fieldManager": "qinglong3-catalog-lock"
}
JSON
chmod 0600 "$cmds/preflight.json"

"$ql3" store init "$store" >&2

log "ql3 preflight"
"$ql3" preflight --command-file="$cmds/preflight.json" --write-apply-command="$cmds/apply.json" >&2
log "ql3 apply"
receipt=$("$ql3" apply --command-file="$cmds/apply.json")
log "ql3 apply again (returned offline)"
again=$("$ql3" apply --command-file="$cmds/apply.json")
[[ $again == "$receipt" ]] || { log "second apply returned $again, not $receipt"; exit 1; }
log "ql3 audit (offline)"
"$ql3" audit --store "$store" "$receipt" >&2
log "ql3 store verify"
"$ql3" store verify --store "$store" >&2
echo "store: $store"
echo "receipt: $receipt"
