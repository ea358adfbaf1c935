#!/usr/bin/env bash
# faults.sh (make faults): TestCeremonyRealFaults, the grid of real cluster faults x positions x
# commands (docs/testbed.md), in four shards run side by side, each a process with a cluster of its
# own. The grid spends its time waiting on the cluster (the server's request timeout with etcd
# down, etcd's and the API server's restarts), not on the CPU: one process takes about 22 minutes,
# the four shards about as long as the longest.
#
# The logs stay in FAULTS_OUT (default a fresh directory under $TMPDIR). Exit 1 when a shard
# failed or the shards together did not run every case of the grid.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
out=${FAULTS_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/ql3-faults.XXXXXX")}
mkdir -p "$out"
export QL3_K8S_TOOLS=${QL3_K8S_TOOLS:-$(scripts/build-k8s.sh)}

# The shards split the etcd cases, which wait longest, by command.
top='^TestCeremonyRealFaults$'
shards=(
	"$top/^etcd-stopped\$/^cluster\\.deployment\\.apply\$"
	"$top/^etcd-stopped\$/^cluster\\.deployment\\.(preflight|live\\.audit)\$"
	"$top/^(api-server-stopped|api-server-paused)\$"
	"$top/^(api-server-restarted|api-server-stopped-during-convergence)\$"
)

go test -c -o "$out/ceremony.test" ./ceremony/
start=$(date +%s)
pids=()
for i in "${!shards[@]}"; do
	(cd ceremony && exec "$out/ceremony.test" -test.run "${shards[$i]}" -test.count=1 -test.v -test.timeout 40m) \
		>"$out/shard-$i.log" 2>&1 &
	pids+=($!)
done
failed=0
for i in "${!pids[@]}"; do
	if wait "${pids[$i]}"; then
		status=ok
	else
		status=FAIL failed=1
	fi
	echo "== shard $i ($status): ${shards[$i]}"
	grep -E 'faults_cluster_test.go:[0-9]+: [a-z-]+: [0-9]+ cases in|^\s*--- FAIL' "$out/shard-$i.log" || true
done
# Every cell of the grid ran and passed once: 4 kinds x 26 positions, and the 2 transient cases.
cells=$(cat "$out"/shard-*.log | grep -cE -- '--- PASS: TestCeremonyRealFaults/[^ ]+/(before|after):' || true)
transient=$(cat "$out"/shard-*.log | grep -cE -- '--- PASS: TestCeremonyRealFaults/api-server-stopped-during-convergence/[^ ]+ ' || true)
echo "== the grid: $cells of 104 cells and $transient of 2 transient cases passed in $(($(date +%s) - start)) s (logs: $out)"
if [[ $failed != 0 || $cells != 104 || $transient != 2 ]]; then
	exit 1
fi
