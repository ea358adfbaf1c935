package lock

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/manifest"
	"github.com/qinglong/ql3/refuse"
)

func readValid(t testing.TB) (man, rep []byte) {
	t.Helper()
	var err error
	if man, err = os.ReadFile(filepath.Join(fixtures, "valid", "locked.yaml")); err != nil {
		t.Fatal(err)
	}
	if rep, err = os.ReadFile(filepath.Join(fixtures, "valid", "lock-report.json")); err != nil {
		t.Fatal(err)
	}
	return man, rep
}

// The values hand-written into testdata/lock/valid.
const (
	validCommit  = "8806e4eb532f89b503d30ddb2b6fec837db58735"
	validCatalog = "sha256:9470e57558884742c19765f99c26e53dc71d93182874cdb35377b173d4d44812"
	validSet     = "sha256:74facdb0206513a6b9f3a7f4fda07d1fa05cb822fb2ea155ebc473b4dccc9025"
	imgAPI       = "ghcr.io/qinglong/qinglong-api@sha256:ea4f4db0afbd591445caa623bda2f6466aa9c1213c3926d1624f703cdb094bc7"
	imgScheduler = "ghcr.io/qinglong/qinglong-scheduler@sha256:2024e388b71a88fde54795e52a183a8ccfd55aa80c5efa5fc6ee43522c15b12f"
	imgRunner    = "ghcr.io/qinglong/qinglong-runner@sha256:f0e793e2a55931436ada41ca7505bde00fcacb6ccc73e3906925fcfd68e0b162"
	imgWeb       = "ghcr.io/qinglong/qinglong-web@sha256:675bbb1fa4f08558e6ff262ad3049cff5cfb603d6370d3b0710b0fd57fa009cf"
)

func TestVerifyValidResult(t *testing.T) {
	man, rep := readValid(t)
	res, err := Verify(man, rep)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Parse(man)
	if err != nil {
		t.Fatal(err)
	}
	selfDigest := regexp.MustCompile(`"reportDigest": "(sha256:[0-9a-f]{64})"`).FindSubmatch(rep)
	if selfDigest == nil {
		t.Fatal("valid report has no reportDigest")
	}
	ann := func(role string) map[string]string {
		return map[string]string{AnnotationReleaseVersion: "3.4.1", AnnotationCatalogDigest: validCatalog,
			AnnotationCatalogCommit: validCommit, AnnotationReleaseSet: validSet, AnnotationRole: role}
	}
	podSpec := []string{"spec", "template", "spec"}
	auth := func(i int, role string, cs ...Container) Authority {
		return Authority{ObjectIndex: i, Role: role, APIVersion: "apps/v1", Kind: "Deployment", Namespace: "qinglong",
			Name: role, PodSpecPath: podSpec, Annotations: ann(role), Containers: cs}
	}
	want := &Result{
		ReleaseVersion: "3.4.1", CatalogWorkflow: CatalogWorkflow, CatalogRef: "refs/tags/v3.4.1", CatalogCommit: validCommit,
		CatalogDigest: validCatalog, ReleaseSet: validSet, ReportDigest: digest.Digest(selfDigest[1]),
		ManifestDigest: evidence.FromBytes(man), ManifestBytes: int64(len(man)),
		Roles:   []string{"api", "scheduler", "runner", "web"},
		Images:  []Image{{"api", imgAPI}, {"scheduler", imgScheduler}, {"runner", imgRunner}, {"web", imgWeb}},
		Objects: objs,
		Authorities: []Authority{
			auth(0, "api", Container{"containers", "api", imgAPI}),
			auth(1, "scheduler", Container{"containers", "scheduler", imgScheduler}),
			auth(2, "runner", Container{"containers", "runner", imgRunner}, Container{"initContainers", "prepare", imgRunner}),
			auth(3, "web", Container{"containers", "web", imgWeb}),
		},
	}
	if !reflect.DeepEqual(res, want) {
		t.Fatalf("got  %+v\nwant %+v", res, want)
	}
	kinds := []string{"Deployment", "Deployment", "Deployment", "Deployment", "Service", "ConfigMap"}
	for i, o := range res.Objects {
		if o.Kind != kinds[i] || o.Namespace != "qinglong" {
			t.Fatalf("object %d is %s in %q", i, o.Kind, o.Namespace)
		}
	}
}

// TestVerifyByteFlips flips bits of every byte of the valid manifest and report: each change
// must be refused, a manifest change by its digest.
func TestVerifyByteFlips(t *testing.T) {
	man, rep := readValid(t)
	for _, in := range []struct {
		name   string
		target []byte
		bits   []int       // the bits flipped at every position
		code   refuse.Code // exact code expected, or "" for any refusal
	}{
		// Any change to the manifest changes its sha256: one flip per byte.
		{"manifest", man, []int{0}, CodeManifestDigest},
		// Three flips per report byte: the low bits turn digits, hex and letters into their
		// neighbours and whitespace into other characters; bit 5 is the ASCII case bit.
		{"report", rep, []int{0, 1, 5}, ""},
	} {
		t.Run(in.name, func(t *testing.T) {
			t.Parallel()
			var accepted atomic.Int64
			b := bytes.Clone(in.target)
			for i := range b {
				for _, bit := range in.bits {
					b[i] ^= 1 << bit
					m, r := man, rep
					if in.name == "manifest" {
						m = b
					} else {
						r = b
					}
					res, err := Verify(m, r)
					if err == nil || res != nil || refuse.CodeOf(err) == "" || (in.code != "" && refuse.CodeOf(err) != in.code) {
						accepted.Add(1)
						t.Errorf("byte %d bit %d: got %v", i, bit, err)
					}
					b[i] ^= 1 << bit
				}
			}
			if accepted.Load() > 0 {
				t.Fatalf("%d flips not refused as required", accepted.Load())
			}
		})
	}
}

func TestVerifyCeilings(t *testing.T) {
	man, rep := readValid(t)
	if _, err := Verify(man, append(bytes.Clone(rep), make([]byte, MaxReportBytes+1-len(rep))...)); refuse.CodeOf(err) != CodeReportTooLarge {
		t.Fatalf("report over the ceiling: %v", err)
	}
	if _, err := Verify(append(bytes.Clone(man), make([]byte, MaxManifestBytes+1-len(man))...), rep); refuse.CodeOf(err) != CodeManifestTooLarge {
		t.Fatalf("manifest over the ceiling: %v", err)
	}
	// Exactly at both ceilings: whitespace after the report's JSON text leaves its JCS form
	// alone, a trailing comment pads the manifest.
	atMan := append(bytes.Clone(man), '#')
	atMan = append(atMan, bytes.Repeat([]byte("x"), MaxManifestBytes-len(atMan)-1)...)
	atMan = append(atMan, '\n')
	atRep := rederive(rep, atMan, "")
	atRep = append(atRep, bytes.Repeat([]byte(" "), MaxReportBytes-len(atRep))...)
	if len(atRep) != MaxReportBytes || len(atMan) != MaxManifestBytes {
		t.Fatalf("padding: %d %d", len(atRep), len(atMan))
	}
	if _, err := Verify(atMan, atRep); err != nil {
		t.Fatalf("at the ceilings: %v", err)
	}
}

// TestVerifyAccepts runs variants of the valid release that must verify too.
func TestVerifyAccepts(t *testing.T) {
	man, rep := readValid(t)
	docs := strings.Split(string(man), "\n---\n")
	web := docs[3]
	vectors := []struct {
		name     string                        // what the variant shows
		manifest string                        // manifest text
		report   func(r string) string         // report edit before rederive; nil keeps it
		check    func(t *testing.T, r *Result) // extra assertions
	}{
		{"compact report, members in another order", string(man), func(r string) string {
			var m map[string]json.RawMessage
			if err := json.Unmarshal([]byte(r), &m); err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(m) // sorted members, no whitespace
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}, nil},
		{"non-workloads first", strings.Join([]string{docs[4], docs[5], docs[0], docs[1], docs[2], docs[3]}, "\n---\n"), nil,
			func(t *testing.T, r *Result) {
				if r.Authorities[0].ObjectIndex != 2 || r.Authorities[3].ObjectIndex != 5 {
					t.Fatalf("authority indices %d..%d", r.Authorities[0].ObjectIndex, r.Authorities[3].ObjectIndex)
				}
			}},
		{"web as a CronJob", strings.Join(append(docs[:3:3], cronJob(web), docs[4], docs[5]), "\n---\n"), nil,
			func(t *testing.T, r *Result) {
				if want := []string{"spec", "jobTemplate", "spec", "template", "spec"}; !reflect.DeepEqual(r.Authorities[3].PodSpecPath, want) {
					t.Fatalf("pod spec path %v", r.Authorities[3].PodSpecPath)
				}
			}},
		{"web as a Pod with an ephemeral container", strings.Join(append(docs[:3:3], webPod, docs[4], docs[5]), "\n---\n"), nil,
			func(t *testing.T, r *Result) {
				a := r.Authorities[3]
				if !reflect.DeepEqual(a.PodSpecPath, []string{"spec"}) || len(a.Containers) != 2 || a.Containers[1].Field != "ephemeralContainers" {
					t.Fatalf("pod authority %+v", a)
				}
			}},
		{"plain annotation values, a comment, release annotations on the ConfigMap and the pod template",
			strings.Replace(strings.ReplaceAll(strings.ReplaceAll(string(man), `"3.4.1"`, "3.4.1"), "  QL_LOG_LEVEL: \"info\"\n",
				"  QL_LOG_LEVEL: \"info\" # the default\n"),
				"    metadata:\n      labels:\n        app.kubernetes.io/name: qinglong\n        app.kubernetes.io/component: web\n",
				"    metadata:\n      annotations:\n        qinglong.io/role: web\n        qinglong.io/release-set: "+validSet+"\n      labels:\n        app.kubernetes.io/name: qinglong\n        app.kubernetes.io/component: web\n", 1) +
				"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: release\n  namespace: qinglong\n  annotations:\n    qinglong.io/release-version: \"3.4.1\"\n",
			func(r string) string { return strings.Replace(r, `"resources": 6`, `"resources": 7`, 1) }, nil},
		{"members named image that name files, labels and annotations", strings.Replace(strings.Replace(string(man),
			"  QL_LOG_LEVEL: \"info\"\n", "  QL_LOG_LEVEL: \"info\"\n  image: \"docker.io/library/busybox:latest\"\n", 1),
			"  labels:\n    app.kubernetes.io/name: qinglong\nspec:\n", "  labels:\n    app.kubernetes.io/name: qinglong\n    image: mirror\n  annotations:\n    image: \"nginx:latest\"\nspec:\n", 1),
			nil, nil},
		{"flow-style documents", string(man) + "---\n{apiVersion: v1, kind: ServiceAccount, metadata: {name: qinglong, namespace: qinglong}}\n",
			func(r string) string { return strings.Replace(r, `"resources": 6`, `"resources": 7`, 1) }, nil},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			r := string(rep)
			if v.report != nil {
				r = v.report(r)
			}
			out := rederive([]byte(r), []byte(v.manifest), "")
			res, err := Verify([]byte(v.manifest), out)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if len(res.Authorities) != 4 || res.ManifestDigest != evidence.FromBytes([]byte(v.manifest)) {
				t.Fatalf("result %+v", res)
			}
			if v.check != nil {
				v.check(t, res)
			}
		})
	}
}

// cronJob turns the web Deployment into a CronJob of the same pod.
func cronJob(deploy string) string {
	spec := deploy[strings.Index(deploy, "  template:\n"):]
	return strings.Replace(deploy[:strings.Index(deploy, "spec:\n")], "apiVersion: apps/v1\nkind: Deployment", "apiVersion: batch/v1\nkind: CronJob", 1) +
		"spec:\n  schedule: \"0 3 * * *\"\n  jobTemplate:\n    spec:\n" + indent(spec, "    ")
}

// webPod is the web role as a bare Pod with an ephemeral debug container of the same image.
const webPod = `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: qinglong
  annotations:
    qinglong.io/release-version: "3.4.1"
    qinglong.io/catalog-digest: "` + validCatalog + `"
    qinglong.io/catalog-commit: "` + validCommit + `"
    qinglong.io/release-set: "` + validSet + `"
    qinglong.io/role: web
spec:
  containers:
    - name: web
      image: ` + imgWeb + `
  ephemeralContainers:
    - name: debug
      image: ` + imgWeb

func indent(s, by string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = by + l
		}
	}
	return strings.Join(lines, "\n")
}

// TestVerifyMaterializedRelease verifies the materializer's committed output for release 3.4.1
// (testdata/release-3.4.1, produced by `ql3 lock materialize`): the verifier reads only its
// bytes and shares no code with the producer.
func TestVerifyMaterializedRelease(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "release-3.4.1")
	man, err := os.ReadFile(filepath.Join(dir, "locked.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := os.ReadFile(filepath.Join(dir, "lock-report.json"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Verify(man, rep)
	if err != nil {
		t.Fatal(err)
	}
	if res.ReleaseVersion != "3.4.1" || len(res.Objects) != 6 || len(res.Authorities) != 4 {
		t.Fatalf("materialized release: version %s, %d objects, %d authorities", res.ReleaseVersion, len(res.Objects), len(res.Authorities))
	}
	for i, a := range res.Authorities {
		if a.Kind != "Deployment" || a.Namespace != "qinglong" || a.Role != requiredRoles[i] {
			t.Fatalf("authority %d: %s %s/%s role %s", i, a.Kind, a.Namespace, a.Name, a.Role)
		}
	}
}

func TestCountAuthority(t *testing.T) {
	vectors := []struct {
		in   string // text
		want int    // mentions of the authority
	}{
		{"ghcr.io/qinglong/x", 1},
		{"GHCR.IO/QINGLONG", 1},
		{"ghcr.io./qinglong/x", 1},
		{"ghcr.io:443/qinglong/x", 1},
		{"https://ghcr.io/qinglong", 1},
		{"ghcr.io/qinglong:tag ghcr.io/qinglong@sha256:x", 2},
		{"ghcr.io/qinglong-ce/x", 0},
		{"ghcr.io/qinglongx", 0},
		{"ghcr.io/other/qinglong", 0},
		{"docker.io/qinglong/x", 0},
		{"ghcr.io", 0},
		{"ghcr.i/qinglong", 0},
	}
	for _, v := range vectors {
		if got := countAuthority(v.in); got != v.want {
			t.Errorf("%q: got %d, want %d", v.in, got, v.want)
		}
	}
}
