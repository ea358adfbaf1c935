package evidence

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	"github.com/qinglong/ql3/refuse"
)

func dg(s string) digest.Digest { return FromBytes([]byte(s)) }

func desc(mt, s string) Descriptor {
	return Descriptor{MediaType: mt, Digest: dg(s), Size: int64(len(s))}
}

// recordCase is one record type with a valid instance and the names used to break it.
type recordCase struct {
	mediaType string // record media type
	value     any    // valid instance (pointer to the record struct)
	missing   string // a required top-level field to delete
}

func recordCases() []recordCase {
	pf, rc := dg("preflight"), dg("receipt")
	fr := FileRef{Path: "/abs/m.yaml", Digest: dg("m")}
	kc := KubeconfigRef{Path: "/abs/kc", Digest: dg("kc"), Context: "ctx"}
	inputs := Inputs{
		CommandFile: desc(MediaTypeInput, "i1"), Manifest: desc(MediaTypeInput, "i2"),
		LockReport: desc(MediaTypeInput, "i3"), Kubeconfig: desc(MediaTypeInput, "i4"), Kubectl: desc(MediaTypeInput, "i5"),
	}
	lock := LockBinding{ReportDigest: dg("r"), ManifestDigest: dg("m"), CatalogDigest: dg("c"), CatalogCommit: "abc", ReleaseSet: dg("rs"), ReleaseVersion: "1.0.0"}
	content := desc(MediaTypeManifest, "manifest bytes")
	return []recordCase{
		{MediaTypeCommand, &Command{
			Schema: SchemaCommand, Command: CommandApply, Store: "/abs/store", Manifest: fr, LockReport: fr,
			Kubeconfig: kc, Kubectl: fr, ExpectedClusterUID: "uid-1", FieldManager: FieldManager, Preflight: &pf,
		}, "expectedClusterUid"},
		{MediaTypeCommand, &Command{
			Schema: SchemaCommand, Command: CommandReceiptAudit, Store: "/abs/store", Manifest: fr, LockReport: fr,
			Kubeconfig: kc, Kubectl: fr, ExpectedClusterUID: "uid-1", FieldManager: FieldManager, Receipt: &rc,
		}, "store"},
		{MediaTypeInput, &Input{
			Schema: SchemaInput, Role: RoleManifest, Path: "/abs/m.yaml", Dev: "18446744073709551615", Inode: "12",
			Mode: "0600", UID: 0, Size: 14, Mtime: "2026-01-01T00:00:00.000000001Z", Ctime: "2026-01-01T00:00:00Z",
			Digest: dg("manifest bytes"), Content: &content,
		}, "uid"},
		{MediaTypeKubeconfig, &KubeconfigSummary{
			Schema: SchemaKubeconfig, Digest: dg("kc"), Context: "ctx", Cluster: "c", Server: "https://127.0.0.1:6443",
			CADigest: dg("ca"), User: "u", AuthKind: AuthClientCertificate,
		}, "caDigest"},
		{MediaTypeExec, &Exec{
			Schema: SchemaExec, Step: StepApply, Argv: []string{"kubectl", "apply", "-f", "-"}, Env: []string{},
			KubectlDigest: dg("kubectl"), Stdin: &content, Stdout: desc(MediaTypeStdout, "out"), Stderr: desc(MediaTypeStderr, ""),
			StdoutBytes: 3, StderrBytes: 0, ExitCode: -1, StartedAt: "t0", FinishedAt: "t1", DurationMs: 9007199254740992,
		}, "env"},
		{MediaTypePreflight, &Preflight{
			Schema: SchemaPreflight, Command: desc(MediaTypeCommand, "cmd"), Target: dg("target"), Inputs: inputs,
			Kubeconfig: desc(MediaTypeKubeconfig, "k"), Manifest: content, LockReport: desc(MediaTypeLockReport, "l"),
			Lock: lock, ClusterUID: "uid-1", FieldManager: FieldManager,
			Execs: []Descriptor{desc(MediaTypeExec, "e1"), desc(MediaTypeExec, "e2")}, NetworkAccess: true,
			StartedAt: "t0", FinishedAt: "t1",
		}, "execs"},
		{MediaTypeIntent, &Intent{
			Schema: SchemaIntent, Command: desc(MediaTypeCommand, "cmd"), Preflight: desc(MediaTypePreflight, "p"),
			Target: dg("target"), ClusterUID: "uid-1", Execs: []Descriptor{}, CreatedAt: "t0",
		}, "createdAt"},
		{MediaTypeReceipt, &Receipt{
			Schema: SchemaReceipt, Command: desc(MediaTypeCommand, "cmd"), Preflight: desc(MediaTypePreflight, "p"),
			Intent: desc(MediaTypeIntent, "i"), Recovered: true, Target: dg("target"), Inputs: inputs,
			Kubeconfig: desc(MediaTypeKubeconfig, "k"), Manifest: content, LockReport: desc(MediaTypeLockReport, "l"),
			Lock: lock, KubeconfigDigest: dg("kc"), KubectlDigest: dg("kubectl"), ClusterUID: "uid-1", FieldManager: FieldManager,
			Execs:         []Descriptor{desc(MediaTypeExec, "e1")},
			Objects:       []LiveObject{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "n", UID: "u", ResourceVersion: "1"}},
			NetworkAccess: true, KubernetesMutation: true, StartedAt: "t0", FinishedAt: "t1",
		}, "objects"},
	}
}

func fresh(v any) any { return reflect.New(reflect.TypeOf(v).Elem()).Interface() }

// mutate decodes canonical record b into generic JSON, applies f and returns the canonical result.
func mutate(t *testing.T, b []byte, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	f(m)
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Canonicalize(raw)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// breakDigest replaces the first digest string found (depth first, sorted keys) with a bad one.
func breakDigest(v any, bad string) bool {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		for _, k := range sortedStrings(keys) {
			if s, ok := x[k].(string); ok && strings.HasPrefix(s, "sha256:") {
				x[k] = bad
				return true
			}
			if breakDigest(x[k], bad) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if breakDigest(e, bad) {
				return true
			}
		}
	}
	return false
}

func sortedStrings(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}

func TestRecordsRoundTrip(t *testing.T) {
	for _, c := range recordCases() {
		b, err := MarshalRecord(c.value)
		if err != nil {
			t.Fatalf("%s: marshal: %v", c.mediaType, err)
		}
		got := fresh(c.value)
		if err := DecodeRecord(c.mediaType, b, got); err != nil {
			t.Fatalf("%s: decode: %v", c.mediaType, err)
		}
		if !reflect.DeepEqual(got, c.value) {
			t.Errorf("%s: round trip changed the record:\n got %+v\nwant %+v", c.mediaType, got, c.value)
		}
		// A pretty-printed command file is fine for DecodeStrict, never for DecodeRecord.
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, b, "", "  "); err != nil {
			t.Fatal(err)
		}
		if err := DecodeStrict(pretty.Bytes(), fresh(c.value)); err != nil {
			t.Errorf("%s: DecodeStrict of indented record: %v", c.mediaType, err)
		}
		if code := refuse.CodeOf(DecodeRecord(c.mediaType, pretty.Bytes(), fresh(c.value))); code != CodeRecordNotCanonical {
			t.Errorf("%s: indented record: code %q want %q", c.mediaType, code, CodeRecordNotCanonical)
		}
	}
}

func TestRecordsRefuse(t *testing.T) {
	for _, c := range recordCases() {
		good, err := MarshalRecord(c.value)
		if err != nil {
			t.Fatal(err)
		}
		other := MediaTypeReceipt
		if c.mediaType == MediaTypeReceipt {
			other = MediaTypeIntent
		}
		vectors := []struct {
			name      string      // what is broken
			mediaType string      // media type passed to DecodeRecord
			b         []byte      // record bytes
			code      refuse.Code // expected reason code from DecodeRecord (and DecodeStrict where shared)
			strict    bool        // DecodeStrict must refuse with the same code
		}{
			{"unknown field", c.mediaType, mutate(t, good, func(m map[string]any) { m["bogus"] = "x" }), CodeRecordUnknownField, true},
			{"missing field", c.mediaType, mutate(t, good, func(m map[string]any) { delete(m, c.missing) }), CodeRecordMissingField, true},
			{"bad digest", c.mediaType, mutate(t, good, func(m map[string]any) { breakDigest(m, "sha256:ABC") }), CodeDigestInvalid, true},
			{"md5 digest", c.mediaType, mutate(t, good, func(m map[string]any) { breakDigest(m, "md5:"+strings.Repeat("0", 32)) }), CodeDigestInvalid, true},
			{"null field", c.mediaType, mutate(t, good, func(m map[string]any) { m[c.missing] = nil }), CodeRecordShape, true},
			{"wrong type", c.mediaType, mutate(t, good, func(m map[string]any) { m[c.missing] = true }), CodeRecordShape, true},
			{"schema not a string", c.mediaType, mutate(t, good, func(m map[string]any) { m["schema"] = json.Number("1") }), CodeRecordSchemaMismatch, false},
			{"schema missing", c.mediaType, mutate(t, good, func(m map[string]any) { delete(m, "schema") }), CodeRecordSchemaMismatch, false},
			{"not canonical", c.mediaType, append([]byte(" "), good...), CodeRecordNotCanonical, false},
			{"schema mismatch", other, good, CodeRecordSchemaMismatch, false},
			{"raw blob media type", MediaTypeManifest, good, CodeRecordSchemaMismatch, false},
			{"duplicate key", c.mediaType, append(append([]byte(nil), good[:len(good)-1]...), []byte(`,"schema":"x"}`)...), CodeDuplicateKey, true},
			{"not json", c.mediaType, good[:len(good)-1], CodeInvalidJSON, true},
		}
		for _, v := range vectors {
			if code := refuse.CodeOf(DecodeRecord(v.mediaType, v.b, fresh(c.value))); code != v.code {
				t.Errorf("%s %s: DecodeRecord code %q want %q", c.mediaType, v.name, code, v.code)
			}
			if v.strict {
				if code := refuse.CodeOf(DecodeStrict(v.b, fresh(c.value))); code != v.code {
					t.Errorf("%s %s: DecodeStrict code %q want %q", c.mediaType, v.name, code, v.code)
				}
			}
		}
	}
}

// TestTargetDiff: every field of a target is named when it alone differs, so a new field cannot
// be forgotten silently (the reflect walk counts the leaves).
func TestTargetDiff(t *testing.T) {
	base := Target{Schema: SchemaCommand, Store: "/s", Manifest: FileRef{"/m", "sha256:m"}, LockReport: FileRef{"/r", "sha256:r"},
		Kubeconfig: KubeconfigRef{"/k", "sha256:k", "c"}, Kubectl: FileRef{"/x", "sha256:x"}, ExpectedClusterUID: "u", FieldManager: FieldManager}
	if d := base.Diff(base); len(d) != 0 {
		t.Fatalf("identical targets differ in %v", d)
	}
	edits := map[string]func(*Target){
		"schema": func(x *Target) { x.Schema = "s2" }, "store": func(x *Target) { x.Store = "/s2" },
		"manifest.path": func(x *Target) { x.Manifest.Path = "/m2" }, "manifest.digest": func(x *Target) { x.Manifest.Digest = "sha256:m2" },
		"lockReport.path": func(x *Target) { x.LockReport.Path = "/r2" }, "lockReport.digest": func(x *Target) { x.LockReport.Digest = "sha256:r2" },
		"kubeconfig.path": func(x *Target) { x.Kubeconfig.Path = "/k2" }, "kubeconfig.digest": func(x *Target) { x.Kubeconfig.Digest = "sha256:k2" },
		"kubeconfig.context": func(x *Target) { x.Kubeconfig.Context = "c2" }, "kubectl.path": func(x *Target) { x.Kubectl.Path = "/x2" },
		"kubectl.digest": func(x *Target) { x.Kubectl.Digest = "sha256:x2" }, "expectedClusterUid": func(x *Target) { x.ExpectedClusterUID = "u2" },
		"fieldManager": func(x *Target) { x.FieldManager = "other" },
	}
	if n := leaves(reflect.TypeOf(base)); n != len(edits) {
		t.Fatalf("Target has %d leaf fields, the test edits %d", n, len(edits))
	}
	for name, edit := range edits {
		u := base
		edit(&u)
		if d := base.Diff(u); len(d) != 1 || d[0] != name {
			t.Errorf("editing %s: Diff = %v", name, d)
		}
	}
}

func leaves(t reflect.Type) int {
	if t.Kind() != reflect.Struct {
		return 1
	}
	n := 0
	for i := 0; i < t.NumField(); i++ {
		n += leaves(t.Field(i).Type)
	}
	return n
}
