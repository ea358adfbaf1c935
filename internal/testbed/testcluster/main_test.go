package testcluster

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// testEvent is one line of `go test -json` (cmd/test2json).
type testEvent struct {
	Action, Package, Test, Output string
}

// outcome is what one top-level test did in a `go test -json` run, its subtests included: a
// test whose subtests skipped did not run what it names, though go test calls it passed.
type outcome struct {
	action string // fail if it or a subtest failed, else skip if it or a subtest skipped, else pass
	output string // its output and its subtests'
}

// goTestJSON runs `go test -json -count=1` of pkgs without the Kubernetes tools, CI=ci, and
// returns each package's top-level tests by name.
func goTestJSON(t *testing.T, ci string, pkgs ...string) map[string]map[string]outcome {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv(ciEnv) == "true" {
			t.Fatalf("the go command is required under CI: %v", err)
		}
		t.Skipf("no go command: %v", err)
	}
	cmd := exec.Command(goBin, append([]string{"test", "-json", "-count=1"}, pkgs...)...)
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "QL3_K8S_TOOLS", KubectlToolsEnv, ciEnv:
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, ciEnv+"="+ci)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, runErr := cmd.Output()
	rank := map[string]int{"pass": 1, "skip": 2, "fail": 3}
	got := map[string]map[string]outcome{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var e testEvent
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("go test -json: %v\n%s", err, stderr.Bytes())
		}
		if e.Test == "" {
			continue
		}
		top, _, _ := strings.Cut(e.Test, "/")
		if got[e.Package] == nil {
			got[e.Package] = map[string]outcome{}
		}
		o := got[e.Package][top]
		o.output += e.Output
		if rank[e.Action] > rank[o.action] {
			o.action = e.Action
		}
		got[e.Package][top] = o
	}
	for _, p := range pkgs {
		if len(got[p]) == 0 {
			t.Fatalf("%s: no test reported at all (%v)\n%s", p, runErr, stderr.Bytes())
		}
	}
	return got
}

// TestNoToolsStillRunsWhatNeedsNoCluster: without the Kubernetes tools, a package of cluster
// tests runs the tests that need no cluster (they pass), and each test that needs one is skipped
// with the reason; under CI=true each of those is a failure instead, and the package fails. A
// package that printed ok having run nothing would claim tests passed which never ran.
func TestNoToolsStillRunsWhatNeedsNoCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three test packages twice")
	}
	const (
		ceremonyPkg = "github.com/qinglong/ql3/ceremony"
		kubectlPkg  = "github.com/qinglong/ql3/internal/kubectl"
		livePkg     = "github.com/qinglong/ql3/verdict/convergence/livetest" // every test needs the cluster
	)
	pkgs := []string{ceremonyPkg, kubectlPkg, livePkg}
	// noCluster names, per package, tests that need no cluster: they must run and pass.
	noCluster := map[string][]string{
		ceremonyPkg: {"TestProgressLines", "TestClassifyDryRun", "TestWriteApplyCommand"},
		kubectlPkg: {"TestAboveFD", "TestStdStream", "TestWorkdirNameIsCanonical", "TestRunRefusesBeforeStarting",
			"TestRunExecFailed", "TestRunWorkdirFailed"},
	}
	const reason = "needs a cluster: " // followed by ErrNoTools, which says how to get the tools
	skipped := map[string][]string{}
	for pkg, tests := range goTestJSON(t, "", pkgs...) {
		for name, o := range tests {
			switch o.action {
			case "skip":
				if !strings.Contains(o.output, reason) || !strings.Contains(o.output, ErrNoTools.Error()) {
					t.Errorf("%s %s skipped without saying it needs the cluster and how to get it:\n%s", pkg, name, o.output)
				}
				skipped[pkg] = append(skipped[pkg], name)
			case "fail":
				t.Errorf("%s %s failed without the tools:\n%s", pkg, name, o.output)
			}
		}
		for _, name := range noCluster[pkg] {
			if tests[name].action != "pass" {
				t.Errorf("%s %s needs no cluster, yet it %q without the tools", pkg, name, tests[name].action)
			}
		}
	}
	for _, p := range pkgs {
		if len(skipped[p]) == 0 {
			t.Errorf("%s: no cluster test was skipped", p)
		}
	}
	t.Logf("without the tools: %d, %d and %d cluster tests skipped", len(skipped[ceremonyPkg]), len(skipped[kubectlPkg]), len(skipped[livePkg]))

	ci := goTestJSON(t, "true", pkgs...)
	for pkg, names := range skipped {
		for _, name := range names {
			if o := ci[pkg][name]; o.action != "fail" || !strings.Contains(o.output, "under CI=true missing tools are a failure") {
				t.Errorf("%s %s under CI=true: %q, want a failure that names the missing tools:\n%s", pkg, name, o.action, o.output)
			}
		}
		for _, name := range noCluster[pkg] {
			if ci[pkg][name].action != "pass" {
				t.Errorf("%s %s under CI=true: %q, want pass", pkg, name, ci[pkg][name].action)
			}
		}
	}
}
