package ociartifact_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/ociartifact"
	"github.com/qinglong/ql3/refuse"
)

func leafBytes(t testing.TB, i int) []byte {
	t.Helper()
	b, err := deploylog.Leaf{Kind: deploylog.KindIntent, Key: evidence.FromBytes(fmt.Appendf(nil, "key %d", i)),
		Record: evidence.FromBytes(fmt.Appendf(nil, "record %d", i))}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	fuzzSubject = digest.Digest("sha256:" + fmt.Sprintf("%064x", 1))
	fuzzRoot    = digest.Digest("sha256:" + fmt.Sprintf("%064x", 2))
)

func writeSeeds(t *testing.T, dir string, seeds map[string][]byte) {
	t.Helper()
	os.RemoveAll(dir)
	os.MkdirAll(dir, 0o755)
	for name, b := range seeds {
		if err := os.WriteFile(filepath.Join(dir, name), fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLogFuzzSeeds keeps the committed seeds of the log referrer's parsers present and, with
// -update-seeds, writes them.
func TestLogFuzzSeeds(t *testing.T) {
	entriesDir, refDir := "testdata/fuzz/FuzzParseEntries", "testdata/fuzz/FuzzParseLogReferrer"
	if *updateSeeds {
		good := ociartifact.MarshalEntries([][]byte{leafBytes(t, 0), leafBytes(t, 1)})
		writeSeeds(t, entriesDir, map[string][]byte{
			"valid":        good,
			"empty":        {},
			"truncated":    good[:len(good)-3],
			"short-length": {0x01},
			"not-a-leaf":   ociartifact.MarshalEntries([][]byte{[]byte("hello\n")}),
			"trailing":     append(bytes.Clone(good), 0, 0),
		})
		pd := evidence.Descriptor{MediaType: ociartifact.MediaTypeTlogProof, Digest: evidence.FromBytes([]byte("p")), Size: 1}
		ed := evidence.Descriptor{MediaType: ociartifact.MediaTypeLogEntries, Digest: evidence.FromBytes(good), Size: int64(len(good))}
		mb, _, err := ociartifact.LogReferrerManifest(ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: fuzzSubject, Size: 10}, fuzzRoot, pd, ed)
		if err != nil {
			t.Fatal(err)
		}
		swapped, _, err := ociartifact.LogReferrerManifest(ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: fuzzSubject, Size: 10}, fuzzRoot, ed, pd)
		if err != nil {
			t.Fatal(err)
		}
		writeSeeds(t, refDir, map[string][]byte{
			"valid":          mb,
			"layers-swapped": swapped,
			"other-subject":  bytes.Replace(mb, []byte(fuzzSubject), []byte(fuzzRoot), 1),
			"extra-member":   bytes.Replace(mb, []byte(`{"schemaVersion":2`), []byte(`{"x":1,"schemaVersion":2`), 1),
		})
	}
	for _, d := range []string{entriesDir, refDir} {
		if ents, err := os.ReadDir(d); err != nil || len(ents) < 4 {
			t.Fatalf("fuzz seeds missing under %s: %v", d, err)
		}
	}
}

// FuzzParseEntries: no panic; every refusal has a code; what parses re-encodes to the same bytes
// and every entry is a canonical leaf.
func FuzzParseEntries(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		raws, leaves, err := ociartifact.ParseEntries(b)
		if err != nil {
			if refuse.CodeOf(err) == "" {
				t.Fatalf("refusal without a code: %v", err)
			}
			return
		}
		if !bytes.Equal(ociartifact.MarshalEntries(raws), b) {
			t.Fatalf("entries do not re-encode to their bytes")
		}
		for i, l := range leaves {
			m, err := l.Marshal()
			if err != nil || !bytes.Equal(m, raws[i]) {
				t.Fatalf("entry %d is not canonical: %v", i, err)
			}
		}
	})
}

// FuzzParseLogReferrer: no panic; every refusal has a code; what parses is the manifest
// LogReferrerManifest writes for its two layers.
func FuzzParseLogReferrer(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		pd, ed, err := ociartifact.ParseLogReferrer(b, fuzzSubject, fuzzRoot)
		if err != nil {
			if refuse.CodeOf(err) == "" {
				t.Fatalf("refusal without a code: %v", err)
			}
			return
		}
		if pd.MediaType != ociartifact.MediaTypeTlogProof || ed.MediaType != ociartifact.MediaTypeLogEntries {
			t.Fatalf("accepted layers %+v %+v", pd, ed)
		}
	})
}
