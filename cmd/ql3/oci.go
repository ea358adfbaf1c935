package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/cobra"

	"github.com/qinglong/ql3/ociartifact"
	"github.com/qinglong/ql3/ociartifact/transfer"
	"github.com/qinglong/ql3/store"
)

// registryFlags are the transfer options of push and pull. Credentials never come from flags:
// only the Docker configuration and its credential helpers (docs/oci.md).
type registryFlags struct {
	plainHTTP                    bool
	caFile                       string
	responseTimeout, idleTimeout time.Duration
	timeout                      time.Duration
}

func (f *registryFlags) add(c *cobra.Command) {
	c.Flags().BoolVar(&f.plainHTTP, "plain-http", false, "talk HTTP, not HTTPS; refused unless the registry is a loopback address")
	pathVar(c.Flags(), &f.caFile, "ca-file", "PEM bundle trusted in addition to the system roots")
	c.Flags().DurationVar(&f.responseTimeout, "response-timeout", transfer.DefaultResponseTimeout, "bound on each dial, TLS handshake and wait for response headers")
	c.Flags().DurationVar(&f.idleTimeout, "idle-timeout", transfer.DefaultIdleTimeout, "bound on each read of a response body that makes no progress")
	c.Flags().DurationVar(&f.timeout, "timeout", transfer.DefaultTimeout, "bound on the whole transfer")
}

func (f *registryFlags) options() transfer.Options {
	return transfer.Options{PlainHTTP: f.plainHTTP, CAFile: f.caFile,
		ResponseTimeout: f.responseTimeout, IdleTimeout: f.idleTimeout, Timeout: f.timeout}
}

// validate refuses a network bound that is not a positive duration.
func (f *registryFlags) validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--response-timeout", f.responseTimeout}, {"--idle-timeout", f.idleTimeout}, {"--timeout", f.timeout}} {
		if d.v <= 0 {
			return usage("%s must be a positive duration, not %s", d.name, d.v)
		}
	}
	return nil
}

// storePushOptions: `ql3 store push DIGEST REF`.
type storePushOptions struct {
	root     *RootOptions
	registry registryFlags
	subject  digest.Digest
	ref      string
}

func newStorePushCmd(root *RootOptions) *cobra.Command {
	o := &storePushOptions{root: root}
	c := readsStore(&cobra.Command{
		Use:   "push DIGEST REF",
		Short: "Push a root record's closure as one OCI artifact, its attestations as referrers",
		Long: "Uploads the closure of a receipt, preflight report or live-audit report as one OCI artifact\n" +
			"(artifactType application/vnd.qinglong.ql3.evidence.v1, one layer per object) and attaches its\n" +
			"attestation bundles as referrers. When the store has a log and a signed checkpoint covers the\n" +
			"root, it also attaches the log referrer (application/vnd.qinglong.ql3.log.v1): the root's\n" +
			"tlog-proof with the largest such checkpoint (cosignatures included) and the log's leaves up to\n" +
			"it; otherwise stderr says why none is attached. Registry credentials come from the Docker\n" +
			"configuration and its credential helpers only, never from a flag. TLS is verified. Prints the\n" +
			"manifest digest.",
		Example: "  ql3 store push --store /abs/evidence sha256:5f0c... registry.example.com/release/evidence:3.4.1",
		Args:    cobra.ExactArgs(2),
		RunE:    runE(o),
	})
	o.registry.add(c)
	return c
}

func (o *storePushOptions) complete(_ *cobra.Command, a []string) error {
	var err error
	o.subject, err = digestArg("DIGEST", a[0])
	o.ref = a[1]
	return err
}
func (o *storePushOptions) validate() error { return o.registry.validate() }
func (o *storePushOptions) run(ctx context.Context, s streams) error {
	st, err := o.root.OpenStore()
	if err != nil {
		return err
	}
	defer st.Close()
	att, err := ociartifact.StoreAttachments(st, o.subject)
	if err != nil {
		return err
	}
	c, err := ociartifact.Collect(st, o.subject, att)
	if err != nil {
		return err
	}
	lg, err := attachLog(st, c, s.err)
	if err != nil {
		return err
	}
	desc, err := transfer.PushCollected(ctx, c, o.ref, o.registry.options())
	if err != nil {
		return err
	}
	return o.root.printResult(s.out, pushResult{true, desc.Digest, o.ref, len(att), lg}, nil)
}

// pushResult: the artifact pushed.
type pushResult struct {
	OK           bool          `json:"ok"`
	Manifest     digest.Digest `json:"manifest"`
	Ref          string        `json:"ref"`
	Attestations int           `json:"attestations"`
	Log          logAttached   `json:"log"`
}

func (r pushResult) writeText(w io.Writer) error { return lines(w, string(r.Manifest)) }

// storePullOptions: `ql3 store pull REF`.
type storePullOptions struct {
	root     *RootOptions
	registry registryFlags
	log      pullLogFlags
	ref      string
}

func newStorePullCmd(root *RootOptions) *cobra.Command {
	o := &storePullOptions{root: root}
	c := readsStore(&cobra.Command{
		Use:   "pull REF",
		Short: "Pull an evidence artifact into a private store: every blob re-hashed, no-replace",
		Long: "Fetches the artifact, re-hashes the manifest and every layer, requires the layers to be\n" +
			"exactly the closure of the root the manifest names, then writes the objects no-replace into the\n" +
			"store (created when absent) and its index entries last, so a refused pull publishes nothing.\n" +
			"With --log-key (or --policy) it also requires the artifact's log referrer: the root's tlog-proof\n" +
			"in a checkpoint the key signed (the policy's quorum cosigned) and the log's leaves up to it, every\n" +
			"entry it publishes a leaf of that log, and the store's log empty, a prefix or an extension of it\n" +
			"(LOG_FORK otherwise), all before anything is written; it then installs the leaves and the\n" +
			"checkpoint into the store's log and writes the entries from their leaves. Prints the root\n" +
			"record's digest.",
		Example: "  ql3 store pull --store /abs/copy registry.example.com/release/evidence:3.4.1\n" +
			"  ql3 store pull --store /abs/copy --log-key /abs/keys/log.vkey registry.example.com/release/evidence:3.4.1\n" +
			"  ql3 audit --store /abs/copy --log-key /abs/keys/log.vkey sha256:5f0c...\n" +
			"  ql3 log verify --store /abs/copy --key /abs/keys/log.vkey --since /abs/audit/checkpoint",
		Args: cobra.ExactArgs(1),
		RunE: runE(o),
	})
	o.registry.add(c)
	o.log.add(c)
	return c
}

func (o *storePullOptions) complete(_ *cobra.Command, a []string) error { o.ref = a[0]; return nil }
func (o *storePullOptions) validate() error {
	if o.root.Store == "" {
		return missingFlags("--store (or QL3_STORE)")
	}
	if err := o.log.validate(); err != nil {
		return err
	}
	return o.registry.validate()
}
func (o *storePullOptions) run(ctx context.Context, s streams) error {
	lo, err := o.log.options()
	if err != nil {
		return err
	}
	// A pull that creates the store removes it when refused: a refused pull leaves nothing behind.
	_, statErr := os.Lstat(o.root.Store)
	created := errors.Is(statErr, fs.ErrNotExist)
	st, err := store.Init(o.root.Store)
	if err != nil {
		return err
	}
	r, desc, cp, err := transfer.PullWithLog(ctx, o.ref, st, o.registry.options(), lo)
	st.Close()
	if err != nil {
		if created {
			if rerr := os.RemoveAll(o.root.Store); rerr != nil {
				fmt.Fprintf(s.err, "ql3: warning: the store %s this pull created could not be removed: %v\n", o.root.Store, rerr)
			}
		}
		return err
	}
	res := pullResult{OK: true, Root: r.Descriptor.Digest, Kind: r.Kind, Manifest: desc.Digest}
	if cp != nil {
		res.Log = &pulledLog{Origin: cp.Origin, Size: cp.Size}
		fmt.Fprintf(s.err, "ql3: log: root included in checkpoint %s size %d; the log installed up to it\n", cp.Origin, cp.Size)
	}
	return o.root.printResult(s.out, res, nil)
}

// pullResult: the root record pulled into the store.
type pullResult struct {
	OK       bool          `json:"ok"`
	Root     digest.Digest `json:"root"`
	Kind     string        `json:"kind"`
	Manifest digest.Digest `json:"manifest"`
	Log      *pulledLog    `json:"log,omitempty"`
}

func (r pullResult) writeText(w io.Writer) error { return lines(w, string(r.Root)) }

// storeExportOptions: `ql3 store export DIGEST... DIR`.
type storeExportOptions struct {
	root     *RootOptions
	subjects []digest.Digest
	dir      string
}

func newStoreExportCmd(root *RootOptions) *cobra.Command {
	o := &storeExportOptions{root: root}
	return readsStore(&cobra.Command{
		Use:   "export DIGEST... DIR",
		Short: "Write root records' closures as an OCI image layout in a new directory",
		Long: "Writes oci-layout, index.json and blobs/sha256 for the artifact push would send of each root,\n" +
			"attestations and the log referrer included (index.json lists each evidence manifest, then its\n" +
			"referrer manifests), into DIR, which must not exist; audit --layout --log-key checks a root's\n" +
			"inclusion from its log referrer, and log verify --layout whether the layout holds every\n" +
			"publication of the log it carries (export every root of the store for a complete archive).\n" +
			"oras, crane and skopeo work with it offline; ql3 audit --layout, ql3 store verify --layout and\n" +
			"ql3 log verify --layout read it in place without writing.",
		Example: "  ql3 store export --store /abs/evidence sha256:5f0c... /abs/export\n  ql3 audit --layout /abs/export sha256:5f0c...\n" +
			"  ql3 store export --store /abs/evidence sha256:5f0c... sha256:8cd3... /abs/archive\n" +
			"  ql3 log verify --layout /abs/archive --key /abs/keys/log.vkey --since /abs/audit/checkpoint",
		Args: cobra.MinimumNArgs(2),
		RunE: runE(o),
	})
}

func (o *storeExportOptions) complete(_ *cobra.Command, a []string) error {
	for _, s := range a[:len(a)-1] {
		d, err := digestArg("DIGEST", s)
		if err != nil {
			return err
		}
		o.subjects = append(o.subjects, d)
	}
	var err error
	o.dir, err = absPath("DIR", a[len(a)-1])
	return err
}
func (o *storeExportOptions) validate() error { return nil }
func (o *storeExportOptions) run(_ context.Context, s streams) error {
	st, err := o.root.OpenStore()
	if err != nil {
		return err
	}
	defer st.Close()
	var cs []*ociartifact.Collected
	var arts []exportedArtifact
	for _, subject := range o.subjects {
		att, err := ociartifact.StoreAttachments(st, subject)
		if err != nil {
			return err
		}
		c, err := ociartifact.Collect(st, subject, att)
		if err != nil {
			return err
		}
		lg, err := attachLog(st, c, s.err)
		if err != nil {
			return err
		}
		cs = append(cs, c)
		arts = append(arts, exportedArtifact{Root: subject, Manifest: c.Desc.Digest, Tag: ociartifact.DefaultTag(c.Root), Log: lg})
	}
	if _, err := ociartifact.ExportAll(cs, o.dir, make([]string, len(cs))); err != nil {
		return err
	}
	res := exportResult{OK: true, Layout: o.dir, Manifest: arts[0].Manifest, Tag: arts[0].Tag, Log: arts[0].Log}
	if len(arts) > 1 {
		res.Artifacts = arts
	}
	return o.root.printResult(s.out, res, nil)
}

// exportResult: the OCI layout written. Manifest, Tag and Log are the first root's artifact's;
// with several roots, Artifacts lists each.
type exportResult struct {
	OK        bool               `json:"ok"`
	Layout    string             `json:"layout"`
	Artifacts []exportedArtifact `json:"artifacts,omitempty"`
	Manifest  digest.Digest      `json:"manifest"`
	Tag       string             `json:"tag"`
	Log       logAttached        `json:"log"`
}

// exportedArtifact is one root's artifact in the layout.
type exportedArtifact struct {
	Root     digest.Digest `json:"root"`
	Manifest digest.Digest `json:"manifest"`
	Tag      string        `json:"tag"`
	Log      logAttached   `json:"log"`
}

func (r exportResult) writeText(w io.Writer) error {
	out := []string{r.Layout}
	if r.Artifacts == nil {
		out = append(out, string(r.Manifest))
	}
	for _, a := range r.Artifacts {
		out = append(out, string(a.Manifest))
	}
	return lines(w, out...)
}
