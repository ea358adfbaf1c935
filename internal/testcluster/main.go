package testcluster

import (
	"context"
	"fmt"
	"os"
	"testing"
)

// Main starts one cluster for a test package; use as os.Exit(testcluster.Main(m, &cluster)).
func Main(m *testing.M, c **Cluster) int {
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
