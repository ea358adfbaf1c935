package convergence_test

import (
	"testing"

	"github.com/qinglong/ql3/evidence/lock"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/verdict/convergence"
)

// TestJudgeLiveReadFailed: a live audit's convergence read that exited non-zero is a failed read
// (CONVERGENCE_READ_FAILED), never a drift report, unless it shows an object missing, which is
// what kubectl get exits 1 for: with every object present, and with no output at all.
func TestJudgeLiveReadFailed(t *testing.T) {
	c := load(t, "live-list.json", "manifest.yaml")
	l := &lock.Result{Objects: c.objs, Authorities: c.auths}
	if _, err := convergence.JudgeLive(l, nil, 0, c.out, 0); refuse.CodeOf(err) == convergence.CodeReadFailed {
		t.Fatalf("exit 0 judged as a failed read: %v", err)
	}
	vectors := []struct {
		name   string // what the read printed
		stdout []byte // its stdout
	}{
		{"every object present", c.out},
		{"no output", nil},
		{"not JSON", []byte("error: the server doesn't have a resource type\n")},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			fs, err := convergence.JudgeLive(l, nil, 1, v.stdout, 42)
			if refuse.CodeOf(err) != convergence.CodeReadFailed || fs != nil {
				t.Fatalf("exit 1: %d findings, %v; want %s", len(fs), err, convergence.CodeReadFailed)
			}
		})
	}
}
