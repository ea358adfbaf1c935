package evidence

import "github.com/opencontainers/go-digest"

// The records of a release's life after its receipt (docs/issues.md#issue-9): the live-audit report and the plan
// a preflight stores. docs/records.md describes them.
const (
	SchemaLiveAudit = "qinglong/ql3-live-audit@v1"
	SchemaPlan      = "qinglong/ql3-plan@v1"

	MediaTypeLiveAudit = "application/vnd.qinglong.ql3.live-audit.v1+json"
	MediaTypePlan      = "application/vnd.qinglong.ql3.plan.v1+json"

	// CommandLiveAudit reads the live state of a receipt's objects and judges it; it mutates nothing.
	CommandLiveAudit = "cluster.deployment.live.audit"

	// IndexLiveAudits names every published live-audit report by its own digest, as
	// IndexPreflights does for preflight reports.
	IndexLiveAudits = "live-audits"
)

func init() {
	recordMediaTypes[MediaTypeLiveAudit] = SchemaLiveAudit
	recordMediaTypes[MediaTypePlan] = SchemaPlan
}

// Verdicts of the live audit on one object.
const (
	VerdictConverged         = "converged"          // every field the manifest sets holds its value, owned by our Apply entry
	VerdictFieldDiffers      = "field-differs"      // a field is absent or holds another value
	VerdictOwnershipLost     = "ownership-lost"     // a field holds the manifest's value but another manager owns it
	VerdictMissing           = "missing"            // kubectl get did not find the object
	VerdictRecreated         = "recreated"          // the object's uid is not the receipt's
	VerdictImageDiffers      = "image-differs"      // an image authority does not run the lock's image
	VerdictAnnotationDiffers = "annotation-differs" // a release annotation is not the lock's value
	VerdictUnreadable        = "unreadable"         // the live object has no usable uid, resourceVersion or managedFields, or is being deleted (itself or its namespace)
	VerdictAddedByOther      = "added-by-other"     // a field the release does not set is owned by another manager (LiveJudgeAdditions)
)

// LiveJudgeAdditions names the live audit's rules since issue 22: besides every field the
// release sets, every field, label and annotation another manager added is drift. A report
// without a judge member was judged by the earlier rules, and is re-judged by them.
const LiveJudgeAdditions = "ql3-live-judge@2"

// LiveJudgeNamespaces names the rules since the namespace read (issue 22): LiveJudgeAdditions,
// and an object found in a namespace that is being deleted is not converged (unreadable,
// CONVERGENCE_NAMESPACE_TERMINATING). Its execs are identity, convergence, the namespace read
// when the objects found live in a namespace the manifest does not hold, and identity-final.
const LiveJudgeNamespaces = "ql3-live-judge@3"

// LiveAddition is one field of a live object that another manager added (LiveJudgeAdditions).
type LiveAddition struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Path       string `json:"path"`
	Manager    string `json:"manager"`
	Live       string `json:"live"`
	Security   bool   `json:"security"` // host namespaces, host paths, capabilities, privilege, AppArmor, seccomp
}

// LiveVerdict is the live audit's verdict on one manifest object. Path, Manager, Live and Expected
// say where a field stands that is not converged: short, low-sensitivity renderings (a manifest
// holds no Secret).
type LiveVerdict struct {
	APIVersion      string `json:"apiVersion"`
	Kind            string `json:"kind"`
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	UID             string `json:"uid"`             // "" when missing
	ResourceVersion string `json:"resourceVersion"` // "" when missing
	ReceiptUID      string `json:"receiptUid"`
	Verdict         string `json:"verdict"`
	Code            string `json:"code,omitempty"`
	Path            string `json:"path,omitempty"`
	Manager         string `json:"manager,omitempty"`
	Live            string `json:"live,omitempty"`
	Expected        string `json:"expected,omitempty"`
	Detail          string `json:"detail,omitempty"`
}

// LiveAuditInputs points at the input records a live audit read from disk: the command file, the
// kubeconfig and kubectl. The manifest and lock report are the receipt's stored blobs.
type LiveAuditInputs struct {
	CommandFile Descriptor `json:"commandFile"`
	Kubeconfig  Descriptor `json:"kubeconfig"`
	Kubectl     Descriptor `json:"kubectl"`
}

// LiveAudit is the live-audit report (qinglong/ql3-live-audit@v1), indexed under its own digest.
// Execs are identity, convergence and identity-final, in that order; the convergence read's stdin
// is the receipt's manifest blob. Converged is true exactly when every verdict is converged.
type LiveAudit struct {
	Schema             string          `json:"schema"`
	Command            Descriptor      `json:"command"` // the live-audit or apply command run
	Receipt            Descriptor      `json:"receipt"`
	Target             digest.Digest   `json:"target"`
	Inputs             LiveAuditInputs `json:"inputs"`
	Kubeconfig         Descriptor      `json:"kubeconfig"`
	Manifest           Descriptor      `json:"manifest"`
	LockReport         Descriptor      `json:"lockReport"`
	Lock               LockBinding     `json:"lock"`
	KubectlDigest      digest.Digest   `json:"kubectlDigest"`
	ClusterUID         string          `json:"clusterUid"`
	FieldManager       string          `json:"fieldManager"`
	Execs              []Descriptor    `json:"execs"`
	Verdicts           []LiveVerdict   `json:"verdicts"`
	Judge              string          `json:"judge,omitempty"` // the rules that judged: LiveJudgeAdditions, or absent for the earlier ones
	Added              []LiveAddition  `json:"added,omitempty"` // every field other managers added, per object in manifest order
	Converged          bool            `json:"converged"`
	NetworkAccess      bool            `json:"networkAccess"`      // always true
	KubernetesMutation bool            `json:"kubernetesMutation"` // always false
	StartedAt          string          `json:"startedAt"`
	FinishedAt         string          `json:"finishedAt"`
}

// PlanObject names one object of a plan.
type PlanObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
}

// PlanChange is an object both releases set, with the paths of the fields that change (added,
// removed or set to another value). UID is the object's uid in the previous receipt.
type PlanChange struct {
	Object PlanObject `json:"object"`
	UID    string     `json:"uid"`
	Paths  []string   `json:"paths"`
}

// PlanMove is an image or release annotation that moves.
type PlanMove struct {
	Object PlanObject `json:"object"`
	Path   string     `json:"path"`
	From   string     `json:"from"` // "" when the previous release did not set it
	To     string     `json:"to"`   // "" when this release does not set it
}

// Plan is what a preflight will change relative to the latest receipt of the same cluster in the
// same store (qinglong/ql3-plan@v1). It is computed offline from the two stored manifests and the
// previous receipt's objects, and stored with the preflight report. Left are the objects the
// previous release had and this one lacks: ql3 never deletes, so they stay in the cluster.
type Plan struct {
	Schema          string        `json:"schema"`
	Previous        Descriptor    `json:"previous"` // the previous receipt
	PreviousRelease string        `json:"previousRelease"`
	Release         string        `json:"release"`
	ClusterUID      string        `json:"clusterUid"`
	PreviousAt      string        `json:"previousAt"` // the previous receipt's finishedAt
	Manifest        Descriptor    `json:"manifest"`
	PreviousMan     Descriptor    `json:"previousManifest"`
	Added           []PlanObject  `json:"added"`
	Changed         []PlanChange  `json:"changed"`
	Unchanged       int64         `json:"unchanged"`
	Left            []PlanObject  `json:"left"`
	Images          []PlanMove    `json:"images"`
	Annotations     []PlanMove    `json:"annotations"`
	Deletes         bool          `json:"deletes"` // always false: ql3 never deletes
	Target          digest.Digest `json:"target"`
}
