package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/cobra"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/input"
	"github.com/qinglong/ql3/ociartifact"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// Codes raised by `ql3 store`.
const (
	CodeVerifyCorrupt refuse.Code = "STORE_CORRUPT"    // store verify found corruption
	CodeNotRecord     refuse.Code = "STORE_NOT_RECORD" // store show on an object that is not a record
)

// readInput reads the named file, or stdin for "-", through the one bounded reader: at most
// store.MaxObjectSize bytes, a larger input refused.
func readInput(name string) ([]byte, error) {
	if name == "-" {
		return input.ReadStdin(os.Stdin, store.MaxObjectSize)
	}
	return input.ReadFile(name, store.MaxObjectSize)
}

func newStoreCmd(root *RootOptions) *cobra.Command {
	c := &cobra.Command{
		Use:   "store",
		Short: "Create, read and verify the evidence store",
		Example: "  ql3 store init /abs/evidence\n  ql3 store verify --store /abs/evidence\n" +
			"  ql3 store cat --store /abs/evidence sha256:5f0c...",
		Args: cobra.NoArgs,
	}
	c.AddCommand(newStoreInitCmd(root), newStorePutCmd(root), newStoreCatCmd(root), newStoreShowCmd(root),
		newStoreLsCmd(root), newStoreVerifyCmd(root), newStorePushCmd(root), newStorePullCmd(root), newStoreExportCmd(root), newStoreGCCmd(root))
	return c
}

// storeInitOptions: `ql3 store init DIR`.
type storeInitOptions struct {
	root *RootOptions
	dir  string
}

func newStoreInitCmd(root *RootOptions) *cobra.Command {
	o := &storeInitOptions{root: root}
	return &cobra.Command{
		Use: "init DIR", Short: "Create a store (or open an existing valid one) at an absolute path",
		Example: "  ql3 store init /abs/evidence", Args: cobra.ExactArgs(1), RunE: runE(o),
	}
}

func (o *storeInitOptions) complete(_ *cobra.Command, a []string) error {
	var err error
	o.dir, err = absPath("DIR", a[0])
	return err
}
func (o *storeInitOptions) validate() error { return nil }
func (o *storeInitOptions) run(_ context.Context, s streams) error {
	st, err := store.Init(o.dir)
	if err != nil {
		return err
	}
	defer st.Close()
	return o.root.printResult(s.out, storeInitResult{true, st.Root()}, nil)
}

// storeInitResult: the store's path.
type storeInitResult struct {
	OK    bool   `json:"ok"`
	Store string `json:"store"`
}

func (r storeInitResult) writeText(w io.Writer) error { return lines(w, r.Store) }

// storePutOptions: `ql3 store put FILE|-`.
type storePutOptions struct {
	root      *RootOptions
	name      string
	mediaType string
}

func newStorePutCmd(root *RootOptions) *cobra.Command {
	o := &storePutOptions{root: root}
	c := readsStore(&cobra.Command{
		Use: "put FILE|-", Short: "Store a raw blob and print its digest",
		Example: "  ql3 store put --store /abs/evidence notes.txt\n  echo hi | ql3 store put --store /abs/evidence -",
		Args:    cobra.ExactArgs(1), RunE: runE(o),
	})
	c.Flags().StringVar(&o.mediaType, "media-type", evidence.MediaTypeOctets, "media type of the blob")
	return c
}

func (o *storePutOptions) complete(_ *cobra.Command, a []string) error {
	var err error
	o.name, err = absPath("FILE", a[0])
	return err
}
func (o *storePutOptions) validate() error { return nil }
func (o *storePutOptions) run(_ context.Context, s streams) error {
	st, err := o.root.OpenStore()
	if err != nil {
		return err
	}
	defer st.Close()
	b, err := readInput(o.name)
	if err != nil {
		return err
	}
	d, err := st.PutBlob(o.mediaType, b)
	if err != nil {
		return err
	}
	return o.root.printResult(s.out, storePutResult{true, d}, nil)
}

// storePutResult: the blob stored.
type storePutResult struct {
	OK         bool                `json:"ok"`
	Descriptor evidence.Descriptor `json:"descriptor"`
}

func (r storePutResult) writeText(w io.Writer) error { return lines(w, string(r.Descriptor.Digest)) }

// storeGetOptions: `ql3 store cat DIGEST` and `ql3 store show DIGEST`.
type storeGetOptions struct {
	root *RootOptions
	ref  digestRef
	d    digest.Digest
	show bool
}

func newStoreCatCmd(root *RootOptions) *cobra.Command {
	o := &storeGetOptions{root: root}
	return readsStore(&cobra.Command{
		Use: "cat DIGEST", Short: "Print an object's bytes after re-hashing them",
		Example: "  ql3 store cat --store /abs/evidence sha256:5f0c...", Args: cobra.ExactArgs(1), RunE: runE(o),
	})
}

func newStoreShowCmd(root *RootOptions) *cobra.Command {
	o := &storeGetOptions{root: root, show: true}
	return readsStore(&cobra.Command{
		Use: "show DIGEST", Short: "Pretty-print a record after re-hashing it",
		Example: "  ql3 store show --store /abs/evidence sha256:5f0c...", Args: cobra.ExactArgs(1), RunE: runE(o),
	})
}

func (o *storeGetOptions) complete(_ *cobra.Command, a []string) error {
	var err error
	o.ref, err = digestRefArg("DIGEST", a[0])
	return err
}

func (o *storeGetOptions) validate() error { return nil }

func (o *storeGetOptions) run(_ context.Context, s streams) error {
	st, err := o.root.OpenStore()
	if err != nil {
		return err
	}
	defer st.Close()
	if o.d, err = o.ref.resolve(st); err != nil {
		return err
	}
	b, err := st.Get(o.d)
	if err != nil {
		return err
	}
	if !o.show {
		// The object's bytes are the answer in both modes: cat is how a script reads a blob.
		_, err = s.out.Write(b)
		return err
	}
	if c, err := evidence.Canonicalize(b); err != nil || string(c) != string(b) {
		return refuse.New(CodeNotRecord, "object %s is not a canonical json record", o.d).WithHint("print its bytes with ql3 store cat")
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return refuse.Wrap(CodeNotRecord, err, "object %s", o.d)
	}
	return o.root.printResult(s.out, storeShowResult{true, v}, nil)
}

// storeShowResult: a record; its text is the record indented.
type storeShowResult struct {
	OK     bool `json:"ok"`
	Record any  `json:"record"`
}

func (r storeShowResult) writeText(w io.Writer) error {
	pretty, err := json.MarshalIndent(r.Record, "", "  ")
	if err != nil {
		return fmt.Errorf("indent record: %w", err)
	}
	return lines(w, string(pretty))
}

// storeLsOptions: `ql3 store ls`.
type storeLsOptions struct{ root *RootOptions }

func newStoreLsCmd(root *RootOptions) *cobra.Command {
	o := &storeLsOptions{root: root}
	return readsStore(&cobra.Command{
		Use: "ls", Short: "List the index: preflights, apply intents and receipts",
		Example: "  ql3 store ls --store /abs/evidence", Args: cobra.NoArgs, RunE: runE(o),
	})
}

func (o *storeLsOptions) complete(*cobra.Command, []string) error { return nil }
func (o *storeLsOptions) validate() error                         { return nil }
func (o *storeLsOptions) run(_ context.Context, s streams) error {
	st, err := o.root.OpenStore()
	if err != nil {
		return err
	}
	defer st.Close()
	all := []store.IndexEntry{}
	for _, k := range []string{evidence.IndexPreflights, evidence.IndexIntents, evidence.IndexReceipts} {
		es, err := st.ListIndex(k)
		if err != nil {
			return err
		}
		all = append(all, es...)
	}
	return o.root.printResult(s.out, storeLsResult{true, all}, nil)
}

// storeLsResult: the index entries, one `kind<TAB>key<TAB>digest` line each.
type storeLsResult struct {
	OK      bool               `json:"ok"`
	Entries []store.IndexEntry `json:"entries"`
}

func (r storeLsResult) writeText(w io.Writer) error {
	ls := make([]string, 0, len(r.Entries))
	for _, e := range r.Entries {
		ls = append(ls, fmt.Sprintf("%s\t%s\t%s", e.Kind, e.Key, e.Descriptor.Digest))
	}
	return lines(w, ls...)
}

// storeVerifyOptions: `ql3 store verify`.
type storeVerifyOptions struct {
	root   *RootOptions
	layout string
}

func newStoreVerifyCmd(root *RootOptions) *cobra.Command {
	o := &storeVerifyOptions{root: root}
	c := readsStore(&cobra.Command{
		Use:   "verify",
		Short: "Re-hash and check the whole store; list its roots, unfinished applies and findings",
		Long: "Re-hash every object, check every file's mode, owner and link count and every index entry,\n" +
			"and list the published roots and the unfinished applies. Exit 1 when anything is corrupt.\n" +
			"Under -o json the whole report is printed, findings included, also on corruption.",
		Example: "  ql3 store verify --store /abs/evidence\n  ql3 store verify --store /abs/copy -o json\n  ql3 store verify --layout /abs/export",
		Args:    cobra.NoArgs, RunE: runE(o),
	})
	pathVar(c.Flags(), &o.layout, "layout", "verify an OCI image layout read-only instead of a store")
	return c
}

func (o *storeVerifyOptions) complete(*cobra.Command, []string) error { return nil }
func (o *storeVerifyOptions) validate() error {
	if o.layout != "" && o.root.Store != "" && !o.root.storeFromEnv {
		return refuse.New(CodeFlagNotApplicable, "--layout and --store name two stores: give one")
	}
	return nil
}

func (o *storeVerifyOptions) run(_ context.Context, s streams) error {
	var verify func() (*store.Report, error)
	if o.layout != "" {
		l, err := ociartifact.OpenLayout(o.layout)
		if err != nil {
			return err
		}
		defer l.Close()
		verify = l.Verify
	} else {
		st, err := o.root.OpenStore()
		if err != nil {
			return err
		}
		defer st.Close()
		verify = st.Verify
	}
	r, err := verify()
	if err != nil {
		return err
	}
	res := storeVerifyResult{OK: r.OK(), Report: r}
	var fail error
	if !r.OK() {
		e := refuse.New(CodeVerifyCorrupt, "store has %d corruption findings", len(r.Corruption)).
			WithHint("restore the store from an intact copy; the findings name every corrupt file")
		res.Code, res.Message, fail = e.Code, e.Message(), e
	}
	return o.root.printResult(s.out, res, fail)
}

// storeVerifyResult: the whole verify report, findings included, also on corruption.
type storeVerifyResult struct {
	OK      bool          `json:"ok"`
	Code    refuse.Code   `json:"code,omitempty"`
	Message string        `json:"message,omitempty"`
	Report  *store.Report `json:"report"`
}

// writeText prints the verify report for people: totals, the published roots, the unfinished
// applies, then every finding.
func (res storeVerifyResult) writeText(w io.Writer) error {
	r := res.Report
	fmt.Fprintf(w, "objects %d (%d bytes), receipts %d, preflights %d, intents %d, unfinished %d, unreferenced %d\n",
		r.Objects, r.Bytes, len(r.Receipts), len(r.Preflights), len(r.Intents), len(r.Unfinished), len(r.Unreferenced))
	for _, e := range r.Receipts {
		fmt.Fprintf(w, "receipt %s (apply command %s)\n", e.Descriptor.Digest, e.Key)
	}
	for _, e := range r.Preflights {
		fmt.Fprintf(w, "preflight %s\n", e.Descriptor.Digest)
	}
	for _, e := range r.Unfinished {
		fmt.Fprintf(w, "unfinished: intent %s of apply command %s has no receipt; rerun that apply command to recover\n", e.Descriptor.Digest, e.Key)
	}
	for _, f := range r.Corruption {
		fmt.Fprintf(w, "corrupt: %s: %s: %s\n", f.Code, f.Path, f.Msg)
	}
	for _, f := range r.Hints {
		fmt.Fprintf(w, "hint: %s: %s\n", f.Code, f.Path)
	}
	return nil
}
