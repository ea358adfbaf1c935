#!/usr/bin/env bash
# matrix.sh (make matrix): the real-cluster suite against every supported Kubernetes minor and
# against kubectl one minor older and newer than the API server, then a table of cases x cells.
#
#   scripts/matrix.sh          the suite (exit 1 when any case of any cell failed)
#   scripts/matrix.sh bench    BenchmarkApply on the newest and the oldest minor
#
# MATRIX_MINORS (default "1.34 1.35 1.36 1.37") lists the minors, oldest first; each one's tools
# are built by build-k8s.sh (K8S_MINOR) unless cached. For every server minor N the cells are:
# kubectl N (N's own tools), kubectl N-1 and kubectl N+1 (QL3_KUBECTL_TOOLS) when those minors
# are in the list. MATRIX_CELLS ("server:kubectl ...", e.g. "1.37:1.36") runs only those cells.
# Then, without MATRIX_CELLS, one step beyond the supported skew: kubectl of the oldest minor
# against the newest API server, for TestPreflightNamesKubectlSkew alone.
# Every cell runs the selected tests of each package in one `go test -json`;
# the logs stay in MATRIX_OUT (default a fresh directory under $TMPDIR).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
mode=${1:-suite}
read -r -a minors <<<"${MATRIX_MINORS:-1.34 1.35 1.36 1.37}"
if [[ -n ${MATRIX_CELLS:-} ]]; then
	read -r -a minors <<<"$(tr ' :' '\n\n' <<<"$MATRIX_CELLS" | sort -uV | tr '\n' ' ')"
fi
out=${MATRIX_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/ql3-matrix.XXXXXX")}
mkdir -p "$out"

declare -A tools version
for m in "${minors[@]}"; do
	tools[$m]=$(K8S_MINOR=$m scripts/build-k8s.sh)
	version[$m]=$(sed -nE 's/^  "kubernetesVersion": "([^"]*)",$/\1/p' "${tools[$m]}/manifest.json")
done

if [[ $mode == bench ]]; then
	# BenchmarkApply on the newest minor and on the oldest (the ADR's gate), one after the other in
	# one run; the interleaved sub-benchmark's ql3-x-calls is the ratio of a ql3 apply to the
	# kubectl calls it cannot avoid (those its receipt stores).
	newest=${minors[${#minors[@]} - 1]} oldest=${minors[0]}
	for m in "$newest" "$oldest"; do
		echo "== BenchmarkApply, kube-apiserver and kubectl ${version[$m]}"
		QL3_K8S_TOOLS=${tools[$m]} go test -count=1 -run '^$' -bench '^BenchmarkApply$' \
			-benchtime "${BENCHTIME:-5x}" -benchmem -timeout 30m ./ceremony/ | tee "$out/bench-$m.txt"
	done
	echo
	printf '%-10s %12s %12s %12s %18s %10s\n' version bare-ms calls-ms ql3-ms ql3-x-calls ql3-cpu-%
	for m in "$newest" "$oldest"; do
		line=$(grep '^BenchmarkApply/interleaved' "$out/bench-$m.txt")
		metric() { awk -v u="$1" '{ for (i = 2; i <= NF; i++) if ($i == u) print $(i - 1) }' <<<"$line"; }
		printf '%-10s %12s %12s %12s %18s %10s\n' "${version[$m]}" "$(metric bare-ms)" "$(metric calls-ms)" \
			"$(metric ql3-ms)" "$(metric ql3-x-calls)" "$(metric ql3-cpu-%)"
	done
	exit 0
fi

# The cases: a column name, then an extended regexp over "<package> <test>" of the go test -json
# events. A case passes in a cell when at least one matching test passed and none failed.
cases=(
	"bed" "internal/testbed/testcluster (TestToolVersions|TestKubectlForms|TestServerSideApplyBehaviour|TestKubeSystemUIDStable)$"
	"runner" "internal/kubectl (TestIdentityReadReturnsClusterUID|TestDryRunApplyConvergenceThroughStdin|TestParentEnvironmentDoesNotLeak)$"
	"apply+rerun" "ceremony TestCeremonyHappyPathAndOfflineRerun$"
	"conflict" "ceremony TestCeremonyRefusesConflict(/.*)?$"
	"strict" "ceremony TestCeremonyRefusesOnCluster/(unknown_field|unknown_container_field|wrong_type|invalid_value)$"
	"no-ns" "ceremony TestCeremonyRefusesOnCluster/missing_namespace$"
	"uid" "ceremony TestCeremonyRefusesOnCluster/cluster_uid_mismatch$"
	"kill-9" "ceremony TestCeremonyRecoveryAfterKill$"
	"drift" "verdict/convergence/livetest Test[A-Za-z]+(/.*)?$"
	"audit" "audit/livetest TestLiveAudit(/.*)?$"
)
run='^(TestToolVersions|TestKubectlForms|TestServerSideApplyBehaviour|TestKubeSystemUIDStable|TestIdentityReadReturnsClusterUID|TestDryRunApplyConvergenceThroughStdin|TestParentEnvironmentDoesNotLeak|TestCeremonyHappyPathAndOfflineRerun|TestCeremonyRefusesConflict|TestCeremonyRefusesOnCluster|TestCeremonyRecoveryAfterKill|TestConverges|TestSyntheticRelease|TestServerRendering|TestNamespaceFromContext|TestLiveChanges|TestLiveAudit)$'
# The audit's tamper sweeps and its strace test read only the store: version-independent, and
# `make test` runs them.
skip='^TestLiveAudit$/^(tamper_every_object|rewrites|index|no_network.*)$'
pkgs=(./internal/testbed/testcluster/ ./internal/kubectl/ ./ceremony/ ./verdict/convergence/livetest/ ./audit/livetest/)

# Cells: "server kubectl" minors, each server's own kubectl first, then its skew neighbours.
cells=()
if [[ -n ${MATRIX_CELLS:-} ]]; then
	for c in $MATRIX_CELLS; do cells+=("${c%%:*} ${c#*:}"); done
else
	for i in "${!minors[@]}"; do
		cells+=("${minors[i]} ${minors[i]}")
		((i > 0)) && cells+=("${minors[i]} ${minors[i - 1]}")
		((i + 1 < ${#minors[@]})) && cells+=("${minors[i]} ${minors[i + 1]}")
	done
fi

# Build the test binaries once, before any cell's clock starts.
go test -count=1 -run '^$' "${pkgs[@]}" >/dev/null

declare -A result elapsed status
failed=0
for cell in "${cells[@]}"; do
	read -r server client <<<"$cell"
	log="$out/server-$server-kubectl-$client.json"
	echo "matrix: kube-apiserver ${version[$server]}, kubectl ${version[$client]} -> $log" >&2
	kenv=()
	[[ $client != "$server" ]] && kenv=("QL3_KUBECTL_TOOLS=${tools[$client]}")
	start=$(date +%s)
	rc=0
	env QL3_K8S_TOOLS="${tools[$server]}" "${kenv[@]}" go test -count=1 -json -timeout 20m \
		-run "$run" -skip "$skip" "${pkgs[@]}" >"$log" 2>"$out/server-$server-kubectl-$client.stderr" || rc=$?
	elapsed[$cell]=$(($(date +%s) - start))
	status[$cell]=$([[ $rc == 0 ]] && echo ok || echo "FAIL($rc)")
	[[ $rc == 0 ]] || failed=1
	# The verbatim kubectl outputs TestKubectlForms logged, to compare across cells.
	grep '"Test":"TestKubectlForms"' "$log" | grep '"Action":"output"' | sed -nE 's/.*"Output":"(.*)"\}$/\1/p' |
		grep -E '^ +(stdout|stderr): ' >"$out/forms-$server-$client.txt" || true
	# "<action> <package> <test>" for every finished test.
	events=$(sed -nE 's/.*"Action":"(pass|fail)","Package":"github.com\/qinglong\/ql3\/([^"]*)","Test":"([^"]*)".*/\1 \2 \3/p' "$log")
	for ((c = 0; c < ${#cases[@]}; c += 2)); do
		name=${cases[c]} re=${cases[c + 1]}
		pass=$(grep -cE "^pass $re" <<<"$events" || true)
		fail=$(grep -cE "^fail $re" <<<"$events" || true)
		if ((fail > 0)); then
			result[$cell,$name]=FAIL
			failed=1
		elif ((pass > 0)); then
			result[$cell,$name]=pass
		else
			result[$cell,$name]=none
			failed=1
		fi
	done
done

# The unsupported-skew step: kubectl of the oldest minor against the API server of the newest
# (1.34 against 1.37, three minors apart), beyond the skew Kubernetes supports, so not a cell of the
# suite: only TestPreflightNamesKubectlSkew, which needs it (the preflight passes, names and records
# the skew). It must pass: `make test` skips it for want of a second kubectl.
oldest=${minors[0]} newest=${minors[${#minors[@]} - 1]}
skewline=""
if [[ -z ${MATRIX_CELLS:-} ]] && ((${newest#*.} - ${oldest#*.} > 1)); then
	log="$out/skew-server-$newest-kubectl-$oldest.json"
	echo "matrix: unsupported skew: kube-apiserver ${version[$newest]}, kubectl ${version[$oldest]} -> $log" >&2
	rc=0
	QL3_K8S_TOOLS="${tools[$newest]}" QL3_KUBECTL_TOOLS="${tools[$oldest]}" go test -count=1 -json -timeout 20m \
		-run '^TestPreflightNamesKubectlSkew$' ./ceremony/ >"$log" 2>"${log%.json}.stderr" || rc=$?
	if [[ $rc == 0 ]] && grep -q '"Action":"pass","Package":"github.com/qinglong/ql3/ceremony","Test":"TestPreflightNamesKubectlSkew",' "$log"; then
		skewline="unsupported skew: kube-apiserver ${version[$newest]}, kubectl ${version[$oldest]}: TestPreflightNamesKubectlSkew pass"
	else
		skewline="unsupported skew: kube-apiserver ${version[$newest]}, kubectl ${version[$oldest]}: TestPreflightNamesKubectlSkew FAIL($rc) or not run"
		failed=1
	fi
fi

echo
printf '%-15s %-15s' kube-apiserver kubectl
for ((c = 0; c < ${#cases[@]}; c += 2)); do printf ' %-11s' "${cases[c]}"; done
printf ' %-9s %s\n' "go test" seconds
for cell in "${cells[@]}"; do
	read -r server client <<<"$cell"
	printf '%-15s %-15s' "${version[$server]}" "${version[$client]}"
	for ((c = 0; c < ${#cases[@]}; c += 2)); do printf ' %-11s' "${result[$cell,${cases[c]}]}"; done
	printf ' %-9s %s\n' "${status[$cell]}" "${elapsed[$cell]}"
done
[[ -n $skewline ]] && echo "$skewline"
# The kubectl texts ql3 parses, compared with the first cell's.
first=${cells[0]// /-}
for cell in "${cells[@]}"; do
	if ! cmp -s "$out/forms-$first.txt" "$out/forms-${cell// /-}.txt"; then
		echo "kubectl forms of ${cell// /-} differ from $first:"
		diff "$out/forms-$first.txt" "$out/forms-${cell// /-}.txt" || true
	fi
done
echo "kubectl forms (TestKubectlForms) compared across ${#cells[@]} cells: $out/forms-*.txt"
echo "logs: $out"
exit "$failed"
