package command

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

const (
	dA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	dB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// goodCommand returns a valid command as a generic map so that vectors can break it field by field.
func goodCommand(cmd string) map[string]any {
	m := map[string]any{
		"schema":             evidence.SchemaCommand,
		"command":            cmd,
		"store":              "/srv/ql3/store",
		"manifest":           map[string]any{"path": "/srv/in/locked.yaml", "digest": dA},
		"lockReport":         map[string]any{"path": "/srv/in/lock-report.json", "digest": dA},
		"kubeconfig":         map[string]any{"path": "/srv/in/kubeconfig", "digest": dA, "context": "ops"},
		"kubectl":            map[string]any{"path": "/usr/local/bin/kubectl", "digest": dA},
		"expectedClusterUid": "7f6c2a1e-0000-4000-8000-000000000001",
		"fieldManager":       evidence.FieldManager,
	}
	switch cmd {
	case evidence.CommandApply:
		m["preflight"] = dB
	case evidence.CommandReceiptAudit, evidence.CommandLiveAudit:
		m["receipt"] = dB
	}
	return m
}

func encode(t *testing.T, m map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseCommandGood(t *testing.T) {
	for _, cmd := range []string{evidence.CommandPreflight, evidence.CommandApply, evidence.CommandReceiptAudit, evidence.CommandLiveAudit} {
		p, err := Parse(encode(t, goodCommand(cmd)))
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		if p.Digest != evidence.FromBytes(p.Canonical) {
			t.Fatalf("%s: identity is not the digest of the canonical form", cmd)
		}
	}
	// The target excludes command, preflight and receipt: preflight and apply of one target agree.
	pre, _ := Parse(encode(t, goodCommand(evidence.CommandPreflight)))
	app, _ := Parse(encode(t, goodCommand(evidence.CommandApply)))
	if pre.Target != app.Target || pre.Digest == app.Digest {
		t.Fatalf("target binding: pre %s app %s; identities %s %s", pre.Target, app.Target, pre.Digest, app.Digest)
	}
	// Whitespace and key order do not change the identity.
	indented, _ := json.MarshalIndent(goodCommand(evidence.CommandPreflight), "", "  ")
	again, err := Parse(indented)
	if err != nil || again.Digest != pre.Digest {
		t.Fatalf("identity depends on formatting: %v", err)
	}
	other := goodCommand(evidence.CommandPreflight)
	other["expectedClusterUid"] = "7f6c2a1e-0000-4000-8000-000000000002"
	o, _ := Parse(encode(t, other))
	if o.Target == pre.Target {
		t.Fatal("target does not bind expectedClusterUid")
	}
}

func TestParseCommandRefusals(t *testing.T) {
	vectors := []struct {
		name string
		cmd  string               // command the base file is built for
		edit func(map[string]any) // breaks the file
		raw  string               // used instead of edit when non-empty
		code refuse.Code
	}{
		// not JSON at all
		{name: "not json", raw: "{", code: CodeCommandMalformed},
		// an array instead of an object
		{name: "array", raw: "[]", code: CodeCommandMalformed},
		// duplicate keys are refused by the strict JCS wrapper or by the shape check
		{name: "unknown top field", edit: func(m map[string]any) { m["force"] = true }, code: CodeCommandMalformed},
		// a required field is missing
		{name: "missing store", edit: func(m map[string]any) { delete(m, "store") }, code: CodeCommandMalformed},
		// a nested required field is missing
		{name: "missing manifest digest", edit: func(m map[string]any) { delete(m["manifest"].(map[string]any), "digest") }, code: CodeCommandMalformed},
		// an unknown nested field
		{name: "unknown nested field", edit: func(m map[string]any) { m["kubectl"].(map[string]any)["args"] = "x" }, code: CodeCommandMalformed},
		// kubeconfig without context key
		{name: "missing context key", edit: func(m map[string]any) { delete(m["kubeconfig"].(map[string]any), "context") }, code: CodeCommandMalformed},
		// context on a plain file ref
		{name: "context on manifest", edit: func(m map[string]any) { m["manifest"].(map[string]any)["context"] = "x" }, code: CodeCommandMalformed},
		// null value
		{name: "null field", edit: func(m map[string]any) { m["store"] = nil }, code: CodeCommandMalformed},
		// wrong type
		{name: "number as string field", edit: func(m map[string]any) { m["store"] = 3 }, code: CodeCommandMalformed},
		// nested object replaced by a string
		{name: "manifest not object", edit: func(m map[string]any) { m["manifest"] = "/srv/in/locked.yaml" }, code: CodeCommandMalformed},
		// another schema
		{name: "schema", edit: func(m map[string]any) { m["schema"] = "qinglong/cluster-deployment-command@v2" }, code: CodeCommandSchema},
		// unknown command
		{name: "command", edit: func(m map[string]any) { m["command"] = "cluster.deployment.destroy" }, code: CodeCommandUnknown},
		// relative store
		{name: "relative store", edit: func(m map[string]any) { m["store"] = "store" }, code: CodeCommandPath},
		// unclean path
		{name: "unclean manifest path", edit: func(m map[string]any) { m["manifest"].(map[string]any)["path"] = "/srv/in/../in/locked.yaml" }, code: CodeCommandPath},
		// trailing slash
		{name: "trailing slash", edit: func(m map[string]any) { m["store"] = "/srv/ql3/store/" }, code: CodeCommandPath},
		// empty kubectl path
		{name: "empty kubectl path", edit: func(m map[string]any) { m["kubectl"].(map[string]any)["path"] = "" }, code: CodeCommandPath},
		// digest of another algorithm
		{name: "sha512 digest", edit: func(m map[string]any) {
			m["kubectl"].(map[string]any)["digest"] = "sha512:" + strings.Repeat("a", 128)
		}, code: CodeCommandDigest},
		// malformed digest
		{name: "short digest", edit: func(m map[string]any) { m["lockReport"].(map[string]any)["digest"] = "sha256:abc" }, code: CodeCommandDigest},
		// upper-case hex
		{name: "upper hex digest", edit: func(m map[string]any) { m["kubeconfig"].(map[string]any)["digest"] = strings.ToUpper(dA) }, code: CodeCommandDigest},
		// malformed preflight digest
		{name: "bad preflight digest", cmd: evidence.CommandApply, edit: func(m map[string]any) { m["preflight"] = "nope" }, code: CodeCommandDigest},
		// another field manager
		{name: "field manager", edit: func(m map[string]any) { m["fieldManager"] = "kubectl" }, code: CodeFieldManager},
		// empty context
		{name: "empty context", edit: func(m map[string]any) { m["kubeconfig"].(map[string]any)["context"] = "" }, code: CodeCommandField},
		// empty cluster uid
		{name: "empty uid", edit: func(m map[string]any) { m["expectedClusterUid"] = "" }, code: CodeCommandField},
		// finding 17 of issue 22 (docs/issues.md#issue-22): a uid is checked offline for the form the API server issues
		{name: "uid with a newline", edit: func(m map[string]any) { m["expectedClusterUid"] = "7f6c2a1e-0000-4000-8000-00000000000\n" }, code: CodeClusterUID},
		{name: "uid of 120 KB", edit: func(m map[string]any) { m["expectedClusterUid"] = strings.Repeat("a", 120<<10) }, code: CodeClusterUID},
		{name: "upper-case uid", edit: func(m map[string]any) { m["expectedClusterUid"] = "7F6C2A1E-0000-4000-8000-000000000001" }, code: CodeClusterUID},
		{name: "uid without dashes", edit: func(m map[string]any) { m["expectedClusterUid"] = "7f6c2a1e000040008000000000000001" }, code: CodeClusterUID},
		{name: "braced uid", edit: func(m map[string]any) { m["expectedClusterUid"] = "{7f6c2a1e-0000-4000-8000-00000000001}" }, code: CodeClusterUID},
		// preflight on a preflight command
		{name: "preflight on preflight", edit: func(m map[string]any) { m["preflight"] = dB }, code: CodeCommandField},
		// apply without preflight
		{name: "apply without preflight", cmd: evidence.CommandApply, edit: func(m map[string]any) { delete(m, "preflight") }, code: CodeCommandField},
		// receipt on apply
		{name: "receipt on apply", cmd: evidence.CommandApply, edit: func(m map[string]any) { m["receipt"] = dB }, code: CodeCommandField},
		// audit without receipt
		{name: "audit without receipt", cmd: evidence.CommandReceiptAudit, edit: func(m map[string]any) { delete(m, "receipt") }, code: CodeCommandField},
		// live audit without receipt, and with a preflight
		{name: "live audit without receipt", cmd: evidence.CommandLiveAudit, edit: func(m map[string]any) { delete(m, "receipt") }, code: CodeCommandField},
		{name: "live audit with preflight", cmd: evidence.CommandLiveAudit, edit: func(m map[string]any) { m["preflight"] = dB }, code: CodeCommandField},
		{name: "bad live audit receipt digest", cmd: evidence.CommandLiveAudit, edit: func(m map[string]any) { m["receipt"] = "sha256:x" }, code: CodeCommandDigest},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			raw := []byte(v.raw)
			if v.raw == "" {
				cmd := v.cmd
				if cmd == "" {
					cmd = evidence.CommandPreflight
				}
				m := goodCommand(cmd)
				v.edit(m)
				raw = encode(t, m)
			}
			_, err := Parse(raw)
			if got := refuse.CodeOf(err); got != v.code {
				t.Fatalf("code %q, want %q (err %v)", got, v.code, err)
			}
		})
	}
}

func TestExpect(t *testing.T) {
	p, err := Parse(encode(t, goodCommand(evidence.CommandApply)))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Expect(evidence.CommandApply); err != nil {
		t.Fatal(err)
	}
	if got := refuse.CodeOf(p.Expect(evidence.CommandPreflight)); got != CodeCommandMismatch {
		t.Fatalf("code %q", got)
	}
}

func FuzzParseCommand(f *testing.F) {
	for _, cmd := range []string{evidence.CommandPreflight, evidence.CommandApply, evidence.CommandReceiptAudit, evidence.CommandLiveAudit} {
		b, _ := json.Marshal(goodCommand(cmd))
		f.Add(b)
	}
	f.Add([]byte(`{"schema":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			if refuse.CodeOf(err) == "" {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		// A parsed command re-parses from its canonical form to the same identity.
		q, err := Parse(p.Canonical)
		if err != nil || q.Digest != p.Digest || q.Target != p.Target {
			t.Fatalf("canonical form does not round-trip: %v", err)
		}
	})
}
