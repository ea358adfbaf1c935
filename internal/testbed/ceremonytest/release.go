package ceremonytest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/materialize"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/store"
)

// NamespaceMode says what NewRelease does about the release's namespace on the cluster.
type NamespaceMode int

const (
	// CreateNamespace creates the namespace; it must not exist yet.
	CreateNamespace NamespaceMode = iota
	// EnsureNamespace creates the namespace unless it exists: several releases may share one.
	EnsureNamespace
	// NoNamespace leaves the cluster alone: the namespace is absent unless something else made it.
	NoNamespace
)

// ReleaseOptions shape a Release.
type ReleaseOptions struct {
	Namespace     string        // the namespace the release is moved into (it is written for qinglong)
	NamespaceMode NamespaceMode // whether to create Namespace
	// Store is the store root the command names, initialised unless it is a store already (beds
	// may share one); "" for a fresh store in the release's directory.
	Store string
	// Edit, if not nil, changes the unlocked manifest as written (for namespace qinglong) before
	// it is moved into Namespace and materialized.
	Edit func(unlocked string) string
	// Release is the directory under testdata of the synthetic release: "" for release-3.4.1,
	// or release-3.4.2.
	Release string
}

// Release is the synthetic release 3.4.1 materialized into its own namespace: its locked
// manifest, lock report and a copy of the cluster's kubeconfig as private files in a private
// directory, a store, and the preflight command that names them, the cluster's kubectl and its
// kube-system uid.
type Release struct {
	t         testing.TB
	Dir       string // private (0700, canonical path): the inputs and the command files
	Store     string // the store root
	Namespace string
	// Cmd is the command as JSON values; its members manifest, lockReport, kubeconfig and kubectl
	// are map[string]any (see Field and Set). WriteCommand writes it.
	Cmd map[string]any
}

// NewRelease materializes the release with internal/materialize into opts.Namespace on cluster
// c, and initialises its store.
func NewRelease(t testing.TB, c *testcluster.Cluster, opts ReleaseOptions) *Release {
	t.Helper()
	dir := PrivateDir(t)
	r := &Release{t: t, Dir: dir, Store: opts.Store, Namespace: opts.Namespace}
	if r.Store == "" {
		r.Store = filepath.Join(dir, "store")
	}
	if opts.Release == "" {
		opts.Release = "release-3.4.1"
	}
	release := filepath.Join(moduleRoot(t), "testdata", opts.Release)
	unlocked, err := os.ReadFile(filepath.Join(release, "unlocked.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	catalog, err := os.ReadFile(filepath.Join(release, "catalog.json"))
	if err != nil {
		t.Fatal(err)
	}
	u := string(unlocked)
	if opts.Edit != nil {
		u = opts.Edit(u)
	}
	u = strings.ReplaceAll(u, "namespace: qinglong\n", "namespace: "+r.Namespace+"\n")
	rel, err := materialize.Materialize(catalog, []byte(u))
	if err != nil {
		t.Fatalf("materialize: %v", err)
	}
	kc := c.KubeconfigBytes()
	man, rep, kcp := filepath.Join(dir, "locked.yaml"), filepath.Join(dir, "lock-report.json"), filepath.Join(dir, "kubeconfig")
	WritePrivate(t, man, rel.Manifest)
	WritePrivate(t, rep, rel.Report)
	WritePrivate(t, kcp, kc)
	if st, err := store.Init(r.Store); err != nil {
		t.Fatal(err)
	} else if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	switch opts.NamespaceMode {
	case CreateNamespace:
		if err := c.CreateNamespace(ctx, r.Namespace); err != nil {
			t.Fatal(err)
		}
	case EnsureNamespace:
		if _, _, err := c.Kubectl(ctx, nil, "get", "namespace", r.Namespace); err != nil {
			if err := c.CreateNamespace(ctx, r.Namespace); err != nil {
				t.Fatal(err)
			}
		}
	}
	r.Cmd = map[string]any{
		"schema":             evidence.SchemaCommand,
		"command":            evidence.CommandPreflight,
		"store":              r.Store,
		"manifest":           map[string]any{"path": man, "digest": string(evidence.FromBytes(rel.Manifest))},
		"lockReport":         map[string]any{"path": rep, "digest": string(evidence.FromBytes(rel.Report))},
		"kubeconfig":         map[string]any{"path": kcp, "digest": string(evidence.FromBytes(kc)), "context": c.Context},
		"kubectl":            map[string]any{"path": c.KubectlPath, "digest": string(c.KubectlDigest)},
		"expectedClusterUid": c.KubeSystemUID,
		"fieldManager":       evidence.FieldManager,
	}
	return r
}

// Field returns member key of the command's object member name (manifest, lockReport,
// kubeconfig or kubectl).
func (r *Release) Field(name, key string) string { return r.Cmd[name].(map[string]any)[key].(string) }

// Set sets member key of the command's object member name.
func (r *Release) Set(name, key, value string) { r.Cmd[name].(map[string]any)[key] = value }

// WriteCommand writes the command, named command and consuming preflight if not empty, as the
// private file Dir/file and returns its path.
func (r *Release) WriteCommand(file, command, preflight string) string {
	c := make(map[string]any, len(r.Cmd)+1)
	for k, v := range r.Cmd {
		c[k] = v
	}
	c["command"] = command
	if preflight != "" {
		c["preflight"] = preflight
	}
	raw, err := json.Marshal(c)
	if err != nil {
		r.t.Fatal(err)
	}
	p := filepath.Join(r.Dir, file)
	WritePrivate(r.t, p, raw)
	return p
}

// Count returns the number of index entries of kind (evidence.IndexReceipts, ...) in Store.
func (r *Release) Count(kind string) int {
	es, _ := os.ReadDir(filepath.Join(r.Store, "index", kind))
	return len(es)
}
