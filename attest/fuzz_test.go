package attest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/qinglong/ql3/evidence"
)

// FuzzParseBundle: the bundle parser never panics, and a bundle it accepts is canonical and
// re-encodes to the same bytes. Seeds: testdata/fuzz/FuzzParseBundle (checked to exist).
func FuzzParseBundle(f *testing.F) {
	seedsMustExist(f, "FuzzParseBundle")
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parseBundle(b)
		if err != nil {
			return
		}
		if len(p.sigs) == 0 || !isHint(p.hint) {
			t.Fatalf("accepted bundle without signature or hint")
		}
		if c, err := evidence.Canonicalize(b); err != nil || string(c) != string(b) {
			t.Fatalf("accepted a non-canonical bundle")
		}
	})
}

// FuzzDecodeStatement: the statement reader never panics, and a statement it accepts marshals
// back to the same canonical bytes.
func FuzzDecodeStatement(f *testing.F) {
	seedsMustExist(f, "FuzzDecodeStatement")
	f.Fuzz(func(t *testing.T, b []byte) {
		var st evidence.Statement
		if err := evidence.DecodeRecord(evidence.MediaTypeStatement, b, &st); err != nil {
			return
		}
		out, err := evidence.MarshalRecord(st)
		if err != nil || string(out) != string(b) {
			t.Fatalf("accepted statement does not round-trip: %v", err)
		}
	})
}

func seedsMustExist(f *testing.F, name string) {
	ents, err := os.ReadDir(filepath.Join("testdata", "fuzz", name))
	if err != nil || len(ents) == 0 {
		f.Fatalf("no committed seeds for %s: %v", name, err)
	}
}
