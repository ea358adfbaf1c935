package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/internal/input"
	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/ociartifact"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// Roles of the log's key files, in messages.
const (
	roleLogSigner   = "log signer key"
	roleLogVerifier = "log verifier key"
	maxLogKeyFile   = 4 << 10
)

// CodeLogKeyFile: a log key file could not be written (it exists, or its directory is unusable).
const CodeLogKeyFile refuse.Code = "LOG_KEY_FILE"

func newLogCmd(root *RootOptions) *cobra.Command {
	c := &cobra.Command{
		Use:   "log",
		Short: "The store's deployment log: init, keys, signed checkpoints, verify, proofs",
		Long: "Every publication of a store with a log (ql3 log init) appends one leaf to an RFC 6962 Merkle\n" +
			"log inside the store; signed checkpoints (C2SP tlog-checkpoint notes) fix its history, and\n" +
			"log verify tells whether a copy holds every leaf up to one (docs/log.md).",
		Example: "  ql3 log init --store /abs/evidence --origin example.com/ql3/prod\n" +
			"  ql3 log keygen --origin example.com/ql3/prod --key /abs/private/log.key --verifier /abs/keys/log.vkey\n" +
			"  ql3 log sign --store /abs/evidence --key /abs/private/log.key\n" +
			"  ql3 log verify --store /abs/copy --key /abs/keys/log.vkey --since /abs/audit/checkpoint",
		Args: cobra.NoArgs,
	}
	c.AddCommand(newLogInitCmd(root), newLogKeygenCmd(root), newLogSignCmd(root), newLogVerifyCmd(root), newLogProofCmd(root), newLogWitnessCmd(root))
	return c
}

// loadLogSigner reads the note signer key as a private stable input; its bytes are cleared and
// never appear in any output.
func loadLogSigner(path string) (note.Signer, error) {
	f, err := stablefile.Read(path, roleLogSigner, maxLogKeyFile)
	if err != nil {
		return nil, err
	}
	defer clear(f.Bytes)
	return deploylog.NewSigner(string(f.Bytes))
}

// loadLogVerifier reads a note verifier key (public) for the log's origin.
func loadLogVerifier(path string) (deploylog.KeyVerifier, error) {
	b, err := input.ReadFile(path, maxLogKeyFile)
	if err != nil {
		return deploylog.KeyVerifier{}, err
	}
	v, err := deploylog.NewVerifier(string(b))
	if err != nil {
		return deploylog.KeyVerifier{}, err
	}
	return deploylog.KeyVerifier{V: v}, nil
}

// checkpointVerifier is the verifier of --key or --policy (nil with neither).
func checkpointVerifier(keyPath, policyPath string) (deploylog.CheckpointVerifier, error) {
	switch {
	case policyPath != "":
		return loadPolicyFile(policyPath)
	case keyPath != "":
		return loadLogVerifier(keyPath)
	}
	return nil, nil
}

// logTrustFlags are --log-key VKEY and --policy FILE of the commands that read the log and
// judge its checkpoints (audit, history, describe): one of the two, as log verify's --key and
// --policy, turned into the same verifier (checkpointVerifier).
type logTrustFlags struct {
	key    string // the log's note verifier key
	policy string // a tlog-policy (log key and witnesses)
}

// register adds the two flags with their command's usage lines.
func (f *logTrustFlags) register(c *cobra.Command, keyUsage, policyUsage string) {
	pathVar(c.Flags(), &f.key, "log-key", keyUsage)
	pathVar(c.Flags(), &f.policy, "policy", policyUsage)
}

// given says whether either flag is set.
func (f *logTrustFlags) given() bool { return f.key != "" || f.policy != "" }

func (f *logTrustFlags) validate() error {
	if f.key != "" && f.policy != "" {
		return refuse.New(CodeFlagNotApplicable, "--log-key and --policy both name the log's key: give one")
	}
	return nil
}

// verifier loads the key or policy (nil with neither).
func (f *logTrustFlags) verifier() (deploylog.CheckpointVerifier, error) {
	return checkpointVerifier(f.key, f.policy)
}

// signLogAfter signs the checkpoint that includes what a command just published (--log-key):
// the progress line names the checkpoint, never the key.
func signLogAfter(st *store.Store, signer note.Signer, w io.Writer) error {
	_, cp, err := st.SignCheckpoint(signer)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "ql3: log: signed checkpoint %s size %d\n", cp.Origin, cp.Size)
	return nil
}

// checkLogKey refuses --log-key before a command publishes anything: the store must have a log
// whose origin is the key's name.
func checkLogKey(storeDir string, signer note.Signer) error {
	st, err := store.Open(storeDir)
	if err != nil {
		return err
	}
	defer st.Close()
	origin, err := st.LogOrigin()
	if err != nil {
		return err
	}
	if origin != signer.Name() {
		return refuse.New(deploylog.CodeOrigin, "the log key is named %q, the store's log origin is %q", signer.Name(), origin)
	}
	return nil
}

// logInitOptions: `ql3 log init --origin NAME`.
type logInitOptions struct {
	root   *RootOptions
	origin string
}

func newLogInitCmd(root *RootOptions) *cobra.Command {
	o := &logInitOptions{root: root}
	c := readsStore(&cobra.Command{
		Use:   "init --origin NAME",
		Short: "Start the store's deployment log, backfilling every publication already in the store",
		Long: "Backfilled leaves follow the index entries' commit times; they are attested only from the\n" +
			"first checkpoint signed after, not before (docs/log.md). Run again with the log's origin, it\n" +
			"backfills nothing and writes the record lookups the log lacks (a log made before them), so\n" +
			"that proofs of old records stop reading every leaf.",
		Example: "  ql3 log init --store /abs/evidence --origin example.com/ql3/prod",
		Args:    cobra.NoArgs, RunE: runE(o),
	})
	c.Flags().StringVar(&o.origin, "origin", "", "the log's origin (the checkpoints' first line and the key's name)")
	return c
}

func (o *logInitOptions) complete(*cobra.Command, []string) error { return nil }
func (o *logInitOptions) validate() error {
	if err := requireFlags([2]string{"--origin", o.origin}); err != nil {
		return err
	}
	return store.CheckOrigin(o.origin)
}
func (o *logInitOptions) run(_ context.Context, s streams) error {
	st, err := o.root.OpenStore()
	if err != nil {
		return err
	}
	defer st.Close()
	n, err := st.InitLog(o.origin)
	if err != nil {
		return err
	}
	return o.root.printResult(s.out, logInitResult{true, o.origin, n}, nil)
}

// logInitResult: the origin and the number of leaves backfilled.
type logInitResult struct {
	OK         bool   `json:"ok"`
	Origin     string `json:"origin"`
	Backfilled int64  `json:"backfilled"`
}

func (r logInitResult) writeText(w io.Writer) error {
	return lines(w, fmt.Sprintf("log %s: %d leaves backfilled", r.Origin, r.Backfilled))
}

// logKeygenOptions: `ql3 log keygen`.
type logKeygenOptions struct {
	root               *RootOptions
	origin, key, vfile string
}

func newLogKeygenCmd(root *RootOptions) *cobra.Command {
	o := &logKeygenOptions{root: root}
	c := &cobra.Command{
		Use:     "keygen --origin NAME --key FILE --verifier FILE",
		Short:   "Write a new Ed25519 note signer key (0600, never replaced) and its verifier key",
		Example: "  ql3 log keygen --origin example.com/ql3/prod --key /abs/private/log.key --verifier /abs/keys/log.vkey",
		Args:    cobra.NoArgs, RunE: runE(o),
	}
	c.Flags().StringVar(&o.origin, "origin", "", "the log's origin: the key's name")
	pathVar(c.Flags(), &o.key, "key", "the signer key to write (a private file: 0600 in a 0700 directory)")
	pathVar(c.Flags(), &o.vfile, "verifier", "the verifier key to write (public)")
	return c
}

func (o *logKeygenOptions) complete(*cobra.Command, []string) error { return nil }
func (o *logKeygenOptions) validate() error {
	if err := requireFlags([2]string{"--origin", o.origin}, [2]string{"--key", o.key}, [2]string{"--verifier", o.vfile}); err != nil {
		return err
	}
	return store.CheckOrigin(o.origin)
}
func (o *logKeygenOptions) run(_ context.Context, s streams) error {
	if err := stablefile.CheckCreatable(roleLogSigner, o.key); err != nil {
		return err
	}
	if _, err := os.Lstat(o.vfile); err == nil {
		return refuse.New(CodeLogKeyFile, "%s %s exists: never replaced", roleLogVerifier, o.vfile)
	}
	skey, vkey, err := deploylog.GenerateKey(o.origin)
	if err != nil {
		return err
	}
	// The verifier first: a signer key is never left without the verifier that checks it.
	if err := createPublic(o.vfile, []byte(vkey+"\n")); err != nil {
		return err
	}
	sb := []byte(skey + "\n")
	defer clear(sb)
	if err := stablefile.Create(roleLogSigner, o.key, sb); err != nil {
		return err
	}
	return o.root.printResult(s.out, logKeygenResult{true, o.origin, vkey}, nil)
}

// createPublic writes a new public file (0644), never replacing one, and syncs it.
func createPublic(path string, b []byte) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return refuse.Wrap(CodeLogKeyFile, err, "create %s %s", roleLogVerifier, path)
	}
	f := os.NewFile(uintptr(fd), path)
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return refuse.Wrap(CodeLogKeyFile, err, "write %s %s", roleLogVerifier, path)
	}
	return nil
}

// logKeygenResult: the verifier key (public); the signer key is never printed.
type logKeygenResult struct {
	OK       bool   `json:"ok"`
	Origin   string `json:"origin"`
	Verifier string `json:"verifier"`
}

func (r logKeygenResult) writeText(w io.Writer) error { return lines(w, r.Verifier) }

// logSignOptions: `ql3 log sign --key FILE`.
type logSignOptions struct {
	root *RootOptions
	key  string
}

func newLogSignCmd(root *RootOptions) *cobra.Command {
	o := &logSignOptions{root: root}
	c := readsStore(&cobra.Command{
		Use:     "sign --key FILE",
		Short:   "Sign the log's current tree and keep the checkpoint in the store",
		Example: "  ql3 log sign --store /abs/evidence --key /abs/private/log.key",
		Args:    cobra.NoArgs, RunE: runE(o),
	})
	pathVar(c.Flags(), &o.key, "key", "the note signer key (private stable input)")
	return c
}

func (o *logSignOptions) complete(*cobra.Command, []string) error { return nil }
func (o *logSignOptions) validate() error                         { return requireFlags([2]string{"--key", o.key}) }
func (o *logSignOptions) run(_ context.Context, s streams) error {
	signer, err := loadLogSigner(o.key)
	if err != nil {
		return err
	}
	st, err := o.root.OpenStore()
	if err != nil {
		return err
	}
	defer st.Close()
	msg, cp, err := st.SignCheckpoint(signer)
	if err != nil {
		return err
	}
	return o.root.printResult(s.out, logSignResult{OK: true, Origin: cp.Origin, Size: cp.Size,
		Root: base64.StdEncoding.EncodeToString(cp.Hash[:]), Checkpoint: string(msg)}, nil)
}

// logSignResult: the checkpoint signed; its text is the signed note itself.
type logSignResult struct {
	OK         bool   `json:"ok"`
	Origin     string `json:"origin"`
	Size       int64  `json:"size"`
	Root       string `json:"root"`
	Checkpoint string `json:"checkpoint"`
}

func (r logSignResult) writeText(w io.Writer) error {
	_, err := io.WriteString(w, r.Checkpoint)
	return err
}

// logVerifyOptions: `ql3 log verify`.
type logVerifyOptions struct {
	root               *RootOptions
	key, policy, since string
	layout             string // an OCI image layout (store export) instead of a store
}

func newLogVerifyCmd(root *RootOptions) *cobra.Command {
	o := &logVerifyOptions{root: root}
	c := readsStore(&cobra.Command{
		Use:   "verify [--layout DIR] [--key VKEY | --policy FILE] [--since CHECKPOINT]",
		Short: "Recompute the log from its leaves and check checkpoints, entries and records",
		Long: "Every finding is collected and printed (under -o json, the whole report, also on failure);\n" +
			"exit 1 on any error finding. Leaves after the last trusted checkpoint are the unsigned tail:\n" +
			"reported, not verified. --since: the log must extend that checkpoint (LOG_ROLLBACK, LOG_FORK).\n" +
			"--layout: an OCI image layout (ql3 store export), read in place without writing: the log is\n" +
			"the leaves its log referrers carry, the checkpoints their proofs', the publications what a\n" +
			"pull of its evidence manifests would write (OCI_LOG_MISSING without a log referrer).",
		Example: "  ql3 log verify --store /abs/evidence --key /abs/keys/log.vkey\n" +
			"  ql3 log verify --store /abs/copy --key /abs/keys/log.vkey --since /abs/audit/checkpoint -o json\n" +
			"  ql3 log verify --layout /abs/export --policy /abs/audit/policy --since /abs/audit/checkpoint",
		Args: cobra.NoArgs, RunE: runE(o),
	})
	pathVar(c.Flags(), &o.key, "key", "the log's note verifier key")
	pathVar(c.Flags(), &o.policy, "policy", "a C2SP tlog-policy file (log key, witnesses, quorum)")
	pathVar(c.Flags(), &o.since, "since", "a signed checkpoint the log must extend")
	pathVar(c.Flags(), &o.layout, "layout", "verify the log an OCI image layout (ql3 store export) carries, read-only, instead of a store's")
	return c
}

func (o *logVerifyOptions) complete(*cobra.Command, []string) error { return nil }
func (o *logVerifyOptions) validate() error {
	if o.key != "" && o.policy != "" {
		return refuse.New(CodeFlagNotApplicable, "--key and --policy both name the log's key: give one (the policy holds it)")
	}
	if o.layout != "" && o.root.Store != "" && !o.root.storeFromEnv {
		return refuse.New(CodeFlagNotApplicable, "--layout and --store name two copies of the log: give one")
	}
	return nil
}
func (o *logVerifyOptions) run(_ context.Context, s streams) error {
	v, err := checkpointVerifier(o.key, o.policy)
	if err != nil {
		return err
	}
	var since []byte
	if o.since != "" {
		if since, err = input.ReadFile(o.since, deploylog.MaxNoteSize); err != nil {
			return err
		}
	}
	var verify func(store.LogVerifyOptions) (*store.LogReport, error)
	if o.layout != "" {
		l, err := ociartifact.OpenLayout(o.layout)
		if err != nil {
			return err
		}
		defer l.Close()
		verify = l.VerifyLog
	} else {
		st, err := o.root.OpenStore()
		if err != nil {
			return err
		}
		defer st.Close()
		verify = st.VerifyLog
	}
	r, err := verify(store.LogVerifyOptions{Verifier: v, Since: since})
	if err != nil {
		return err
	}
	res := logVerifyResult{OK: r.OK(), Report: r}
	fail := r.Err()
	if fail != nil {
		f := failureOf(fail)
		res.Code, res.Message = f.Code, f.Message
	}
	return o.root.printResult(s.out, res, fail)
}

// logVerifyResult: the whole report, findings included, also on failure.
type logVerifyResult struct {
	OK      bool             `json:"ok"`
	Code    refuse.Code      `json:"code,omitempty"`
	Message string           `json:"message,omitempty"`
	Report  *store.LogReport `json:"report"`
}

func (res logVerifyResult) writeText(w io.Writer) error {
	r := res.Report
	fmt.Fprintf(w, "log %s: %d leaves, root %s\n", r.Origin, r.Size, r.Root)
	for _, c := range r.Checkpoints {
		state := "matches the leaves (signature not checked)"
		if r.SignaturesChecked {
			state = "matches the leaves, trusted"
		}
		fmt.Fprintf(w, "checkpoint %d: %s\n", c.Size, state)
	}
	if r.Since != nil {
		fmt.Fprintf(w, "since checkpoint %d\n", r.Since.Size)
	}
	if r.SignaturesChecked {
		fmt.Fprintf(w, "signed up to %d; unsigned tail %d\n", r.SignedSize, r.UnsignedTail)
	} else {
		fmt.Fprintf(w, "signatures not checked (no --key or --policy): unsigned tail %d\n", r.UnsignedTail)
	}
	for _, f := range r.Errors {
		fmt.Fprintf(w, "ERROR %s %s: %s\n", f.Code, f.Path, f.Msg)
	}
	for _, f := range r.Hints {
		fmt.Fprintf(w, "hint  %s %s: %s\n", f.Code, f.Path, f.Msg)
	}
	verdict := "verified"
	if !res.OK {
		verdict = "FAILED"
	}
	_, err := fmt.Fprintf(w, "log verify %s: %d errors, %d hints\n", verdict, len(r.Errors), len(r.Hints))
	return err
}

// logProofOptions: `ql3 log proof DIGEST`.
type logProofOptions struct {
	root        *RootOptions
	record      digest.Digest
	key, policy string
	out         string
}

func newLogProofCmd(root *RootOptions) *cobra.Command {
	o := &logProofOptions{root: root}
	c := readsStore(&cobra.Command{
		Use:     "proof DIGEST [--key VKEY] [--out FILE]",
		Short:   "Write a C2SP tlog-proof of the record's leaf in the latest trusted checkpoint",
		Example: "  ql3 log proof --store /abs/evidence --key /abs/keys/log.vkey sha256:5f0c... --out /abs/receipt.tlog-proof",
		Args:    cobra.ExactArgs(1), RunE: runE(o),
	})
	pathVar(c.Flags(), &o.key, "key", "the log's verifier key: prove against a checkpoint it verifies")
	pathVar(c.Flags(), &o.policy, "policy", "a C2SP tlog-policy: prove against a checkpoint it accepts")
	pathVar(c.Flags(), &o.out, "out", "write the proof to this new file (never replaced) instead of stdout")
	return c
}

func (o *logProofOptions) complete(_ *cobra.Command, a []string) error {
	var err error
	o.record, err = digestArg("DIGEST", a[0])
	return err
}
func (o *logProofOptions) validate() error {
	if o.key != "" && o.policy != "" {
		return refuse.New(CodeFlagNotApplicable, "--key and --policy both name the log's key: give one")
	}
	return nil
}
func (o *logProofOptions) run(_ context.Context, s streams) error {
	v, err := checkpointVerifier(o.key, o.policy)
	if err != nil {
		return err
	}
	st, err := o.root.OpenStore()
	if err != nil {
		return err
	}
	defer st.Close()
	p, err := st.LogProof(o.record, v)
	if err != nil {
		return err
	}
	b := p.Marshal()
	if o.out != "" {
		if err := createPublic(o.out, b); err != nil {
			return err
		}
	}
	return o.root.printResult(s.out, logProofResult{OK: true, Index: p.Index, Proof: string(b), toFile: o.out != ""}, nil)
}

// logProofResult: the proof file's text (printed verbatim unless written to --out).
type logProofResult struct {
	OK     bool   `json:"ok"`
	Index  int64  `json:"index"`
	Proof  string `json:"proof"`
	toFile bool
}

func (r logProofResult) writeText(w io.Writer) error {
	if r.toFile {
		return lines(w, fmt.Sprintf("leaf %d", r.Index))
	}
	_, err := io.WriteString(w, r.Proof)
	return err
}

// logKeyFlag is --log-key of the commands that publish (preflight, apply, run, live-audit,
// attest): after publishing they sign the checkpoint that includes it, before they exit.
type logKeyFlag struct {
	path   string
	signer note.Signer
}

func (f *logKeyFlag) register(c *cobra.Command) {
	pathVar(c.Flags(), &f.path, "log-key", "sign the store's log checkpoint after publishing, with this note signer key (private stable input)")
}

// prepare loads the key and checks it against the store's log before anything is published.
func (f *logKeyFlag) prepare(storeDir string) error {
	if f.path == "" {
		return nil
	}
	signer, err := loadLogSigner(f.path)
	if err != nil {
		return err
	}
	if err := checkLogKey(storeDir, signer); err != nil {
		return err
	}
	f.signer = signer
	return nil
}

// sign signs the checkpoint after a publication (a no-op without --log-key).
func (f *logKeyFlag) sign(storeDir string, w io.Writer) error {
	if f.signer == nil {
		return nil
	}
	st, err := store.Open(storeDir)
	if err != nil {
		return err
	}
	defer st.Close()
	return signLogAfter(st, f.signer, w)
}
