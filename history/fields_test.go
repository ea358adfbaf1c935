package history

import (
	"encoding/json"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
)

// The scanner reads from real records what encoding/json reads from them.
func TestDecodeFieldsRecords(t *testing.T) {
	d := digest.FromString("x")
	desc := evidence.Descriptor{MediaType: evidence.MediaTypeStdout, Digest: d, Size: 3}
	cmd := evidence.Descriptor{MediaType: evidence.MediaTypeCommand, Digest: digest.FromString("cmd"), Size: 99}
	lock := evidence.LockBinding{ReportDigest: d, ManifestDigest: d, CatalogDigest: d, CatalogCommit: "c", ReleaseSet: d, ReleaseVersion: "3.4.1"}
	in := evidence.Inputs{CommandFile: desc, Manifest: desc, LockReport: desc, Kubeconfig: desc, Kubectl: desc}
	rc := evidence.Receipt{Schema: evidence.SchemaReceipt, Command: cmd, Preflight: desc, Intent: desc, Recovered: true, Target: d, Inputs: in,
		Kubeconfig: desc, Manifest: desc, LockReport: desc, Lock: lock, KubeconfigDigest: d, KubectlDigest: d, ClusterUID: "uid-ü\"x",
		FieldManager: evidence.FieldManager, Execs: []evidence.Descriptor{desc}, Objects: []evidence.LiveObject{{APIVersion: "v1", Kind: "K", Name: "n", UID: "u", ResourceVersion: "1"}},
		NetworkAccess: true, KubernetesMutation: true, StartedAt: "2026-01-02T03:04:05Z", FinishedAt: "2026-01-02T03:04:06.5Z"}
	vs := []evidence.LiveVerdict{
		{APIVersion: "v1", Kind: "K", Name: "a", UID: "u", ResourceVersion: "1", ReceiptUID: "u", Verdict: evidence.VerdictConverged},
		{APIVersion: "v1", Kind: "K", Name: "b", UID: "u", ResourceVersion: "1", ReceiptUID: "u", Verdict: evidence.VerdictMissing},
	}
	la := evidence.LiveAudit{Schema: evidence.SchemaLiveAudit, Command: cmd, Receipt: desc, Target: d,
		Inputs: evidence.LiveAuditInputs{CommandFile: desc, Kubeconfig: desc, Kubectl: desc}, Kubeconfig: desc, Manifest: desc, LockReport: desc,
		Lock: lock, KubectlDigest: d, ClusterUID: "c", FieldManager: evidence.FieldManager, Execs: []evidence.Descriptor{desc},
		Verdicts: vs, NetworkAccess: true, StartedAt: "2026-01-02T03:04:05Z", FinishedAt: "2026-01-02T03:04:06Z"}
	intent := evidence.Intent{Schema: evidence.SchemaIntent, Command: cmd, Preflight: desc, Target: d, ClusterUID: "c", Execs: []evidence.Descriptor{desc}, CreatedAt: "2026-01-02T03:04:05Z"}
	for _, v := range []any{rc, la, intent} {
		b, err := evidence.MarshalRecord(v)
		if err != nil {
			t.Fatal(err)
		}
		var got, want line
		if err := got.decodeFields(b); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		if string(gj) != string(wj) {
			t.Fatalf("scanner %s\nencoding/json %s", gj, wj)
		}
	}
	c := evidence.Command{Schema: evidence.SchemaCommand, Command: evidence.CommandApply, Store: "/s", Kubeconfig: evidence.KubeconfigRef{Path: "/k", Digest: d, Context: "ctx\\1"},
		Manifest: evidence.FileRef{Path: "/m", Digest: d}, LockReport: evidence.FileRef{Path: "/r", Digest: d}, Kubectl: evidence.FileRef{Path: "/x", Digest: d},
		ExpectedClusterUID: "c", FieldManager: evidence.FieldManager, Preflight: &d}
	b, err := evidence.MarshalRecord(c)
	if err != nil {
		t.Fatal(err)
	}
	var cl commandLine
	if err := cl.decodeFields(b); err != nil || cl.Schema != evidence.SchemaCommand || cl.Kubeconfig.Context != "ctx\\1" {
		t.Fatalf("command: %+v %v", cl, err)
	}
}

// Whatever the scanner accepts is valid JSON, and it never panics.
func FuzzScanMembers(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,2.5e-3,{"b":"\u00e9\n"}],"c":true,"d":null}`, `{"schema":"x","lock":{"releaseVersion":"1"}}`,
		`{"a":-0}`, `{"a":01}`, `{"a":"\x"}`, `{"a":[}`, ` { "a" : 1 } `, `{"verdicts":[{"verdict":"converged"}],"converged":false}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var l line
		err := l.decodeFields(b)
		if err == nil && !json.Valid(b) {
			t.Fatalf("scanner accepted invalid json %q", b)
		}
		if err := scanMembers(b, func(string, []byte) error { return nil }); err == nil && !json.Valid(b) {
			t.Fatalf("scanner accepted invalid json %q", b)
		}
	})
}
