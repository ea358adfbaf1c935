package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestProcessCollectsFromItsFloor: the ql3 binary sets the collector's floor for its process
// (internal/gcfloor). Canonicalizing a 1 MB document allocates tens of megabytes: the runtime's
// default policy collects several times, ql3 under its floor not once, and with GOGC in the
// environment the operator's setting stands. The runtime's own trace (GODEBUG=gctrace=1) counts
// the collections.
func TestProcessCollectsFromItsFloor(t *testing.T) {
	var doc strings.Builder
	doc.WriteString("[")
	for i := range 8000 {
		if i > 0 {
			doc.WriteString(",")
		}
		fmt.Fprintf(&doc, `{"name":"item-%d","labels":{"a":"%s","c":"%d"},"values":[0,1,2,3,4,5,6,7,8,9]}`, i, strings.Repeat("b", 20), i)
	}
	doc.WriteString("]")
	file := filepath.Join(t.TempDir(), "doc.json")
	if err := os.WriteFile(file, []byte(doc.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cycle := regexp.MustCompile(`(?m)^gc \d+ @`)
	collections := func(env ...string) int {
		t.Helper()
		cmd := exec.Command(ql3Binary(t), "canonicalize", file)
		cmd.Env = append(append(os.Environ(), "QL3_STORE=", "GODEBUG=gctrace=1"), env...)
		var out, errs bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errs
		if err := cmd.Run(); err != nil || out.Len() < doc.Len()/2 {
			t.Fatalf("ql3 canonicalize: %v, %d bytes out\n%s", err, out.Len(), errs.String())
		}
		return len(cycle.FindAllString(errs.String(), -1))
	}
	// The operator's GOGC, here the runtime's default, replaces the floor.
	if n := collections("GOGC=100"); n < 2 {
		t.Fatalf("with GOGC=100 the canonicalization collected %d times: the document is too small to tell the policies apart", n)
	}
	// Without GOGC (a caller's is put back when the test ends), the floor.
	if v, ok := os.LookupEnv("GOGC"); ok {
		t.Setenv("GOGC", v)
		os.Unsetenv("GOGC")
	}
	if n := collections(); n != 0 {
		t.Errorf("ql3 under its floor collected %d times, want 0", n)
	}
}
