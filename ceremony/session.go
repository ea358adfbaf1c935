package ceremony

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/command"
	"github.com/qinglong/ql3/evidence/lock"
	"github.com/qinglong/ql3/internal/kubeconfig"
	"github.com/qinglong/ql3/internal/kubectl"
	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
	"github.com/qinglong/ql3/verdict/convergence"
	"github.com/qinglong/ql3/verdict/kubeout"
)

// Reason codes of the shared ceremony steps.
const (
	// CodeDigestMismatch: an input's SHA-256 differs from the digest the command pins.
	CodeDigestMismatch refuse.Code = "DIGEST_MISMATCH"
	// CodeClusterUID: the kube-system Namespace UID differs from expectedClusterUid.
	CodeClusterUID refuse.Code = "CLUSTER_UID_MISMATCH"
	// CodeStoreWrite: evidence could not be written to the store.
	CodeStoreWrite refuse.Code = "STORE_WRITE_FAILED"
)

// Byte ceilings of the inputs.
const (
	MaxManifest   = 8 << 20
	MaxLockReport = 1 << 20
	MaxKubeconfig = 1 << 20
)

// DefaultStepTimeout bounds one kubectl run.
const DefaultStepTimeout = 2 * time.Minute

// MaxKubectlOutput is the ceiling of each of a kubectl run's stdout and stderr (docs/rationale.md#6-kubectl-invocations).
const MaxKubectlOutput = 4 << 20

// afterStep is a test hook called after each kubectl step returned and was recorded.
var afterStep = func(step string) {}

// runHook is a test hook called before each kubectl run; tests count runs with it.
var runHook = func(step string) {}

// Options configure a ceremony run.
type Options struct {
	CommandFile       string        // absolute path of the command file
	WriteApplyCommand string        // preflight only: where to write the apply command file
	RepairDir         string        // live audit: where the repair directory goes; the command file's directory when empty
	AllowSuperseded   bool          // live audit: compare the cluster with a receipt a later one superseded
	StepTimeout       time.Duration // per kubectl run; DefaultStepTimeout when zero
	Progress          io.Writer     // progress lines; nil for none
	Now               func() time.Time
}

// Result is what a ceremony run printed: the digests an operator or a script needs next.
type Result struct {
	OK            bool          `json:"ok"`
	Command       string        `json:"command"`
	CommandDigest digest.Digest `json:"commandDigest"`
	Target        digest.Digest `json:"target"`
	Store         string        `json:"store"`
	Preflight     digest.Digest `json:"preflight,omitempty"`
	Intent        digest.Digest `json:"intent,omitempty"`
	Receipt       digest.Digest `json:"receipt,omitempty"`
	Recovered     bool          `json:"recovered,omitempty"`
	Offline       bool          `json:"offline,omitempty"` // an existing receipt was returned without any kubectl run
	ApplyCommand  string        `json:"applyCommand,omitempty"`
	Plan          digest.Digest `json:"plan,omitempty"` // preflight: the plan against the cluster's latest receipt
	// Versions is what a preflight's version read showed (the report's versions member).
	Versions *evidence.Versions `json:"versions,omitempty"`
	// An offline answer says what it returned: the receipt's release and time, and the later
	// receipt of the same cluster that supersedes it, if any (Rerun).
	Release      string     `json:"release,omitempty"`
	FinishedAt   string     `json:"finishedAt,omitempty"`
	SupersededBy *Supersede `json:"supersededBy,omitempty"`
}

// session holds the verified inputs and the evidence of one run.
type session struct {
	opts       Options
	pc         *command.Parsed
	cmdFile    *stablefile.File
	st         *store.Store
	manifest   *stablefile.File
	report     *stablefile.File
	kubeconfig *stablefile.File
	exe        *stablefile.Executable
	lock       *lock.Result
	summary    *evidence.KubeconfigSummary
	runner     *kubectl.Runner
	inputs     evidence.Inputs
	cmdDesc    evidence.Descriptor
	kcDesc     evidence.Descriptor
	manDesc    evidence.Descriptor
	repDesc    evidence.Descriptor
	execs      []evidence.Descriptor
	clusterUID string
	versions   *evidence.Versions // the preflight's version read, judged
	lastStderr digest.Digest      // the stored stderr of the last kubectl run, for a refusal to point at
	started    time.Time
	endHash    chan error // the end-of-run full kubectl hash, once started
	// batch, when set, receives the run's evidence (inputs, kubectl output, exec records), made
	// durable together before each root record is published (see startBatch).
	batch *store.Batch
}

// startBatch makes the run's evidence durable in batches, the way git's core.fsyncMethod=batch
// writes objects: each object is staged unsynced as it comes, and publish syncs them all at
// once (their fsyncs concurrent: one journal commit instead of one per object), renames them
// into place and syncs blobs/sha256 once, before the index entry that publishes the root
// record naming them. A run's objects are not in the store until then: a run killed before it
// leaves staging files (store verify's hints) and nothing that a root could name. The returned
// function, deferred by the run, syncs what a refused or interrupted run stored, so that its
// exec records and kubectl output stay in the store as the refusal's evidence.
func (s *session) startBatch() func(err *error) {
	s.batch = s.st.NewBatch()
	return func(err *error) {
		if serr := s.batch.Sync(); serr != nil && *err == nil {
			*err = storeErr(serr, "evidence")
		}
	}
}

// publish makes the run's evidence so far durable (the root record d last), then publishes d
// under key in index kind: no index entry is ever durable before what its record names.
func (s *session) publish(kind string, key digest.Digest, d evidence.Descriptor, what string) error {
	if s.batch != nil {
		if err := s.batch.Sync(); err != nil {
			return storeErr(err, what+" evidence")
		}
	}
	if err := s.st.PutIndex(kind, key, d); err != nil {
		return storeErr(err, what+" index")
	}
	return nil
}

func (s *session) putBlob(mt string, b []byte) (evidence.Descriptor, error) {
	if s.batch != nil {
		return s.batch.PutBlob(mt, b)
	}
	return s.st.PutBlob(mt, b)
}

func (s *session) putRecord(mt string, v any) (evidence.Descriptor, error) {
	var d evidence.Descriptor
	var err error
	if s.batch != nil {
		d, _, err = s.batch.PutRecord(mt, v)
	} else {
		d, _, err = s.st.PutRecord(mt, v)
	}
	return d, err
}

func (o *Options) complete() {
	if o.StepTimeout == 0 {
		o.StepTimeout = DefaultStepTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// loadCommand reads the command file as a stable private input and parses it.
func loadCommand(opts Options, want string) (*command.Parsed, *stablefile.File, error) {
	f, err := stablefile.Read(opts.CommandFile, evidence.RoleCommandFile, command.MaxFile)
	if err != nil {
		return nil, nil, err
	}
	pc, err := command.Parse(f.Bytes)
	if err != nil {
		return nil, nil, err
	}
	if want != "" {
		if err := pc.Expect(want); err != nil {
			return nil, nil, err
		}
	}
	return pc, f, nil
}

func readPinned(path, role string, ceiling int64, pinned digest.Digest) (*stablefile.File, error) {
	f, err := stablefile.Read(path, role, ceiling)
	if err != nil {
		return nil, err
	}
	if f.Digest != pinned {
		e := refuse.New(CodeDigestMismatch, "%s %s has digest %s, the command pins %s", role, path, f.Digest, pinned)
		if role == evidence.RoleKubeconfig {
			// A kubeconfig changes under a command file when its token or certificate is renewed:
			// the way on is a new review of the cluster and a new command file, not an edit.
			e.WithHint("%s", "the kubeconfig changed since the command file pinned it (a renewed token or certificate?): "+
				"review the cluster with ql3 cluster identity --kubeconfig "+path+" --context CONTEXT --kubectl KUBECTL, "+
				"then write a new command file with ql3 command new")
		}
		return nil, e
	}
	return f, nil
}

// readInputs reads and verifies every input, runs the offline checks and stores the inputs' evidence.
func (s *session) readInputs() error {
	c := &s.pc.Command
	// kubectl's start-of-run hash (about 50 ms) runs on the other core while the files are read
	// and checked; it must be done before anything else uses kubectl, and is joined below.
	type opened struct {
		exe *stablefile.Executable
		err error
	}
	exeCh := make(chan opened, 1)
	go func() {
		exe, err := stablefile.OpenExecutable(c.Kubectl.Path, c.Kubectl.Digest)
		exeCh <- opened{exe, err}
	}()
	err := s.readFiles()
	if err == nil {
		// The files' evidence is stored while the hash runs; of a run refused after this point it
		// stays unreferenced, and nothing is published.
		err = s.storeInputs()
	}
	o := <-exeCh
	s.exe = o.exe
	if err != nil {
		return err
	}
	if o.err != nil {
		return o.err
	}
	s.runner = &kubectl.Runner{Exe: s.exe, Kubeconfig: s.kubeconfig.Bytes, Context: c.Kubeconfig.Context,
		Timeout: s.opts.StepTimeout, MaxOutput: MaxKubectlOutput}
	if s.inputs.Kubectl, err = s.putRecord(evidence.MediaTypeInput, s.exe.Input()); err != nil {
		return storeErr(err, "kubectl input")
	}
	return nil
}

// readFiles reads the private inputs and runs the offline checks on them.
func (s *session) readFiles() error {
	c := &s.pc.Command
	var err error
	if s.manifest, err = readPinned(c.Manifest.Path, evidence.RoleManifest, MaxManifest, c.Manifest.Digest); err != nil {
		return err
	}
	if s.report, err = readPinned(c.LockReport.Path, evidence.RoleLockReport, MaxLockReport, c.LockReport.Digest); err != nil {
		return err
	}
	if s.kubeconfig, err = readPinned(c.Kubeconfig.Path, evidence.RoleKubeconfig, MaxKubeconfig, c.Kubeconfig.Digest); err != nil {
		return err
	}
	if s.lock, err = lock.Verify(s.manifest.Bytes, s.report.Bytes); err != nil {
		return err
	}
	// A manifest the convergence read could never prove is refused before anything is mutated.
	if err = convergence.CheckManifest(s.lock.Objects); err != nil {
		return err
	}
	s.summary, err = kubeconfig.Check(s.kubeconfig.Bytes, c.Kubeconfig.Context)
	return err
}

func (s *session) storeInputs() error {
	var err error
	put := func(mt string, v any) evidence.Descriptor {
		if err != nil {
			return evidence.Descriptor{}
		}
		var d evidence.Descriptor
		d, err = s.putRecord(mt, v)
		return d
	}
	blob := func(mt string, b []byte) evidence.Descriptor {
		if err != nil {
			return evidence.Descriptor{}
		}
		var d evidence.Descriptor
		d, err = s.putBlob(mt, b)
		return d
	}
	s.cmdDesc = put(evidence.MediaTypeCommand, &s.pc.Command)
	if err == nil && s.cmdDesc.Digest != s.pc.Digest {
		return refuse.New(CodeStoreWrite, "command record digest %s differs from the command identity %s", s.cmdDesc.Digest, s.pc.Digest)
	}
	cmdRaw := blob(evidence.MediaTypeCommandFile, s.cmdFile.Bytes)
	s.manDesc = blob(evidence.MediaTypeManifest, s.manifest.Bytes)
	s.repDesc = blob(evidence.MediaTypeLockReport, s.report.Bytes)
	s.kcDesc = put(evidence.MediaTypeKubeconfig, s.summary)
	s.inputs.CommandFile = put(evidence.MediaTypeInput, s.cmdFile.Input(&cmdRaw))
	s.inputs.Manifest = put(evidence.MediaTypeInput, s.manifest.Input(&s.manDesc))
	s.inputs.LockReport = put(evidence.MediaTypeInput, s.report.Input(&s.repDesc))
	s.inputs.Kubeconfig = put(evidence.MediaTypeInput, s.kubeconfig.Input(nil))
	if err != nil {
		return storeErr(err, "inputs")
	}
	return nil
}

func storeErr(err error, what string) error {
	if refuse.CodeOf(err) != "" {
		return err
	}
	return refuse.Wrap(CodeStoreWrite, err, "store %s", what)
}

// reverify re-checks every input file in full and kubectl by its held descriptor's identity (the full
// kubectl hashes are the start one in OpenExecutable and the end one of startEndHash).
func (s *session) reverify() error {
	for _, f := range []*stablefile.File{s.cmdFile, s.manifest, s.report, s.kubeconfig} {
		if f == nil {
			continue // a live audit reads no manifest or lock report from disk
		}
		if err := f.Reverify(); err != nil {
			return err
		}
	}
	return s.exe.ReverifyIdentity()
}

// startEndHash begins the end-of-run full re-hash of kubectl (about 50 ms for 61 MB) on the other
// core, just before the last kubectl step starts, instead of after it. The hash reads the held
// descriptor, so it covers exactly the bytes that run; a write to them after the hash read them
// changes ctime, which the identity check of reverifyEnd, after the last step, refuses.
func (s *session) startEndHash() {
	if s.endHash != nil {
		return
	}
	s.endHash = make(chan error, 1)
	go func() { s.endHash <- s.exe.ReverifyFull() }()
}

// reverifyEnd is the end-of-run re-verification: the end hash's verdict, then every input again
// and kubectl's identity, after the last kubectl step returned.
func (s *session) reverifyEnd() error {
	s.startEndHash()
	err := <-s.endHash
	s.endHash = nil
	if err != nil {
		return err
	}
	return s.reverify()
}

// run re-verifies the inputs, runs one kubectl step, records it (even when it failed) and
// returns its result. A non-zero exit is the caller's to judge.
func (s *session) run(ctx context.Context, step string, stdin []byte, names ...string) (*kubectl.Result, error) {
	if err := s.reverify(); err != nil {
		return nil, err
	}
	runHook(step)
	res, err := s.runner.Run(ctx, step, stdin, names...)
	if res != nil {
		if rerr := s.record(res, stdin != nil); rerr != nil {
			return nil, rerr
		}
	}
	if err != nil {
		// ql3 killed kubectl at the step timeout: the cause is the API server's silence, as when
		// kubectl gives up by itself (docs/kubectl.md, "Why kubectl failed").
		if refuse.CodeOf(err) == kubectl.CodeTimeout && res != nil {
			return nil, kubeout.StepTimeout(step, s.opts.StepTimeout, s.lastStderr)
		}
		// Every error of Run carries the runner's own code (KUBECTL_OUTPUT_LIMIT,
		// KUBECTL_EXEC_FAILED, …; internal/kubectl's tests assert it of every refusal).
		return nil, err
	}
	afterStep(step)
	return res, nil
}

func (s *session) record(res *kubectl.Result, withStdin bool) error {
	out, err := s.putBlob(evidence.MediaTypeStdout, res.Stdout)
	if err != nil {
		return storeErr(err, "stdout")
	}
	errb, err := s.putBlob(evidence.MediaTypeStderr, res.Stderr)
	if err != nil {
		return storeErr(err, "stderr")
	}
	s.lastStderr = errb.Digest
	e := evidence.Exec{
		Schema: evidence.SchemaExec, Step: res.Step, Argv: res.Argv, Env: res.Env,
		KubectlDigest: s.pc.Command.Kubectl.Digest, Stdout: out, Stderr: errb,
		StdoutBytes: int64(len(res.Stdout)), StderrBytes: int64(len(res.Stderr)),
		ExitCode: int64(res.ExitCode), StartedAt: stamp(res.StartedAt), FinishedAt: stamp(res.FinishedAt),
		DurationMs: res.FinishedAt.Sub(res.StartedAt).Milliseconds(),
	}
	if withStdin {
		d := s.manDesc
		e.Stdin = &d
	}
	d, err := s.putRecord(evidence.MediaTypeExec, e)
	if err != nil {
		return storeErr(err, "exec record")
	}
	s.execs = append(s.execs, d)
	return nil
}

// identity reads the kube-system Namespace and requires its UID to be the expected one.
func (s *session) identity(ctx context.Context, step string) error {
	res, err := s.run(ctx, step, nil)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		if c := kubeout.Classify(res.Stderr); c.Code != "" {
			return c.Refusal(step, res.ExitCode, s.lastStderr)
		}
		return refuse.New(kubeout.CodeIdentityOutput, "%s: kubectl exited %d (%d bytes of stderr stored; %s)", step, res.ExitCode, len(res.Stderr), kubeout.StoreRef(s.lastStderr))
	}
	uid, err := kubeout.NamespaceUID(res.Stdout)
	if err != nil {
		return err
	}
	if uid != s.pc.Command.ExpectedClusterUID {
		// The live uid is not printed: it is not a value to copy into the command file unreviewed.
		return refuse.New(CodeClusterUID, "%s: the kube-system uid differs from expectedClusterUid %s: the context reaches another cluster than the one reviewed", step, s.pc.Command.ExpectedClusterUID).
			WithHint("review the cluster the context reaches with ql3 cluster identity before changing expectedClusterUid")
	}
	s.clusterUID = uid
	return nil
}

// version runs the preflight's version read and judges its stdout (kubeout.ReadVersions): a run
// that fails, or output that is not both versions, is a refusal; a skew beyond ±1 is not (the
// report records it and the preflight names it, SkewWarning).
func (s *session) version(ctx context.Context) error {
	res, err := s.run(ctx, evidence.StepVersion, nil)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		if c := kubeout.Classify(res.Stderr); c.Code != "" {
			return c.Refusal(evidence.StepVersion, res.ExitCode, s.lastStderr)
		}
		return refuse.New(kubeout.CodeVersionRead, "%s: kubectl exited %d (%d bytes of stderr stored; %s)", evidence.StepVersion, res.ExitCode, len(res.Stderr), kubeout.StoreRef(s.lastStderr))
	}
	v, err := kubeout.ReadVersions(res.Stdout)
	if err != nil {
		return err
	}
	s.versions = v
	return nil
}

// SkewWarning is the line that names a kubectl more than evidence.SupportedSkew minors from the
// API server, and "" for a supported skew (or no version read).
func SkewWarning(v *evidence.Versions) string {
	if v == nil || v.SupportedSkew {
		return ""
	}
	return fmt.Sprintf("ql3: warning: kubectl %s is %d minor versions from the API server %s: the supported skew is ±%d (docs/kubectl.md#version-skew)",
		v.Kubectl, v.MinorsApart, v.Server, evidence.SupportedSkew)
}

// dryRun runs the server-side dry-run and refuses a non-zero exit with its classified reason.
func (s *session) dryRun(ctx context.Context) error {
	res, err := s.run(ctx, evidence.StepDryRun, s.manifest.Bytes)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return classifyDryRun(evidence.StepDryRun, res.ExitCode, res.Stdout, res.Stderr, s.lastStderr, s.resources())
	}
	return kubeout.Applied(res.Stdout, s.resources(), true)
}

func (s *session) resources() []kubeout.Resource {
	out := make([]kubeout.Resource, 0, len(s.lock.Objects))
	for _, o := range s.lock.Objects {
		out = append(out, kubeout.Resource{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name})
	}
	return out
}

func (s *session) lockBinding() evidence.LockBinding {
	l := s.lock
	return evidence.LockBinding{ReportDigest: l.ReportDigest, ManifestDigest: l.ManifestDigest,
		CatalogDigest: l.CatalogDigest, CatalogCommit: l.CatalogCommit, ReleaseSet: l.ReleaseSet,
		ReleaseVersion: l.ReleaseVersion}
}

func (s *session) close() {
	if s.endHash != nil {
		<-s.endHash // the hash reads the descriptor that Close releases
	}
	if s.exe != nil {
		_ = s.exe.Close()
	}
	if s.st != nil {
		_ = s.st.Close() // nothing is left to write: every record was committed and synced, or refused
	}
}
