package materialize

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/qinglong/ql3/evidence"
)

var update = flag.Bool("update", false, "rewrite testdata/release-3.4.1/locked.yaml and lock-report.json")

// TestGolden pins the committed locked output of the synthetic release byte for byte.
func TestGolden(t *testing.T) {
	r, err := Materialize(readRelease(t, "catalog.json"), readRelease(t, "unlocked.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		for name, b := range map[string][]byte{ManifestName: r.Manifest, ReportName: r.Report} {
			if err := os.WriteFile(filepath.Join(release, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := readRelease(t, ManifestName); !bytes.Equal(got, r.Manifest) {
		t.Errorf("%s differs from the committed file (run with -update after checking why)", ManifestName)
	}
	if got := readRelease(t, ReportName); !bytes.Equal(got, r.Report) {
		t.Errorf("%s differs from the committed file (run with -update after checking why)", ReportName)
	}
	// The report is what the summary claims, independently of how it was built.
	l := r.Lock
	if l.Manifest.Digest != evidence.FromBytes(r.Manifest) || l.Manifest.Bytes != int64(len(r.Manifest)) ||
		l.Manifest.Resources != 6 || l.Manifest.ImageAuthorities != 4 {
		t.Fatalf("manifest summary %+v", l.Manifest)
	}
}

// TestDeterministic materializes twice from fresh copies and demands identical bytes.
func TestDeterministic(t *testing.T) {
	var prev *Result
	for range 3 {
		r, err := Materialize(readRelease(t, "catalog.json"), readRelease(t, "unlocked.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if prev != nil && (!bytes.Equal(prev.Manifest, r.Manifest) || !bytes.Equal(prev.Report, r.Report)) {
			t.Fatal("two runs gave different bytes")
		}
		prev = r
	}
}

// TestReportDigests recomputes every digest of the report from its own bytes with a generic JSON
// decoding, so a wrong member order or a digest over the wrong bytes cannot pass.
func TestReportDigests(t *testing.T) {
	r, err := Materialize(readRelease(t, "catalog.json"), readRelease(t, "unlocked.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := evidence.DecodeStrict(r.Report, &m); err != nil {
		t.Fatal(err)
	}
	self := m["reportDigest"]
	delete(m, "reportDigest")
	if got := digestJSON(t, m); got != self {
		t.Fatalf("reportDigest %v, recomputed %v", self, got)
	}
	set := digestJSON(t, map[string]any{"roles": m["roles"], "images": m["images"]})
	if cat := m["catalog"].(map[string]any); cat["releaseSet"] != set {
		t.Fatalf("releaseSet %v, recomputed %v", cat["releaseSet"], set)
	}
	canon, err := evidence.Canonicalize(readRelease(t, "catalog.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cat := m["catalog"].(map[string]any); cat["digest"] != string(evidence.FromBytes(canon)) {
		t.Fatalf("catalog digest %v", cat["digest"])
	}
}
