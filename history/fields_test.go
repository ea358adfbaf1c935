package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
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
		`{"a":-0}`, `{"a":01}`, `{"a":"\x"}`, `{"a":[}`, ` { "a" : 1 } `, `{"verdicts":[{"verdict":"converged"}],"converged":false}`,
		// Strings first, longer than a word: str's skip over 8 plain bytes and its jump to the
		// first special one, against strReference.
		`"0123456789abcdef"`, `"01234567\"89abcdef\\"`, "\"0123456789\x01abcdef\"", "\"h\u00e9llo w\xc3\xb6rld 0123456789\"",
		"\"0123456\x7f\x80\xff89\"", `"0123456789abcdef`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var l line
		err := l.decodeFields(b)
		if err == nil && !json.Valid(b) {
			t.Fatalf("scanner accepted invalid json %q", b)
		}
		err = scanMembers(b, func([]byte, []byte) error { return nil })
		if err == nil && !json.Valid(b) {
			t.Fatalf("scanner accepted invalid json %q", b)
		}
		// And the converse: a valid object (far below the nesting bound) is walked.
		if trimmed := bytes.TrimLeft(b, " \t\r\n"); err != nil && len(b) < 1000 && json.Valid(b) && len(trimmed) > 0 && trimmed[0] == '{' {
			t.Fatalf("scanner refused valid json %q: %v", b, err)
		}
		if len(b) > 0 && b[0] == '"' {
			s := &scanner{b: b}
			err := s.str()
			end, ok := strReference(b)
			if (err == nil) != ok || ok && s.i != end {
				t.Fatalf("str of %q: %v at %d; byte by byte: %v at %d", b, err, s.i, ok, end)
			}
		}
	})
}

// strReference is the string rule a byte at a time, as str was before it skipped words: the index
// after the closing quote, or false for a literal str must refuse.
func strReference(b []byte) (int, bool) {
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return 0, false
		case c == '\\':
			i++
			if i >= len(b) {
				return 0, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return 0, false
				}
				for _, h := range b[i+1 : i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return 0, false
					}
				}
				i += 4
			default:
				return 0, false
			}
		}
	}
	return 0, false
}

// str skips plain bytes eight at a time: every byte it must look at (each of the 256 values, so
// every control byte, the quote, the backslash and the bytes around them) is placed at every
// offset of words before, across and after a word boundary, and str must end where the byte
// by byte rule ends, or refuse where it refuses.
func TestStrWords(t *testing.T) {
	second := []byte{0x00, 0x01, 0x1f, 0x20, 0x21, '"', '\\', 'u', 0x7f, 0x80, 0x9f, 0xa0, 0xff}
	n := 0
	for c := 0; c < 256; c++ {
		for pre := 0; pre <= 17; pre++ {
			for post := 0; post <= 9; post++ {
				for _, tail := range []string{`"`, `n"`, `u00e9"`, `u00g9"`, ``, `"rest`} {
					b := []byte{'"'}
					b = append(b, bytes.Repeat([]byte{'a'}, pre)...)
					b = append(b, byte(c))
					b = append(b, bytes.Repeat([]byte{'b'}, post)...)
					if post == 0 {
						// A borrow out of a flagged byte can flag the one after it: a second
						// byte of every kind right behind the first.
						b = append(b, second[(c+pre)%len(second)])
					}
					b = append(b, tail...)
					s := &scanner{b: b}
					err := s.str()
					end, ok := strReference(b)
					if (err == nil) != ok || ok && s.i != end {
						t.Fatalf("str of %q: %v at %d; byte by byte: %v at %d", b, err, s.i, ok, end)
					}
					n++
				}
			}
		}
	}
	t.Logf("%d literals", n)
}

// BenchmarkDecodeFields: the scanner over a receipt and a command record, the two records a
// history line reads (a listing of 10,000 publications decodes about 17,500 of them).
func BenchmarkDecodeFields(b *testing.B) {
	d := digest.FromString("x")
	desc := evidence.Descriptor{MediaType: evidence.MediaTypeStdout, Digest: d, Size: 3}
	cmd := evidence.Descriptor{MediaType: evidence.MediaTypeCommand, Digest: digest.FromString("cmd"), Size: 99}
	lock := evidence.LockBinding{ReportDigest: d, ManifestDigest: d, CatalogDigest: d, CatalogCommit: "c", ReleaseSet: d, ReleaseVersion: "3.4.1"}
	in := evidence.Inputs{CommandFile: desc, Manifest: desc, LockReport: desc, Kubeconfig: desc, Kubectl: desc}
	rc := evidence.Receipt{Schema: evidence.SchemaReceipt, Command: cmd, Preflight: desc, Intent: desc, Target: d, Inputs: in,
		Kubeconfig: desc, Manifest: desc, LockReport: desc, Lock: lock, KubeconfigDigest: d, KubectlDigest: d, ClusterUID: "5f0c2c8e-2b1e-4a51-9d53-5f3c0e0f6d7a",
		FieldManager: evidence.FieldManager, Execs: []evidence.Descriptor{desc, desc, desc, desc, desc},
		Objects:       []evidence.LiveObject{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web", UID: "u", ResourceVersion: "1"}},
		NetworkAccess: true, KubernetesMutation: true, StartedAt: "2026-01-02T03:04:05Z", FinishedAt: "2026-01-02T03:04:06.5Z"}
	c := evidence.Command{Schema: evidence.SchemaCommand, Command: evidence.CommandApply, Store: "/var/lib/ql3/store",
		Kubeconfig: evidence.KubeconfigRef{Path: "/etc/ql3/kubeconfig", Digest: d, Context: "prod"},
		Manifest:   evidence.FileRef{Path: "/release/manifest.yaml", Digest: d}, LockReport: evidence.FileRef{Path: "/release/lock.json", Digest: d},
		Kubectl: evidence.FileRef{Path: "/usr/local/bin/kubectl", Digest: d}, ExpectedClusterUID: "5f0c2c8e-2b1e-4a51-9d53-5f3c0e0f6d7a",
		FieldManager: evidence.FieldManager, Preflight: &d}
	rb, err := evidence.MarshalRecord(rc)
	if err != nil {
		b.Fatal(err)
	}
	cb, err := evidence.MarshalRecord(c)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(rb) + len(cb)))
	for b.Loop() {
		var l line
		var c commandLine
		if err := l.decodeFields(rb); err != nil {
			b.Fatal(err)
		}
		if err := c.decodeFields(cb); err != nil {
			b.Fatal(err)
		}
	}
}

// TestByLeaf places lines by leaf index, newest first, and falls back to a stable sort for
// indexes that cannot be placed (one leaf named twice, or outside the log), losing no line.
func TestByLeaf(t *testing.T) {
	at := func(idx ...int64) []Entry {
		var es []Entry
		for i := range idx {
			es = append(es, Entry{Release: fmt.Sprint(i), LogIndex: &idx[i]})
		}
		return es
	}
	order := func(es []Entry) string {
		var b strings.Builder
		for _, e := range es {
			fmt.Fprintf(&b, "%d/%s ", *e.LogIndex, e.Release)
		}
		return b.String()
	}
	for _, c := range []struct {
		idx  []int64
		size int64
		want string
	}{
		{nil, 0, ""},
		{[]int64{0}, 1, "0/0 "},
		{[]int64{2, 7, 0, 5}, 8, "7/1 5/3 2/0 0/2 "},
		{[]int64{3, 1, 3, 2}, 4, "3/0 3/2 2/3 1/1 "}, // leaf 3 twice: sorted, stably
		{[]int64{1, 9, 0}, 4, "9/1 1/0 0/2 "},        // beyond the log: sorted
		{[]int64{1, -1, 0}, 4, "1/0 0/2 -1/1 "},      // negative: sorted
	} {
		if got := order(byLeaf(at(c.idx...), c.size)); got != c.want {
			t.Errorf("byLeaf(%v, %d) = %q, want %q", c.idx, c.size, got, c.want)
		}
	}
}
