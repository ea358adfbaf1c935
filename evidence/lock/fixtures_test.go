package lock

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// -update recomputes the derived fields of the fixtures (see testdata/lock/README.md): the
// manifest digest and byte count and the release set and self-digest of each report, except the
// field a case is about.
var update = flag.Bool("update", false, "recompute digest fields of testdata/lock fixtures")

const fixtures = "../../testdata/lock"

type fixture struct {
	name             string
	manifest, report []byte
	expect           refuse.Code // "" for the valid release
}

func loadFixtures(t testing.TB) []fixture {
	t.Helper()
	dirs := []string{filepath.Join(fixtures, "valid")}
	cases, err := filepath.Glob(filepath.Join(fixtures, "invalid", "*"))
	if err != nil || len(cases) == 0 {
		t.Fatalf("no invalid fixtures under %s: %v", fixtures, err)
	}
	dirs = append(dirs, cases...)
	var out []fixture
	for _, d := range dirs {
		f := fixture{name: filepath.Base(d)}
		if e, err := os.ReadFile(filepath.Join(d, "expect")); err == nil {
			f.expect = refuse.Code(strings.TrimSpace(string(e)))
		} else if filepath.Base(filepath.Dir(d)) == "invalid" {
			t.Fatalf("%s: %v", d, err)
		}
		if *update {
			updateFixture(t, d, f.expect)
		}
		var err error
		if f.manifest, err = os.ReadFile(filepath.Join(d, "locked.yaml")); err != nil {
			t.Fatal(err)
		}
		if f.report, err = os.ReadFile(filepath.Join(d, "lock-report.json")); err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

// The derived fields each case keeps as written: a case about a digest or count must not have
// it repaired.
var keep = map[refuse.Code]string{
	CodeSelfDigest:         "reportDigest",
	CodeManifestDigest:     "manifest.digest",
	CodeManifestBytes:      "manifest.bytes",
	CodeReleaseSetMismatch: "releaseSet",
}

var (
	reManifestDigest = regexp.MustCompile(`("manifest":\s*\{\s*"digest":\s*")([^"]*)(")`)
	reManifestBytes  = regexp.MustCompile(`("manifest":\s*\{[^}]*?"bytes":\s*)-?[0-9]+`)
	reReleaseSet     = regexp.MustCompile(`("releaseSet":\s*")([^"]*)(")`)
	reReportDigest   = regexp.MustCompile(`("reportDigest":\s*")([^"]*)(")`)
)

// updateFixture rewrites the derived fields of dir's report in place (see rederive).
func updateFixture(t testing.TB, dir string, expect refuse.Code) {
	t.Helper()
	rp := filepath.Join(dir, "lock-report.json")
	man, err := os.ReadFile(filepath.Join(dir, "locked.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := os.ReadFile(rp)
	if err != nil {
		t.Fatal(err)
	}
	if next := rederive(rep, man, expect); !bytes.Equal(next, rep) {
		if err := os.WriteFile(rp, next, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("updated %s", rp)
	}
}

// rederive returns report text rep with its derived fields recomputed for manifest man, the
// hand-written text otherwise untouched: manifest.digest and manifest.bytes, catalog.releaseSet,
// then reportDigest. It leaves alone the field that a case with code expect is about, any field
// whose current value is not a well-formed digest (a malformed digest is what its case is
// about), and the whole report when it is not strict JSON (its case fails before any digest is
// looked at).
func rederive(rep, man []byte, expect refuse.Code) []byte {
	if _, err := evidence.Canonicalize(rep); err != nil {
		return rep
	}
	rep = bytes.Clone(rep)
	one := func(re *regexp.Regexp, field, value string) {
		m := re.FindAllSubmatchIndex(rep, -1)
		if keep[expect] == field || len(m) != 1 {
			return
		}
		if _, err := evidence.ParseDigest(string(rep[m[0][4]:m[0][5]])); err != nil {
			return
		}
		rep = re.ReplaceAll(rep, []byte("${1}"+value+"${3}"))
	}
	one(reManifestDigest, "manifest.digest", string(evidence.FromBytes(man)))
	if keep[expect] != "manifest.bytes" && len(reManifestBytes.FindAllIndex(rep, -1)) == 1 {
		rep = reManifestBytes.ReplaceAll(rep, []byte("${1}"+strconv.Itoa(len(man))))
	}
	var set struct {
		Roles  json.RawMessage `json:"roles"`
		Images json.RawMessage `json:"images"`
	}
	if json.Unmarshal(rep, &set) == nil && set.Roles != nil && set.Images != nil {
		if d, err := jcsDigest(map[string]any{"roles": set.Roles, "images": set.Images}); err == nil {
			one(reReleaseSet, "releaseSet", string(d))
		}
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(rep, &members) == nil {
		delete(members, "reportDigest")
		if d, err := jcsDigest(members); err == nil {
			one(reReportDigest, "reportDigest", string(d))
		}
	}
	return rep
}

func TestFixtures(t *testing.T) {
	for _, f := range loadFixtures(t) {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			res, err := Verify(f.manifest, f.report)
			if got := refuse.CodeOf(err); got != f.expect {
				t.Fatalf("got code %q (%v), want %q", got, err, f.expect)
			}
			if f.expect == "" && res == nil {
				t.Fatal("valid fixture: nil result")
			}
			if f.expect != "" && res != nil {
				t.Fatal("refusal with a result")
			}
		})
	}
}
