package ceremony_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/testbed/ceremonytest"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// The ceremony runs against the real kube-apiserver, etcd and kubectl of internal/testbed/testcluster.
var cluster *testcluster.Cluster

// childEnv names the command file a re-executed test binary runs; killEnv says where the child
// kills itself with SIGKILL: "after:<step>" once that kubectl step returned and was recorded, or
// "before:<step>" just before it starts (default "after:apply", a crash after the mutation).
const (
	childEnv = "QL3_CEREMONY_TEST_CHILD"
	killEnv  = "QL3_CEREMONY_TEST_KILL"
)

func TestMain(m *testing.M) {
	if cf := os.Getenv(sigintEnv); cf != "" {
		os.Exit(sigintChild(cf))
	}
	if cf := os.Getenv(childEnv); cf != "" {
		at := os.Getenv(killEnv)
		if at == "" {
			at = "after:" + evidence.StepApply
		}
		kill := func(when string) func(string) {
			return func(step string) {
				if when+":"+step == at {
					_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				}
			}
		}
		ceremony.SetAfterStep(kill("after"))
		ceremony.SetRunHook(kill("before"))
		if _, err := ceremony.Run(context.Background(), ceremony.Options{CommandFile: cf}, ""); err != nil {
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(testcluster.Main(m, &cluster))
}

// bed is one private working area: the release materialized into its own namespace, a copy of
// the kubeconfig, command files and a store. Every bed is checked when its test ends: the store
// verifies clean, every published receipt and preflight passes the offline audit, and no
// credential appears in the store or in anything the ceremony printed or returned.
type bed struct {
	*ceremonytest.Release
	t   testing.TB
	out bytes.Buffer // progress lines, refusal messages and hints
	// stores are further stores the bed's commands used (a benchmark uses one per apply); they
	// are checked like the bed's own.
	stores []string
	// storeBase, when set, is where freshApplyCommand makes its stores (else the bed's Dir).
	storeBase string
	// forged are live-audit reports a test rewrote on purpose; the check does not audit them.
	forged []digest.Digest
}

var namespaces atomic.Int64

// newBed materializes the synthetic 3.4.1 release into a fresh namespace (created unless
// createNamespace is false); edit, if not nil, changes the unlocked manifest first.
func newBed(t testing.TB, createNamespace bool, edit func(unlocked string) string) *bed {
	t.Helper()
	testcluster.Need(t) // a test that forgot to say it needs the cluster skips here, not panics
	mode := ceremonytest.NoNamespace
	if createNamespace {
		mode = ceremonytest.CreateNamespace
	}
	b := &bed{t: t, Release: ceremonytest.NewRelease(t, cluster, ceremonytest.ReleaseOptions{
		Namespace: fmt.Sprintf("ql3-ceremony-%d", namespaces.Add(1)), NamespaceMode: mode, Edit: edit})}
	t.Cleanup(b.check)
	return b
}

func (b *bed) note(err error) {
	if r, ok := refuse.As(err); ok {
		fmt.Fprintf(&b.out, "refused: %s: %s\nhint: %s\n", r.Code, r.Message(), r.Hint)
	} else if err != nil {
		fmt.Fprintf(&b.out, "error: %v\n", err)
	}
}

func (b *bed) preflight() (*ceremony.Result, error) {
	return b.preflightFile(b.WriteCommand("preflight.json", evidence.CommandPreflight, ""))
}

// preflightFile runs ceremony.Preflight on a command file as it is.
func (b *bed) preflightFile(file string) (*ceremony.Result, error) {
	res, err := ceremony.Preflight(context.Background(), ceremony.Options{CommandFile: file, Progress: &b.out})
	b.note(err)
	return res, err
}

func (b *bed) applyFile(pre string) string {
	return b.WriteCommand("apply.json", evidence.CommandApply, pre)
}

func (b *bed) apply(file string) (*ceremony.Result, error) {
	res, err := ceremony.Apply(context.Background(), ceremony.Options{CommandFile: file, Progress: &b.out})
	b.note(err)
	return res, err
}

// mustApply runs preflight then apply and returns both results.
func (b *bed) mustApply() (*ceremony.Result, *ceremony.Result, string) {
	b.t.Helper()
	pre, err := b.preflight()
	if err != nil {
		b.t.Fatalf("preflight: %v", err)
	}
	af := b.WriteCommand("apply.json", evidence.CommandApply, string(pre.Preflight))
	rc, err := b.apply(af)
	if err != nil {
		b.t.Fatalf("apply: %v", err)
	}
	return pre, rc, af
}

// wantRefused asserts the reason code and that nothing was published for it.
func (b *bed) wantRefused(err error, code refuse.Code, publishedPreflights int) {
	b.t.Helper()
	if got := refuse.CodeOf(err); got != code {
		b.t.Fatalf("code %q, want %q (%v)", got, code, err)
	}
	if n := b.Count(evidence.IndexPreflights); n != publishedPreflights {
		b.t.Fatalf("%d preflights published, want %d", n, publishedPreflights)
	}
	if n := b.Count(evidence.IndexReceipts); n != 0 {
		b.t.Fatalf("a refused run published %d receipts", n)
	}
}

// wantNoIntent asserts that no apply intent was written: the refusal came before any mutation.
func (b *bed) wantNoIntent() {
	b.t.Helper()
	if n := b.Count(evidence.IndexIntents); n != 0 {
		b.t.Fatalf("%d apply intents were written before the refusal", n)
	}
}

// repin rewrites the input of command field name (manifest, lockReport or kubeconfig) with data
// as a private file and pins its new digest, so that only the check under test can refuse it.
func (b *bed) repin(name string, data []byte) {
	ceremonytest.WritePrivate(b.t, b.Field(name, "path"), data)
	b.Set(name, "digest", string(evidence.FromBytes(data)))
}

// unreferencedExecs returns the stored exec records no index entry reaches: those of a run that
// was refused before it published anything.
func (b *bed) unreferencedExecs() []evidence.Exec {
	b.t.Helper()
	st, err := store.Open(b.Store)
	if err != nil {
		b.t.Fatal(err)
	}
	defer st.Close()
	rep, err := st.Verify()
	if err != nil || !rep.OK() {
		b.t.Fatalf("store verify: %v %+v", err, rep)
	}
	var out []evidence.Exec
	for _, d := range rep.Unreferenced {
		raw, err := st.Get(d)
		if err != nil {
			b.t.Fatal(err)
		}
		var e evidence.Exec
		if evidence.DecodeRecord(evidence.MediaTypeExec, raw, &e) == nil {
			out = append(out, e)
		}
	}
	return out
}

// blob returns a stored object's bytes.
func (b *bed) blob(d evidence.Descriptor) []byte {
	b.t.Helper()
	st, err := store.Open(b.Store)
	if err != nil {
		b.t.Fatal(err)
	}
	defer st.Close()
	raw, err := st.GetDescriptor(d)
	if err != nil {
		b.t.Fatal(err)
	}
	return raw
}

// privateKubectl copies the real kubectl (about 61 MB) into a fresh private 0700 directory, mode
// 0755, so that a test may change its mode, links or path without touching the shared tool cache.
func privateKubectl(t testing.TB) string {
	t.Helper()
	dir := ceremonytest.PrivateDir(t)
	src, err := os.Open(cluster.KubectlPath)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	p := filepath.Join(dir, "kubectl")
	dst, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// check runs when the test ends: store verify, the audit of every published root, and the
// credential scan.
func (b *bed) check() {
	t := b.t
	secrets := cluster.Secrets()
	scan := func(where string, data []byte) {
		for _, s := range secrets {
			if len(s) > 0 && bytes.Contains(data, s) {
				t.Errorf("a credential appears in %s", where)
				return
			}
		}
	}
	scan("the ceremony's output and errors", b.out.Bytes())
	for _, dir := range append([]string{b.Store}, b.stores...) {
		b.checkStore(dir, scan)
	}
}

// checkStore verifies one store, audits every root it publishes and scans it for credentials.
func (b *bed) checkStore(dir string, scan func(where string, data []byte)) {
	t := b.t
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			if data, rerr := os.ReadFile(p); rerr == nil {
				scan(p, data)
			}
		}
		return nil
	})
	st, err := store.Open(dir)
	if err != nil {
		t.Errorf("open store: %v", err)
		return
	}
	defer st.Close()
	rep, err := st.Verify()
	if err != nil || !rep.OK() {
		t.Errorf("store verify: %v %+v", err, rep)
		return
	}
	for _, e := range append(append(rep.Receipts, rep.Preflights...), rep.LiveAudits...) {
		if slices.Contains(b.forged, e.Descriptor.Digest) {
			continue
		}
		ar, err := audit.Audit(st, e.Descriptor.Digest)
		if err != nil || ar.Err() != nil {
			t.Errorf("audit of %s %s: %v %v", e.Kind, e.Descriptor.Digest, err, ar.Err())
		}
		js, _ := json.Marshal(ar)
		scan("the audit report", js)
	}
}
