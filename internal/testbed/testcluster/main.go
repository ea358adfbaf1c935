package testcluster

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
)

// Main starts one cluster for a test package; use as os.Exit(testcluster.Main(m, &cluster)).
// A run that executes no test needs none, and gets none: listing (-test.list), a fuzz worker,
// fuzzing with -run '^$' (as `make fuzz` does), and -run '^$' without -bench (a build), so that a
// package's fuzz targets run and list, and its binary builds, without the Kubernetes tools.
func Main(m *testing.M, c **Cluster) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	if noTests() {
		return m.Run()
	}
	t, err := FindTools()
	if err != nil {
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "FAIL:", err)
			return 1
		}
		fmt.Fprintln(os.Stderr, "SKIP cluster tests:", err)
		return 0
	}
	cl, err := Start(context.Background(), t, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: start cluster:", err)
		return 1
	}
	*c = cl
	code := m.Run()
	if code != 0 {
		fmt.Fprint(os.Stderr, cl.Logs())
	}
	if err := cl.Stop(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "FAIL: stop cluster:", err)
		code = 1
	}
	return code
}

func noTests() bool {
	value := func(name string) string {
		if f := flag.Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	// -run '^$' executes no test; it still runs benchmarks unless -bench is empty, and then it
	// only builds (make matrix builds every test binary that way before its cells run).
	return value("test.list") != "" || value("test.fuzzworker") == "true" ||
		(value("test.run") == "^$" && (value("test.fuzz") != "" || value("test.bench") == ""))
}
