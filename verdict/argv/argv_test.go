package argv

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

const (
	testExec = "/proc/self/fd/7"
	testDir  = "/tmp/ql3-kubectl-1234567"
	testCtx  = "ql3-admin"
)

// testNames are the namespace read's operands in the valid invocations.
var testNames = []string{"qinglong", "team-b"}

func validInvocation(t testing.TB, step string) ([]string, []string) {
	t.Helper()
	var names []string
	if TakesOperands(step) {
		names = testNames
	}
	argv, ok := buildArgv(testExec, step, testDir, testCtx, names...)
	if !ok {
		t.Fatalf("no argv for step %s", step)
	}
	return argv, environ(testDir)
}

func TestStepTable(t *testing.T) {
	want := map[string]string{
		evidence.StepIdentity:      "get namespace kube-system -o=json",
		evidence.StepVersion:       "version -o=json",
		evidence.StepDryRun:        "apply --server-side --field-manager=qinglong3-catalog-lock --dry-run=server --validate=strict -f=-",
		evidence.StepApply:         "apply --server-side --field-manager=qinglong3-catalog-lock --validate=strict -f=-",
		evidence.StepConvergence:   "get -f=- -o=json --show-managed-fields=true",
		evidence.StepNamespaces:    "get namespace -o=json",
		evidence.StepIdentityFinal: "get namespace kube-system -o=json",
	}
	if got := Steps(); !slices.Equal(got, []string{"identity", "version", "dry-run", "apply", "convergence", "namespaces", "identity-final"}) {
		t.Fatalf("Steps() = %q", got)
	}
	for _, step := range Steps() {
		args, ok := StepArgs(step)
		if !ok || strings.Join(args, " ") != want[step] {
			t.Errorf("StepArgs(%s) = %q, want %q", step, args, want[step])
		}
		if slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "force") }) {
			t.Errorf("step %s carries a force flag", step)
		}
		if ReadsStdin(step) != strings.Contains(want[step], "-f=-") {
			t.Errorf("ReadsStdin(%s) = %v", step, ReadsStdin(step))
		}
		// StepArgs hands out a copy: changing it must not change the table.
		args[0] = "delete"
		if again, _ := StepArgs(step); again[0] == "delete" {
			t.Fatalf("StepArgs(%s) exposes the table", step)
		}
	}
	if _, ok := StepArgs("delete"); ok || ReadsStdin("delete") {
		t.Fatal("an unknown step has arguments")
	}
}

func TestCheckInvocationAcceptsEveryStep(t *testing.T) {
	for _, step := range Steps() {
		argv, env := validInvocation(t, step)
		if err := CheckInvocation(step, testCtx, argv, env); err != nil {
			t.Errorf("%s: %v", step, err)
		}
	}
}

// replace returns s with s[i] = v.
func replace(s []string, i int, v string) []string {
	s = slices.Clone(s)
	s[i] = v
	return s
}

func TestCheckInvocationRefusals(t *testing.T) {
	const D2 = "/tmp/ql3-kubectl-7654321"
	argvOf := func(step string) []string { a, _ := buildArgv(testExec, step, testDir, testCtx); return a }
	env := environ(testDir)
	apply, dry, id := argvOf(evidence.StepApply), argvOf(evidence.StepDryRun), argvOf(evidence.StepIdentity)
	ver := argvOf(evidence.StepVersion)                                                   // ... version -o=json
	ns, _ := buildArgv(testExec, evidence.StepNamespaces, testDir, testCtx, testNames...) // ... get namespace qinglong team-b -o=json
	nsWith := func(names ...string) []string {
		return append(append(slices.Clone(ns[:6]), names...), "-o=json")
	}
	vectors := []struct {
		name    string      // the deviation
		step    string      // the recorded step
		context string      // the expected context
		argv    []string    // the recorded argv
		env     []string    // the recorded env
		code    refuse.Code // the expected refusal
	}{
		{"unknown step", "delete", testCtx, apply, env, CodeUnknownStep},
		{"empty expected context", evidence.StepApply, "", replace(apply, 2, "--context="), env, CodeArgvShape},
		{"extra flag at the end", evidence.StepApply, testCtx, append(slices.Clone(apply), "--force-conflicts"), env, CodeArgvShape},
		{"extra flag among the globals", evidence.StepApply, testCtx, slices.Insert(slices.Clone(apply), 4, "--v=9"), env, CodeArgvShape},
		{"--force-conflicts replaces --validate=strict", evidence.StepApply, testCtx, replace(apply, 7, "--force-conflicts"), env, CodeArgvShape},
		{"missing --validate=strict", evidence.StepApply, testCtx, slices.Delete(slices.Clone(apply), 7, 8), env, CodeArgvShape},
		{"--validate=false", evidence.StepApply, testCtx, replace(apply, 7, "--validate=false"), env, CodeArgvShape},
		{"wrong field manager", evidence.StepApply, testCtx, replace(apply, 6, "--field-manager=kubectl"), env, CodeArgvShape},
		{"field manager as two arguments", evidence.StepApply, testCtx, slices.Insert(replace(apply, 6, "--field-manager"), 7, evidence.FieldManager), env, CodeArgvShape},
		{"dry-run recorded with apply's arguments", evidence.StepDryRun, testCtx, apply, env, CodeArgvShape},
		{"apply recorded with dry-run's arguments", evidence.StepApply, testCtx, dry, env, CodeArgvShape},
		{"--dry-run=client", evidence.StepDryRun, testCtx, replace(dry, 7, "--dry-run=client"), env, CodeArgvShape},
		{"identity of another namespace", evidence.StepIdentity, testCtx, replace(id, 6, "default"), env, CodeArgvShape},
		{"different context", evidence.StepApply, testCtx, replace(apply, 2, "--context=other"), env, CodeArgvShape},
		{"context with a suffix", evidence.StepApply, testCtx, replace(apply, 2, "--context="+testCtx+"x"), env, CodeArgvShape},
		{"context flag as two arguments", evidence.StepApply, testCtx, slices.Insert(replace(apply, 2, "--context"), 3, testCtx), env, CodeArgvShape},
		{"two different directories", evidence.StepApply, testCtx, replace(apply, 3, "--cache-dir="+D2+"/cache"), env, CodeArgvShape},
		{"cache elsewhere in the directory", evidence.StepApply, testCtx, replace(apply, 3, "--cache-dir="+testDir+"/cache2"), env, CodeArgvShape},
		{"relative directory", evidence.StepApply, testCtx, replace(replace(apply, 1, "--kubeconfig=tmp/ql3-kubectl-1/kubeconfig"), 3, "--cache-dir=tmp/ql3-kubectl-1/cache"), environ("tmp/ql3-kubectl-1"), CodeArgvShape},
		{"unclean directory", evidence.StepApply, testCtx, replace(replace(apply, 1, "--kubeconfig=/tmp/../tmp/ql3-kubectl-1/kubeconfig"), 3, "--cache-dir=/tmp/../tmp/ql3-kubectl-1/cache"), environ("/tmp/../tmp/ql3-kubectl-1"), CodeArgvShape},
		{"double slash", evidence.StepApply, testCtx, replace(replace(apply, 1, "--kubeconfig=/tmp//ql3-kubectl-1/kubeconfig"), 3, "--cache-dir=/tmp//ql3-kubectl-1/cache"), environ("/tmp//ql3-kubectl-1"), CodeArgvShape},
		{"the operator's home", evidence.StepApply, testCtx, replace(replace(apply, 1, "--kubeconfig=/root/kubeconfig"), 3, "--cache-dir=/root/cache"), environ("/root"), CodeArgvShape},
		{"the root directory", evidence.StepApply, testCtx, replace(replace(apply, 1, "--kubeconfig=/kubeconfig"), 3, "--cache-dir=/cache"), environ(""), CodeArgvShape},
		{"another kubeconfig name", evidence.StepApply, testCtx, replace(apply, 1, "--kubeconfig="+testDir+"/config"), env, CodeArgvShape},
		{"kubeconfig flag as two arguments", evidence.StepApply, testCtx, slices.Insert(replace(apply, 1, "--kubeconfig"), 2, testDir+"/kubeconfig"), env, CodeArgvShape},
		{"global flags reordered", evidence.StepApply, testCtx, append([]string{testExec, apply[2], apply[1], apply[3]}, apply[4:]...), env, CodeArgvShape},
		{"argv[0] a path", evidence.StepApply, testCtx, replace(apply, 0, "/usr/local/bin/kubectl"), env, CodeArgvShape},
		{"argv[0] kubectl", evidence.StepApply, testCtx, replace(apply, 0, "kubectl"), env, CodeArgvShape},
		{"argv[0] without fd number", evidence.StepApply, testCtx, replace(apply, 0, "/proc/self/fd/"), env, CodeArgvShape},
		{"argv[0] of another process", evidence.StepApply, testCtx, replace(apply, 0, "/proc/1/fd/7"), env, CodeArgvShape},
		{"argv[0] through the fd", evidence.StepApply, testCtx, replace(apply, 0, "/proc/self/fd/7/../8"), env, CodeArgvShape},
		{"empty argv", evidence.StepApply, testCtx, nil, env, CodeArgvShape},
		{"env var added at the end", evidence.StepApply, testCtx, apply, append(slices.Clone(env), "HTTPS_PROXY=http://proxy:3128"), CodeEnvShape},
		{"env var added in the middle", evidence.StepApply, testCtx, apply, slices.Insert(slices.Clone(env), 5, "KUBECONFIG=/root/.kube/config"), CodeEnvShape},
		{"env var removed", evidence.StepApply, testCtx, apply, env[:len(env)-1], CodeEnvShape},
		{"env var replaced", evidence.StepApply, testCtx, apply, replace(env, 8, "KUBERC=off"), CodeEnvShape},
		{"env reordered", evidence.StepApply, testCtx, apply, replace(replace(env, 5, env[6]), 6, env[5]), CodeEnvShape},
		{"KUBERC=on", evidence.StepApply, testCtx, apply, replace(env, 7, "KUBERC=on"), CodeEnvShape},
		{"KUBECTL_KUBERC=true", evidence.StepApply, testCtx, apply, replace(env, 8, "KUBECTL_KUBERC=true"), CodeEnvShape},
		{"PATH that reaches binaries", evidence.StepApply, testCtx, apply, replace(env, 5, "PATH=/usr/bin:/bin"), CodeEnvShape},
		{"LANG other than C", evidence.StepApply, testCtx, apply, replace(env, 6, "LANG=en_US.UTF-8"), CodeEnvShape},
		{"HOME elsewhere", evidence.StepApply, testCtx, apply, replace(env, 0, "HOME=/root"), CodeEnvShape},
		{"KUBECACHEDIR elsewhere", evidence.StepApply, testCtx, apply, replace(env, 4, "KUBECACHEDIR="+D2+"/cache"), CodeEnvShape},
		{"env of another run directory", evidence.StepApply, testCtx, apply, environ(D2), CodeEnvShape},
		{"proxy variable instead of LANG", evidence.StepApply, testCtx, apply, replace(env, 6, "http_proxy=http://proxy:3128"), CodeEnvShape},
		{"empty env", evidence.StepApply, testCtx, apply, nil, CodeEnvShape},
		{"namespace read without names", evidence.StepNamespaces, testCtx, nsWith(), env, CodeArgvShape},
		{"namespace read of names out of order", evidence.StepNamespaces, testCtx, nsWith("team-b", "qinglong"), env, CodeArgvShape},
		{"namespace read of a name twice", evidence.StepNamespaces, testCtx, nsWith("qinglong", "qinglong"), env, CodeArgvShape},
		{"namespace read with a flag as a name", evidence.StepNamespaces, testCtx, nsWith("--all-namespaces"), env, CodeArgvShape},
		{"namespace read with -o=yaml as a name", evidence.StepNamespaces, testCtx, nsWith("-o=yaml"), env, CodeArgvShape},
		{"namespace read of an upper-case name", evidence.StepNamespaces, testCtx, nsWith("Qinglong"), env, CodeArgvShape},
		{"namespace read of a 64-byte name", evidence.StepNamespaces, testCtx, nsWith(strings.Repeat("a", 64)), env, CodeArgvShape},
		{"namespace read of a name ending in a dash", evidence.StepNamespaces, testCtx, nsWith("qinglong-"), env, CodeArgvShape},
		{"namespace read of a resource/name", evidence.StepNamespaces, testCtx, nsWith("namespace/qinglong"), env, CodeArgvShape},
		{"namespace read as yaml", evidence.StepNamespaces, testCtx, replace(ns, len(ns)-1, "-o=yaml"), env, CodeArgvShape},
		{"namespace read without -o=json", evidence.StepNamespaces, testCtx, ns[:len(ns)-1], env, CodeArgvShape},
		{"namespace read of pods", evidence.StepNamespaces, testCtx, replace(ns, 5, "pods"), env, CodeArgvShape},
		{"namespace read with --all-namespaces", evidence.StepNamespaces, testCtx, slices.Insert(slices.Clone(ns), 6, "--all-namespaces"), env, CodeArgvShape},
		{"identity read with a name added", evidence.StepIdentity, testCtx, slices.Insert(slices.Clone(id), 7, "qinglong"), env, CodeArgvShape},
		{"version read as yaml", evidence.StepVersion, testCtx, replace(ver, 5, "-o=yaml"), env, CodeArgvShape},
		{"version read without -o=json", evidence.StepVersion, testCtx, ver[:5], env, CodeArgvShape},
		{"version read --client", evidence.StepVersion, testCtx, slices.Insert(slices.Clone(ver), 5, "--client"), env, CodeArgvShape},
		{"version read --client=true in place of -o=json", evidence.StepVersion, testCtx, replace(ver, 5, "--client=true"), env, CodeArgvShape},
		{"version read with an operand", evidence.StepVersion, testCtx, append(slices.Clone(ver), "qinglong"), env, CodeArgvShape},
		{"version read with -o json as two arguments", evidence.StepVersion, testCtx, append(replace(ver, 5, "-o"), "json"), env, CodeArgvShape},
		{"identity read recorded as the version read", evidence.StepVersion, testCtx, id, env, CodeArgvShape},
		{"version read recorded as the identity read", evidence.StepIdentity, testCtx, ver, env, CodeArgvShape},
		{"version read with another context", evidence.StepVersion, testCtx, replace(ver, 2, "--context=other"), env, CodeArgvShape},
		{"version read with a proxy in env", evidence.StepVersion, testCtx, ver, append(slices.Clone(env), "HTTPS_PROXY=http://proxy:3128"), CodeEnvShape},
		{"namespace read's argv recorded as the final identity read", evidence.StepIdentityFinal, testCtx, ns, env, CodeArgvShape},
	}
	// --force-conflicts in every position, and in place of every step argument.
	for i := 1; i <= len(apply); i++ {
		vectors = append(vectors, struct {
			name, step, context string
			argv, env           []string
			code                refuse.Code
		}{"--force-conflicts inserted", evidence.StepApply, testCtx, slices.Insert(slices.Clone(apply), i, "--force-conflicts=true"), env, CodeArgvShape})
	}
	for i := 4; i < len(apply); i++ {
		vectors = append(vectors, struct {
			name, step, context string
			argv, env           []string
			code                refuse.Code
		}{"--force-conflicts substituted", evidence.StepApply, testCtx, replace(apply, i, "--force-conflicts"), env, CodeArgvShape})
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			err := CheckInvocation(v.step, v.context, v.argv, v.env)
			if got := refuse.CodeOf(err); got != v.code {
				t.Fatalf("code %q, want %q: %v", got, v.code, err)
			}
		})
	}
}

func TestCheckDirNames(t *testing.T) {
	for dir, ok := range map[string]bool{
		testDir: true, "/ql3-kubectl-1": true, "/a/b/ql3-kubectl-0": true,
		"/tmp/ql3-kubectl-": false, "/tmp/ql3-kubectl-1a": false, "/tmp/ql3-kubectl-1/": false, "/tmp/x-ql3-kubectl-1": false,
		"/tmp/ql3-kubectl-1/sub": false, "/tm\np/ql3-kubectl-1": false, "": false, "/": false,
	} {
		if checkDir(dir) != ok {
			t.Errorf("checkDir(%q) = %v", dir, !ok)
		}
	}
}

// TestOperands: the namespace read carries its names between its fixed arguments, Operands gives
// them back, and no other step takes any.
func TestOperands(t *testing.T) {
	ns, env := validInvocation(t, evidence.StepNamespaces)
	if got := strings.Join(ns[4:], " "); got != "get namespace qinglong team-b -o=json" {
		t.Fatalf("namespace read args %q", got)
	}
	if err := CheckInvocation(evidence.StepNamespaces, testCtx, ns, env); err != nil {
		t.Fatal(err)
	}
	if got := Operands(evidence.StepNamespaces, ns); !slices.Equal(got, testNames) {
		t.Fatalf("Operands = %q", got)
	}
	one, ok := buildArgv(testExec, evidence.StepNamespaces, testDir, testCtx, "qinglong")
	if !ok || CheckInvocation(evidence.StepNamespaces, testCtx, one, env) != nil || !slices.Equal(Operands(evidence.StepNamespaces, one), []string{"qinglong"}) {
		t.Fatalf("one name: %q %v", one, ok)
	}
	for _, step := range Steps() {
		if step == evidence.StepNamespaces {
			continue
		}
		if TakesOperands(step) || Operands(step, ns) != nil {
			t.Errorf("step %s takes operands", step)
		}
		if _, ok := buildArgv(testExec, step, testDir, testCtx, "qinglong"); ok {
			t.Errorf("step %s built with an operand", step)
		}
	}
	if _, ok := buildArgv(testExec, evidence.StepNamespaces, testDir, testCtx); ok {
		t.Error("namespace read built without names")
	}
	many := make([]string, MaxOperands+1)
	for i := range many {
		many[i] = fmt.Sprintf("ns-%05d", i)
	}
	if !ValidOperands(many[:MaxOperands]) || ValidOperands(many) {
		t.Errorf("the bound of %d names is not where it should be", MaxOperands)
	}
}
