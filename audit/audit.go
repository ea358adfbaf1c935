// Package audit re-derives, offline, every verdict of a ql3 ceremony from a copy of its evidence
// store (docs/rationale.md#8-offline-audit). Nothing a record claims is taken on trust: every object of the closure is
// re-hashed, every link of the digest chain is followed and compared, the lock report is verified
// again against the stored manifest bytes, every kubectl invocation's argv and environment are
// re-derived, and the identity reads and the convergence read are judged again, with the code the
// ceremony uses, from their stored stdout. The auditor opens no network connection and runs no
// program: it does not and cannot replay the API server.
package audit

import (
	"fmt"
	"github.com/qinglong/ql3/attest"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/lock"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// SchemaReport is the schema of the audit report printed under --output json.
const SchemaReport = "qinglong/ql3-audit@v1"

// Reason codes of audit findings. Checks that reuse a verifier (store, records, lock, kubectl
// invocation shape, convergence) report that verifier's own code instead.
const (
	// CodeSubject: the digest names neither a receipt nor a preflight report.
	CodeSubject refuse.Code = "AUDIT_SUBJECT_KIND"
	// CodeMediaType: a descriptor names an object with a media type other than its place requires.
	CodeMediaType refuse.Code = "AUDIT_MEDIA_TYPE"
	// CodeClaim: a record states something the ceremony never states (e.g. crossResourceAtomicity
	// true, kubernetesMutation true in a preflight, another field manager, a wrong exec count).
	CodeClaim refuse.Code = "AUDIT_CLAIM"
	// CodeCommand: the command record is not the command this record must bind.
	CodeCommand refuse.Code = "AUDIT_COMMAND_BINDING"
	// CodeTarget: two records of the chain bind different targets.
	CodeTarget refuse.Code = "AUDIT_TARGET_MISMATCH"
	// CodePreflight: the receipt's preflight is not the one its command consumed, or fails its own audit.
	CodePreflight refuse.Code = "AUDIT_PREFLIGHT_BINDING"
	// CodeIntent: the intent does not bind this command, preflight, target, cluster and dry-run.
	CodeIntent refuse.Code = "AUDIT_INTENT_BINDING"
	// CodeInput: an input record does not bind the command's path, digest and stored content.
	CodeInput refuse.Code = "AUDIT_INPUT_BINDING"
	// CodeKubeconfig: the kubeconfig summary does not bind the command's kubeconfig and context.
	CodeKubeconfig refuse.Code = "AUDIT_KUBECONFIG_BINDING"
	// CodeKubectl: an exec record or the receipt names another kubectl than the command pins.
	CodeKubectl refuse.Code = "AUDIT_KUBECTL_DIGEST"
	// CodeLock: the recorded lock binding differs from what the lock verifier derives.
	CodeLock refuse.Code = "AUDIT_LOCK_BINDING"
	// CodeExecSequence: the exec records are not the required steps in the required order.
	CodeExecSequence refuse.Code = "AUDIT_EXEC_SEQUENCE"
	// CodeExecStdin: an exec's stdin is not exactly the manifest blob where the step reads it.
	CodeExecStdin refuse.Code = "AUDIT_EXEC_STDIN"
	// CodeExecBytes: an exec's recorded byte counts differ from its stored output blobs.
	CodeExecBytes refuse.Code = "AUDIT_EXEC_BYTES"
	// CodeExecExit: a step the record presents as successful exited non-zero.
	CodeExecExit refuse.Code = "AUDIT_EXEC_EXIT"
	// CodeClusterUID: a stored identity read shows another cluster than the command expects.
	CodeClusterUID refuse.Code = "AUDIT_CLUSTER_UID"
	// CodeObjects: the receipt's object list differs from what the convergence read shows.
	CodeObjects refuse.Code = "AUDIT_OBJECTS_MISMATCH"
	// CodeUnpublished: the store's index does not name this record as published.
	CodeUnpublished refuse.Code = "AUDIT_NOT_PUBLISHED"
	// CodeFailed: the summary refusal of an audit with failed checks when no check carried a code.
	CodeFailed refuse.Code = "AUDIT_FAILED"
)

// Source is the read side of an evidence store. Every method re-hashes what it returns and
// refuses an object that does not hash to its name; *store.Store is the implementation.
type Source interface {
	Get(d digest.Digest) ([]byte, error)
	GetDescriptor(d evidence.Descriptor) ([]byte, error)
	GetIndex(kind string, key digest.Digest) (evidence.Descriptor, bool, error)
}

var _ Source = (*store.Store)(nil)

// Check is one verdict of the audit.
type Check struct {
	Name   string      `json:"name"`
	OK     bool        `json:"ok"`
	Code   refuse.Code `json:"code,omitempty"`
	Detail string      `json:"detail"`
}

// Report is the audit's result. It never claims more than the evidence shows: externalResultsReplayed
// and crossResourceAtomicity are always false, and NotChecked lists what no offline audit can show.
type Report struct {
	Schema                  string        `json:"schema"`
	Subject                 digest.Digest `json:"subject"`
	Kind                    string        `json:"kind"` // "receipt" or "preflight"
	OK                      bool          `json:"ok"`
	Code                    refuse.Code   `json:"code,omitempty"` // the first failed check's code
	Recovered               bool          `json:"recovered"`
	Objects                 int           `json:"objects"` // objects in the closure
	Bytes                   int64         `json:"bytes"`   // their total size
	Checks                  []Check       `json:"checks"`
	ExternalResultsReplayed bool          `json:"externalResultsReplayed"`
	CrossResourceAtomicity  bool          `json:"crossResourceAtomicity"`
	NotChecked              []string      `json:"notChecked"`
	// Attestations lists the subject's attestations and which a given key verified (AuditWith).
	Attestations *attest.Result `json:"attestations,omitempty"`
	// Log is the subject's leaf in a trusted checkpoint of its deployment log (--log-key).
	Log *LogInclusion `json:"log,omitempty"`
	// Pruned is set when retention dropped the subject (AUDIT_PRUNED): its publishing and
	// tombstone leaves.
	Pruned *store.PrunedRoot `json:"pruned,omitempty"`
}

// Subject kinds.
const (
	KindReceipt   = "receipt"
	KindPreflight = "preflight"
)

// notChecked is what an offline audit of stored evidence cannot show, stated in every report.
var notChecked = []string{
	"live cluster state now: the audit replays no API server result",
	"the kubeconfig's bytes: never stored, bound by digest only; so are its summary's cluster, server, user and CA digest (the auth kind only as a known kind)",
	"the kubectl binary's bytes: not stored, bound by digest only",
	"input files' device and inode numbers, the command file's path, and the sizes of the kubeconfig and kubectl: recorded when read, bound by nothing stored",
	"each kubectl run's descriptor number and private directory name: only their form, and that no two runs of the chain share a directory, are checked",
	"wall-clock times and the writer (which ql3 wrote a record): the recording hosts' clocks, not verified; the exec records' times are checked for their form and their order along the chain, and each record's own times are bound to within 10 minutes of its exec records' times (record times), so a consistent rewrite of every time of a chain cannot be told offline",
	"which receipts the store held when a preflight ran: its plan is re-derived against the receipt it names (published, of its cluster), not shown to be the cluster's latest receipt then, and a preflight without a plan is not shown to have had no receipt to compare with",
	authenticityUnsigned,
	"cross-resource atomicity: a multi-resource apply is not a transaction",
}

// Err returns nil when every check passed, else a refusal carrying the first failed check's code.
func (r *Report) Err() error {
	if r.OK {
		return nil
	}
	var failed []string
	var first *Check
	for i := range r.Checks {
		if !r.Checks[i].OK {
			if first == nil {
				first = &r.Checks[i]
			}
			failed = append(failed, r.Checks[i].Name)
		}
	}
	code := r.Code
	if code == "" {
		code = CodeFailed
	}
	if first == nil {
		return refuse.New(code, "audit of %s %s failed", r.Kind, r.Subject)
	}
	return refuse.New(code, "audit of %s %s: %d of %d checks failed (%s); first: %s: %s",
		r.Kind, r.Subject, len(failed), len(r.Checks), strings.Join(failed, ", "), first.Name, first.Detail)
}

// auditor accumulates checks and keeps going after a failure, so that one run shows every finding.
type auditor struct {
	src    *memo
	report *Report
	// locks caches lock.Verify by the blob pair it ran on: a receipt and its preflight bind the
	// same manifest and lock report, and verifying them twice would prove nothing more.
	locks map[[2]digest.Digest]*lock.Result
}

func (a *auditor) pass(name, format string, args ...any) {
	a.report.Checks = append(a.report.Checks, Check{Name: name, OK: true, Detail: fmt.Sprintf(format, args...)})
}

// fail records a failed check; err's reason code (if any) becomes the check's code.
func (a *auditor) fail(name string, err error) {
	c := Check{Name: name, Code: refuse.CodeOf(err)}
	if r, ok := refuse.As(err); ok {
		c.Detail = r.Message()
	} else {
		c.Detail = err.Error()
	}
	a.report.Checks = append(a.report.Checks, c)
}

// check runs f as the check name: pass with f's detail, or fail with its error.
func (a *auditor) check(name string, f func() (string, error)) bool {
	detail, err := f()
	if err != nil {
		a.fail(name, err)
		return false
	}
	a.pass(name, "%s", detail)
	return true
}

// Audit audits the receipt or preflight report named by subject in src. The returned error is
// reserved for a subject that cannot be audited at all (malformed digest); every verification
// failure is a failed check in the report, and Report.Err turns it into a refusal.
func Audit(src Source, subject digest.Digest) (*Report, error) {
	return AuditWith(src, subject, Options{})
}

// AuditFor audits subject (the receipt of a cluster.deployment.receipt.audit command) and also
// requires it to bind target, the target of that command: the auditor then confirms the receipt is
// for the manifest, lock, kubeconfig, kubectl and cluster the command file names.
func AuditFor(src Source, subject, target digest.Digest) (*Report, error) {
	return AuditWith(src, subject, Options{Target: target})
}

func audit(src Source, subject, target digest.Digest) (*Report, error) {
	if _, err := evidence.ParseDigest(string(subject)); err != nil {
		return nil, err
	}
	a := &auditor{src: newMemo(src), report: &Report{Schema: SchemaReport, Subject: subject, Checks: []Check{},
		NotChecked: append([]string(nil), notChecked...)}}
	kind, root, err := a.subjectKind(subject)
	if err != nil {
		a.report.Kind = "unknown"
		a.fail("subject", err)
		a.finish()
		return a.report, nil
	}
	a.report.Kind = kind
	a.closure(root)
	if target != "" {
		a.check("audit command target", func() (string, error) { return a.targetOf(root, target) })
	}
	switch kind {
	case KindReceipt:
		a.receipt(root)
	case KindLiveAudit:
		a.liveAudit(root)
	default:
		a.preflightRoot(root)
	}
	a.finish()
	return a.report, nil
}

func (a *auditor) finish() {
	a.report.OK = len(a.report.Checks) > 0
	for _, c := range a.report.Checks {
		if !c.OK {
			a.report.OK = false
			if a.report.Code == "" {
				a.report.Code = c.Code
				if c.Code == "" {
					a.report.Code = CodeFailed
				}
			}
		}
	}
}
