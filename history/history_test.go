package history_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/history"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// synth writes records of the ceremony's shapes straight into a store. History reads only what
// the index names and the records' own fields, so synthetic records of the right shapes stand for
// real ones here; the real-cluster tests of package ceremony read real stores.
type synth struct {
	t   testing.TB
	st  *store.Store
	n   int
	t0  time.Time
	pre map[string]evidence.Descriptor
	// Set by a test before the next record: the receipt the next preflight's plan names (zero for
	// none), the namespace of the next receipt's object ("" for "ns"), and a finishedAt the next
	// receipt claims instead of its minute ("" for none).
	planPrev  evidence.Descriptor
	namespace string
	claim     string
	// cmdMediaType, when set, is the media type the next command record is published under
	// (its descriptor in the records that name it), instead of the command's own.
	cmdMediaType string
	// direct is set by a benchmark's fixture (newDirectSynth): records, blobs and index entries
	// are written as files without fsync, and the log's leaves are kept to be laid out by
	// writeLog, so that a store of 10,000 publications is built in seconds, not minutes.
	direct *directLog
}

func newSynth(t testing.TB) *synth {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Init(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	return &synth{t: t, st: st, t0: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), pre: map[string]evidence.Descriptor{}}
}

func (s *synth) put(mt string, v any) evidence.Descriptor {
	s.t.Helper()
	if s.direct != nil {
		b, err := evidence.MarshalRecord(v)
		if err != nil {
			s.t.Fatal(err)
		}
		return s.direct.object(s.t, s.st, mt, b)
	}
	d, _, err := s.st.PutRecord(mt, v)
	if err != nil {
		s.t.Fatal(err)
	}
	return d
}

func (s *synth) blob(mt, content string) evidence.Descriptor {
	s.t.Helper()
	if s.direct != nil {
		return s.direct.object(s.t, s.st, mt, []byte(content))
	}
	d, err := s.st.PutBlob(mt, []byte(content))
	if err != nil {
		s.t.Fatal(err)
	}
	return d
}

// index publishes d under key in index kind (PutIndex, or a file and a leaf for a direct fixture).
func (s *synth) index(kind string, key digest.Digest, d evidence.Descriptor) {
	s.t.Helper()
	if s.direct != nil {
		s.direct.entry(s.t, s.st, kind, key, d)
		return
	}
	if err := s.st.PutIndex(kind, key, d); err != nil {
		s.t.Fatal(err)
	}
}

func (s *synth) at(minutes int) string {
	return s.t0.Add(time.Duration(minutes) * time.Minute).Format(time.RFC3339Nano)
}

// command stores a distinct command record of cluster and returns it.
func (s *synth) command(kind, cluster string) evidence.Descriptor {
	s.n++
	d := digest.FromString(fmt.Sprint("pin", s.n))
	c := evidence.Command{Schema: evidence.SchemaCommand, Command: kind, Store: s.st.Root(),
		Manifest: evidence.FileRef{Path: "/m", Digest: d}, LockReport: evidence.FileRef{Path: "/r", Digest: d},
		Kubeconfig: evidence.KubeconfigRef{Path: "/k", Digest: d, Context: "ctx-" + cluster}, Kubectl: evidence.FileRef{Path: "/kubectl", Digest: d},
		ExpectedClusterUID: cluster, FieldManager: evidence.FieldManager}
	if kind == evidence.CommandApply {
		c.Preflight = &d
	}
	if kind == evidence.CommandLiveAudit {
		c.Receipt = &d
	}
	d2 := s.put(evidence.MediaTypeCommand, c)
	if s.cmdMediaType != "" {
		d2.MediaType = s.cmdMediaType
	}
	return d2
}

func lockOf(release string) evidence.LockBinding {
	d := digest.FromString(release)
	return evidence.LockBinding{ReportDigest: d, ManifestDigest: d, CatalogDigest: d, CatalogCommit: "c0ffee" + release, ReleaseSet: d, ReleaseVersion: release}
}

func (s *synth) preflight(release, cluster string, minute int) evidence.Descriptor {
	x := s.blob(evidence.MediaTypeStdout, fmt.Sprint("x", s.n))
	p := evidence.Preflight{Schema: evidence.SchemaPreflight, Command: s.command(evidence.CommandPreflight, cluster), Target: x.Digest,
		Inputs: evidence.Inputs{CommandFile: x, Manifest: x, LockReport: x, Kubeconfig: x, Kubectl: x}, Kubeconfig: x, Manifest: x, LockReport: x,
		Lock: lockOf(release), ClusterUID: cluster, FieldManager: evidence.FieldManager, Execs: []evidence.Descriptor{x, x},
		NetworkAccess: true, StartedAt: s.at(minute), FinishedAt: s.at(minute)}
	if s.planPrev.Digest != "" {
		pl := evidence.Plan{Schema: evidence.SchemaPlan, Release: release, Previous: s.planPrev, PreviousRelease: "prev", PreviousAt: s.at(0),
			PreviousMan: x, ClusterUID: cluster, Manifest: x, Target: x.Digest, Added: []evidence.PlanObject{}, Changed: []evidence.PlanChange{},
			Left: []evidence.PlanObject{}, Images: []evidence.PlanMove{}, Annotations: []evidence.PlanMove{}}
		pd := s.put(evidence.MediaTypePlan, pl)
		p.Plan = &pd
		s.planPrev = evidence.Descriptor{}
	}
	d := s.put(evidence.MediaTypePreflight, p)
	s.index(evidence.IndexPreflights, d.Digest, d)
	s.pre[release+cluster] = d
	return d
}

// apply stores an intent at minute and, when done, the receipt a minute later.
func (s *synth) apply(release, cluster string, minute int, done, recovered bool) (intent, receipt evidence.Descriptor) {
	pre := s.pre[release+cluster]
	cmd := s.command(evidence.CommandApply, cluster)
	x := s.blob(evidence.MediaTypeStdout, fmt.Sprint("x", s.n))
	in := evidence.Intent{Schema: evidence.SchemaIntent, Command: cmd, Preflight: pre, Target: x.Digest, ClusterUID: cluster,
		Execs: []evidence.Descriptor{x, x}, CreatedAt: s.at(minute)}
	intent = s.put(evidence.MediaTypeIntent, in)
	s.index(evidence.IndexIntents, cmd.Digest, intent)
	if !done {
		return intent, evidence.Descriptor{}
	}
	rc := evidence.Receipt{Schema: evidence.SchemaReceipt, Command: cmd, Preflight: pre, Intent: intent, Recovered: recovered, Target: x.Digest,
		Inputs: evidence.Inputs{CommandFile: x, Manifest: x, LockReport: x, Kubeconfig: x, Kubectl: x}, Kubeconfig: x, Manifest: x, LockReport: x,
		Lock: lockOf(release), KubeconfigDigest: x.Digest, KubectlDigest: x.Digest, ClusterUID: cluster, FieldManager: evidence.FieldManager,
		Execs: []evidence.Descriptor{x}, Objects: []evidence.LiveObject{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "cm", UID: "uid-" + release, ResourceVersion: "7"}},
		NetworkAccess: true, KubernetesMutation: true, StartedAt: s.at(minute), FinishedAt: s.at(minute + 1)}
	if s.namespace != "" {
		rc.Objects[0].Namespace, s.namespace = s.namespace, ""
	}
	if s.claim != "" {
		rc.FinishedAt, s.claim = s.claim, ""
	}
	receipt = s.put(evidence.MediaTypeReceipt, rc)
	s.index(evidence.IndexReceipts, cmd.Digest, receipt)
	return intent, receipt
}

func (s *synth) liveAudit(release, cluster string, receipt evidence.Descriptor, minute int, converged bool) evidence.Descriptor {
	x := s.blob(evidence.MediaTypeStdout, fmt.Sprint("x", s.n))
	v := evidence.LiveVerdict{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "cm", UID: "u", ResourceVersion: "8", ReceiptUID: "u", Verdict: evidence.VerdictConverged}
	if !converged {
		v.Verdict, v.Path, v.Manager, v.Live, v.Expected = evidence.VerdictFieldDiffers, "data.a", "intruder (Apply)", `"x"`, `"y"`
	}
	la := evidence.LiveAudit{Schema: evidence.SchemaLiveAudit, Command: s.command(evidence.CommandLiveAudit, cluster), Receipt: receipt,
		Target: x.Digest, Inputs: evidence.LiveAuditInputs{CommandFile: x, Kubeconfig: x, Kubectl: x}, Kubeconfig: x, Manifest: x, LockReport: x,
		Lock: lockOf(release), KubectlDigest: x.Digest, ClusterUID: cluster, FieldManager: evidence.FieldManager, Execs: []evidence.Descriptor{x, x, x},
		Verdicts: []evidence.LiveVerdict{v}, Converged: converged, NetworkAccess: true, StartedAt: s.at(minute), FinishedAt: s.at(minute)}
	d := s.put(evidence.MediaTypeLiveAudit, la)
	s.index(evidence.IndexLiveAudits, d.Digest, d)
	return d
}

func TestHistoryStory(t *testing.T) {
	s := newSynth(t)
	const a, b = "11111111-aaaa", "22222222-bbbb"
	s.preflight("3.4.1", a, 0)
	_, rc1 := s.apply("3.4.1", a, 1, true, false)
	s.liveAudit("3.4.1", a, rc1, 3, true)
	s.preflight("3.4.2", a, 10)
	in2, _ := s.apply("3.4.2", a, 11, false, false) // interrupted: intent, no receipt
	s.liveAudit("3.4.1", a, rc1, 20, false)
	s.preflight("3.4.1", b, 30)
	_, rcB := s.apply("3.4.1", b, 31, true, true)

	rep, err := history.History(s.st, history.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range rep.Entries {
		got = append(got, e.Time[11:16]+" "+e.Kind+" "+e.Release+" "+e.ClusterUID+" "+e.Verdict+" "+fmt.Sprint(e.Recovered))
	}
	want := []string{
		"03:36 receipt 3.4.1 22222222-bbbb  true",
		"03:34 preflight 3.4.1 22222222-bbbb  false",
		"03:24 live-audit 3.4.1 11111111-aaaa drift 1/1 false",
		"03:15 unfinished-apply 3.4.2 11111111-aaaa may be partial false",
		"03:14 preflight 3.4.2 11111111-aaaa  false",
		"03:07 live-audit 3.4.1 11111111-aaaa converged false",
		"03:06 receipt 3.4.1 11111111-aaaa  false",
		"03:04 preflight 3.4.1 11111111-aaaa  false",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("history:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if rep.Entries[3].Digest != in2.Digest || rep.Entries[0].Digest != rcB.Digest || rep.Entries[0].Context != "ctx-"+b {
		t.Fatalf("entries %+v", rep.Entries[:4])
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(text.String()), "\n")
	if len(lines) != 10 || lines[0] != "order: the records (this store has no deployment log)" || !strings.HasPrefix(lines[1], "TIME ") ||
		!strings.Contains(lines[2], "2026-01-02T03:36:05Z  receipt ") || rep.Order != history.OrderRecords || rep.Log != nil ||
		!strings.Contains(lines[2], history.Short(rcB.Digest)) || len(history.Short(rcB.Digest)) != len("sha256:")+12 {
		t.Fatalf("text:\n%s", text.String())
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil || !strings.Contains(js.String(), `"schema": "qinglong/ql3-history@v1"`) ||
		!strings.Contains(js.String(), `"order": "records"`) || strings.Contains(js.String(), `"logIndex"`) {
		t.Fatalf("json: %v\n%s", err, js.String())
	}

	only, err := history.History(s.st, history.Filter{Cluster: b})
	if err != nil || len(only.Entries) != 2 {
		t.Fatalf("cluster filter: %v %+v", err, only)
	}
	if _, err := history.History(s.st, history.Filter{Cluster: "a b"}); refuse.CodeOf(err) != history.CodeClusterFilter {
		t.Fatalf("bad cluster filter: %v", err)
	}
}

func TestDescribe(t *testing.T) {
	s := newSynth(t)
	const a = "11111111-aaaa"
	p1 := s.preflight("3.4.1", a, 0)
	_, rc1 := s.apply("3.4.1", a, 1, true, false)
	s.preflight("3.4.2", a, 10)
	_, rc2 := s.apply("3.4.2", a, 11, true, false)
	s.preflight("3.4.3", a, 20)
	_, rc3 := s.apply("3.4.3", a, 21, true, false)
	in4, _ := s.apply("3.4.3", a, 30, false, false)
	la := s.liveAudit("3.4.2", a, rc2, 40, false)

	d, err := history.Describe(s.st, rc2.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if d.Kind != history.KindReceipt || d.Release != "3.4.2" || d.CatalogCommit != "c0ffee3.4.2" || d.Context != "ctx-"+a ||
		d.Supersedes == nil || d.Supersedes.Receipt != rc1.Digest || d.SupersededBy == nil || d.SupersededBy.Receipt != rc3.Digest || len(d.Objects) != 1 {
		t.Fatalf("describe receipt: %+v", d)
	}
	var out bytes.Buffer
	d.WriteText(&out)
	for _, want := range []string{"kind:           receipt\n", "release:        3.4.2\n", "catalog commit: c0ffee3.4.2\n", "cluster:        " + a + "\n",
		"recovered:      false\n", "supersedes:     " + string(rc1.Digest) + " release 3.4.1", "superseded by:  " + string(rc3.Digest) + " release 3.4.3",
		"  ConfigMap ns/cm uid uid-3.4.2 resourceVersion 7\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("describe text lacks %q:\n%s", want, out.String())
		}
	}
	if d, err := history.Describe(s.st, rc1.Digest); err != nil || d.Supersedes != nil || d.SupersededBy.Receipt != rc3.Digest {
		t.Fatalf("first receipt: %+v %v", d, err)
	}
	if d, err := history.Describe(s.st, p1.Digest); err != nil || d.Kind != history.KindPreflight || d.Plan != nil {
		t.Fatalf("preflight: %+v %v", d, err)
	}
	if d, err := history.Describe(s.st, in4.Digest); err != nil || d.Kind != history.KindUnfinished || d.Release != "3.4.3" {
		t.Fatalf("unfinished: %+v %v", d, err)
	}
	if d, err := history.Describe(s.st, la.Digest); err != nil || d.Kind != history.KindLiveAudit || d.Converged || d.Receipt != rc2.Digest {
		t.Fatalf("live audit: %+v %v", d, err)
	}

	// Not root records: a blob, a command record, an unpublished receipt, an absent digest.
	blob := s.blob(evidence.MediaTypeStdout, "plain bytes")
	cmd := s.command(evidence.CommandApply, a)
	var rc evidence.Receipt
	raw, _ := s.st.Get(rc2.Digest)
	if err := evidence.DecodeRecord(evidence.MediaTypeReceipt, raw, &rc); err != nil {
		t.Fatal(err)
	}
	rc.FinishedAt = s.at(99)
	unpublished := s.put(evidence.MediaTypeReceipt, rc)
	for name, dg := range map[string]digest.Digest{"blob": blob.Digest, "command": cmd.Digest, "unpublished receipt": unpublished.Digest,
		"absent": digest.FromString("absent")} {
		if _, err := history.Describe(s.st, dg); refuse.CodeOf(err) != history.CodeNotRoot {
			t.Errorf("%s: code %q, want %s (%v)", name, refuse.CodeOf(err), history.CodeNotRoot, err)
		}
	}
}

// A store that is not private is refused before anything is read (store.Open's STORE_MODE).
func TestHistoryNotPrivate(t *testing.T) {
	s := newSynth(t)
	if err := os.Chmod(s.st.Root(), 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(s.st.Root(), 0o700)
	if _, err := store.Open(s.st.Root()); refuse.CodeOf(err) != store.CodeStoreMode {
		t.Fatalf("code %q, want %s", refuse.CodeOf(err), store.CodeStoreMode)
	}
}

// A tampered record the index names refuses the history instead of listing it.
func TestHistoryTamperedRecord(t *testing.T) {
	s := newSynth(t)
	s.preflight("3.4.1", "c", 0)
	_, rc := s.apply("3.4.1", "c", 1, true, false)
	p := filepath.Join(s.st.Root(), "blobs", "sha256", rc.Digest.Encoded())
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(p)
	if err := os.WriteFile(p, bytes.Replace(raw, []byte("3.4.1"), []byte("3.4.9"), 1), 0o400); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(p, 0o400)
	if _, err := history.History(s.st, history.Filter{}); refuse.CodeOf(err) != store.CodeObjectCorrupt {
		t.Fatalf("code %q, want %s (%v)", refuse.CodeOf(err), store.CodeObjectCorrupt, err)
	}
}

// BenchmarkHistory1000: a store of 1,000 receipts, each with its own apply command, preflight and
// intent (the goal is under 200 ms).
func BenchmarkHistory1000(b *testing.B) {
	s := newSynth(b)
	for i := 0; i < 1000; i++ {
		rel := fmt.Sprintf("3.4.%d", i)
		s.preflight(rel, "cluster", 2*i)
		s.apply(rel, "cluster", 2*i+1, true, false)
	}
	cpu0 := cpuTime()
	n := 0
	for b.Loop() {
		rep, err := history.History(s.st, history.Filter{})
		if err != nil || len(rep.Entries) != 2000 {
			b.Fatalf("%v %d", err, len(rep.Entries))
		}
		n++
	}
	// On a shared machine the wall time varies with others' load; the process's cpu time (user and
	// system, all threads) per listing varies far less, and is what an A/B comparison reads.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(n), "cpu-ms/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A published root record that hashes to its name but is not a record a listing can read is
// refused with HISTORY_RECORD_INVALID, never listed with blank fields: bad JSON, a member a line
// shows named twice, a member of the wrong type, trailing bytes.
func TestHistoryMalformedRecord(t *testing.T) {
	s := newSynth(t)
	s.preflight("3.4.1", "c", 0)
	_, rc := s.apply("3.4.1", "c", 1, true, false)
	raw, err := s.st.Get(rc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	good := string(raw)
	for name, bad := range map[string]string{
		"truncated":           good[:len(good)-1],
		"trailing bytes":      good + "x",
		"duplicate member":    strings.Replace(good, `"clusterUid":"c"`, `"clusterUid":"c","clusterUid":"d"`, 1),
		"clusterUid a number": strings.Replace(good, `"clusterUid":"c"`, `"clusterUid":7`, 1),
		"recovered a string":  strings.Replace(good, `"recovered":false`, `"recovered":"no"`, 1),
		"bad escape in skip":  strings.Replace(good, `"fieldManager":"`, `"fieldManager":"\x`, 1),
		"bad number in skip":  strings.Replace(good, `"size":`, `"size":01`, 1),
		"unclosed array":      strings.Replace(good, `"execs":[`, `"execs":[[`, 1),
		"not an object":       `["schema"]`,
	} {
		t.Run(name, func(t *testing.T) {
			s := newSynth(t)
			s.preflight("3.4.1", "c", 0)
			intent, _ := s.apply("3.4.1", "c", 1, false, false)
			var in evidence.Intent
			ib, _ := s.st.Get(intent.Digest)
			if err := evidence.DecodeRecord(evidence.MediaTypeIntent, ib, &in); err != nil {
				t.Fatal(err)
			}
			d := s.blob(evidence.MediaTypeReceipt, bad)
			if err := s.st.PutIndex(evidence.IndexReceipts, in.Command.Digest, d); err != nil {
				t.Fatal(err)
			}
			if _, err := history.History(s.st, history.Filter{}); refuse.CodeOf(err) != history.CodeRecordInvalid {
				t.Fatalf("code %q, want %s (%v)", refuse.CodeOf(err), history.CodeRecordInvalid, err)
			}
		})
	}
}

// A listing names the same bad record whichever goroutine read it first: the first in the order
// receipts, preflights, live audits, intents, each by key.
func TestHistoryFirstErrorStable(t *testing.T) {
	s := newSynth(t)
	for i := range 8 {
		rel := fmt.Sprintf("3.4.%d", i)
		s.preflight(rel, "c", 2*i)
		_, rc := s.apply(rel, "c", 2*i+1, true, false)
		p := filepath.Join(s.st.Root(), "blobs", "sha256", rc.Digest.Encoded())
		_ = os.Chmod(p, 0o600)
		raw, _ := os.ReadFile(p)
		if err := os.WriteFile(p, bytes.Replace(raw, []byte(rel), []byte("9.9.9"), 1), 0o400); err != nil {
			t.Fatal(err)
		}
		_ = os.Chmod(p, 0o400)
	}
	var first string
	for range 20 {
		_, err := history.History(s.st, history.Filter{})
		if refuse.CodeOf(err) != store.CodeObjectCorrupt {
			t.Fatalf("code %q, want %s (%v)", refuse.CodeOf(err), store.CodeObjectCorrupt, err)
		}
		if first == "" {
			first = err.Error()
		}
		if err.Error() != first {
			t.Fatalf("refusal changed between runs:\n%s\n%s", first, err)
		}
	}
}
