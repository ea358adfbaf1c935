package lock

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/manifest"
	"github.com/qinglong/ql3/refuse"
)

const seedDir = "testdata/fuzz/FuzzVerifyLockReport"

func seedFile(report, man []byte) []byte {
	return fmt.Appendf(nil, "go test fuzz v1\n[]byte(%s)\n[]byte(%s)\n", strconv.Quote(string(report)), strconv.Quote(string(man)))
}

// TestFuzzSeedsExist keeps the committed corpus seeded from the fixtures: every fixture pair is
// a seed, byte for byte (-update rewrites them).
func TestFuzzSeedsExist(t *testing.T) {
	fs := loadFixtures(t)
	if *update {
		old, _ := filepath.Glob(filepath.Join(seedDir, "fixture-*"))
		for _, p := range old {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.MkdirAll(seedDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range fs {
		p := filepath.Join(seedDir, "fixture-"+f.name)
		if *update {
			if err := os.WriteFile(p, seedFile(f.report, f.manifest), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("seed for %s: %v (run go test -run TestFuzzSeedsExist -update)", f.name, err)
		}
		if !bytes.Equal(got, seedFile(f.report, f.manifest)) {
			t.Fatalf("seed %s differs from its fixture (run go test -run TestFuzzSeedsExist -update)", p)
		}
	}
}

// FuzzVerifyLockReport: Verify never panics and refuses only with a reason code; whatever it
// accepts satisfies every invariant of a lock. Each input is verified as given and again with
// its report's derived fields recomputed for the manifest, so that mutated manifests reach the
// manifest checks instead of stopping at the digest.
func FuzzVerifyLockReport(f *testing.F) {
	f.Fuzz(func(t *testing.T, report, man []byte) {
		for _, rep := range [][]byte{report, rederive(report, man, "")} {
			res, err := Verify(man, rep)
			if err != nil {
				if refuse.CodeOf(err) == "" || res != nil {
					t.Fatalf("refusal without a code, or with a result: %v", err)
				}
				continue
			}
			checkInvariants(t, man, res)
		}
	})
}

func checkInvariants(t *testing.T, man []byte, res *Result) {
	t.Helper()
	if res.ManifestDigest != evidence.FromBytes(man) || res.ManifestBytes != int64(len(man)) {
		t.Fatal("result binds other manifest bytes")
	}
	objs, err := manifest.Parse(man)
	if err != nil || !reflect.DeepEqual(objs, res.Objects) {
		t.Fatalf("objects differ from manifest.Parse: %v", err)
	}
	if !reflect.DeepEqual(res.Roles, requiredRoles) || len(res.Images) != len(res.Roles) || len(res.Authorities) != len(res.Roles) {
		t.Fatal("roles, images or authorities are not one per role")
	}
	for i, a := range res.Authorities {
		if a.Role != res.Roles[i] || res.Images[i].Role != a.Role || a.Namespace == "" || len(a.Containers) == 0 {
			t.Fatalf("authority %d breaks the role order or is incomplete", i)
		}
		for _, c := range a.Containers {
			if c.Image != res.Images[i].Reference {
				t.Fatalf("authority %d runs an image that is not its role's", i)
			}
		}
		if a.Annotations[AnnotationRole] != a.Role || a.Annotations[AnnotationReleaseSet] != string(res.ReleaseSet) {
			t.Fatalf("authority %d annotations disagree with the lock", i)
		}
	}
}
