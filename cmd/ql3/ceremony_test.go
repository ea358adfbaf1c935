package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/command"
	"github.com/qinglong/ql3/internal/testbed/ceremonytest"
	"github.com/qinglong/ql3/refuse"
)

func TestCeremonyCommandRequiresFile(t *testing.T) {
	cmd := newPreflightCmd(&RootOptions{Output: "text"})
	cmd.SetArgs(nil)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	err := cmd.Execute()
	r, ok := refuse.As(err)
	if !ok || r.Code != CodeFlagRequired || refuse.ExitStatus(r.Code) != refuse.ExitUsage {
		t.Fatalf("err %v", err)
	}
}

func TestCeremonyCommandMismatch(t *testing.T) {
	dir := ceremonytest.PrivateDir(t)
	d := string(evidence.FromBytes(nil))
	c := map[string]any{
		"schema": evidence.SchemaCommand, "command": evidence.CommandApply, "store": filepath.Join(dir, "store"),
		"manifest": map[string]any{"path": "/x/m", "digest": d}, "lockReport": map[string]any{"path": "/x/r", "digest": d},
		"kubeconfig": map[string]any{"path": "/x/k", "digest": d, "context": "c"},
		"kubectl":    map[string]any{"path": "/x/kubectl", "digest": d}, "expectedClusterUid": "7f6c2a1e-0000-4000-8000-000000000001",
		"fieldManager": evidence.FieldManager, "preflight": d,
	}
	raw, _ := json.Marshal(c)
	p := filepath.Join(dir, "apply.json")
	if err := os.WriteFile(p, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := newPreflightCmd(&RootOptions{Output: "text"})
	cmd.SetArgs([]string{"--command-file=" + p})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if got := refuse.CodeOf(cmd.Execute()); got != command.CodeCommandMismatch {
		t.Fatalf("code %q", got)
	}
}
