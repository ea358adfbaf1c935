package evidence

import "github.com/opencontainers/go-digest"

// Record schemas and their media types. A descriptor whose MediaType is one of the record media
// types points at a record: canonical JCS, a closed shape, and the schema named here. Every other
// media type points at a raw blob stored verbatim. docs/records.md is the normative description.
const (
	SchemaCommand    = "qinglong/cluster-deployment-command@v1"
	SchemaInput      = "qinglong/ql3-input@v1"
	SchemaKubeconfig = "qinglong/ql3-kubeconfig-summary@v1"
	SchemaExec       = "qinglong/ql3-exec@v1"
	SchemaPreflight  = "qinglong/ql3-preflight@v1"
	SchemaIntent     = "qinglong/ql3-apply-intent@v1"
	SchemaReceipt    = "qinglong/ql3-receipt@v1"

	MediaTypeCommand    = "application/vnd.qinglong.ql3.command.v1+json"
	MediaTypeInput      = "application/vnd.qinglong.ql3.input.v1+json"
	MediaTypeKubeconfig = "application/vnd.qinglong.ql3.kubeconfig-summary.v1+json"
	MediaTypeExec       = "application/vnd.qinglong.ql3.exec.v1+json"
	MediaTypePreflight  = "application/vnd.qinglong.ql3.preflight.v1+json"
	MediaTypeIntent     = "application/vnd.qinglong.ql3.apply-intent.v1+json"
	MediaTypeReceipt    = "application/vnd.qinglong.ql3.receipt.v1+json"

	// Raw blobs.
	MediaTypeCommandFile = "application/vnd.qinglong.ql3.command-file.v1+json"
	MediaTypeManifest    = "application/vnd.qinglong.ql3.manifest.v1+yaml"
	MediaTypeLockReport  = "application/vnd.qinglong.kubernetes-deployment-lock.v2+json"
	MediaTypeStdout      = "application/vnd.qinglong.ql3.kubectl.stdout.v1"
	MediaTypeStderr      = "application/vnd.qinglong.ql3.kubectl.stderr.v1"
	MediaTypeOctets      = "application/octet-stream"
)

// recordMediaTypes maps each record media type to the schema its records must carry.
var recordMediaTypes = map[string]string{
	MediaTypeCommand:    SchemaCommand,
	MediaTypeInput:      SchemaInput,
	MediaTypeKubeconfig: SchemaKubeconfig,
	MediaTypeExec:       SchemaExec,
	MediaTypePreflight:  SchemaPreflight,
	MediaTypeIntent:     SchemaIntent,
	MediaTypeReceipt:    SchemaReceipt,
	MediaTypeStatement:  SchemaStatement,
}

// schemaMembers names, for a record media type whose schema is not carried by a "schema" member,
// the member that carries it: an in-toto statement names its schema in "_type".
var schemaMembers = map[string]string{
	MediaTypeStatement: "_type",
}

// RecordSchema reports the schema a record of mediaType must carry, and whether mediaType is a
// record media type at all.
func RecordSchema(mediaType string) (string, bool) {
	s, ok := recordMediaTypes[mediaType]
	return s, ok
}

// Command names.
const (
	CommandPreflight    = "cluster.deployment.preflight"
	CommandApply        = "cluster.deployment.apply"
	CommandReceiptAudit = "cluster.deployment.receipt.audit"

	FieldManager = "qinglong3-catalog-lock"
)

// FileRef names a pinned input file.
type FileRef struct {
	Path   string        `json:"path"`
	Digest digest.Digest `json:"digest"`
}

// KubeconfigRef names the pinned kubeconfig and the context to use from it.
type KubeconfigRef struct {
	Path    string        `json:"path"`
	Digest  digest.Digest `json:"digest"`
	Context string        `json:"context"`
}

// Target is what a preflight and the apply that consumes it must agree on: the command without
// command, preflight and receipt.
type Target struct {
	Schema             string        `json:"schema"`
	Store              string        `json:"store"`
	Manifest           FileRef       `json:"manifest"`
	LockReport         FileRef       `json:"lockReport"`
	Kubeconfig         KubeconfigRef `json:"kubeconfig"`
	Kubectl            FileRef       `json:"kubectl"`
	ExpectedClusterUID string        `json:"expectedClusterUid"`
	FieldManager       string        `json:"fieldManager"`
}

// Command is the command file (qinglong/cluster-deployment-command@v1). Its JCS form is stored as
// a record and its digest is the command's identity. Preflight is present only for apply, Receipt
// only for receipt.audit.
type Command struct {
	Schema             string         `json:"schema"`
	Command            string         `json:"command"`
	Store              string         `json:"store"`
	Manifest           FileRef        `json:"manifest"`
	LockReport         FileRef        `json:"lockReport"`
	Kubeconfig         KubeconfigRef  `json:"kubeconfig"`
	Kubectl            FileRef        `json:"kubectl"`
	ExpectedClusterUID string         `json:"expectedClusterUid"`
	FieldManager       string         `json:"fieldManager"`
	Preflight          *digest.Digest `json:"preflight,omitempty"`
	Receipt            *digest.Digest `json:"receipt,omitempty"`
}

// Target returns the command's target.
func (c *Command) Target() Target {
	return Target{
		Schema: c.Schema, Store: c.Store, Manifest: c.Manifest, LockReport: c.LockReport,
		Kubeconfig: c.Kubeconfig, Kubectl: c.Kubectl, ExpectedClusterUID: c.ExpectedClusterUID,
		FieldManager: c.FieldManager,
	}
}

// Input roles.
const (
	RoleCommandFile = "commandFile"
	RoleManifest    = "manifest"
	RoleLockReport  = "lockReport"
	RoleKubeconfig  = "kubeconfig"
	RoleKubectl     = "kubectl"
)

// Input records the identity of one input file as it was read (qinglong/ql3-input@v1). dev and
// inode are decimal strings because they may exceed the ±2^53 integer range of records. Content
// is present for the command file, the manifest and the lock report, which hold no credential:
// the kubeconfig is a credential and is bound by digest alone, kubectl (79 MB) by digest alone.
type Input struct {
	Schema  string        `json:"schema"`
	Role    string        `json:"role"`
	Path    string        `json:"path"`
	Dev     string        `json:"dev"`
	Inode   string        `json:"inode"`
	Mode    string        `json:"mode"` // octal permission bits, e.g. "0600"
	UID     int64         `json:"uid"`
	Size    int64         `json:"size"`
	Mtime   string        `json:"mtime"` // RFC 3339 with nanoseconds, UTC
	Ctime   string        `json:"ctime"`
	Digest  digest.Digest `json:"digest"`
	Content *Descriptor   `json:"content,omitempty"`
}

// Kubeconfig auth kinds.
const (
	AuthClientCertificate = "clientCertificate"
	AuthToken             = "token"
	AuthBasic             = "basic"
)

// KubeconfigSummary is the redacted view of the kubeconfig (qinglong/ql3-kubeconfig-summary@v1).
// It never carries a credential: CADigest is the SHA-256 of the CA bundle bytes, not the bundle.
type KubeconfigSummary struct {
	Schema   string        `json:"schema"`
	Digest   digest.Digest `json:"digest"` // of the raw kubeconfig bytes
	Context  string        `json:"context"`
	Cluster  string        `json:"cluster"`
	Server   string        `json:"server"`
	CADigest digest.Digest `json:"caDigest"`
	User     string        `json:"user"`
	AuthKind string        `json:"authKind"`
}

// Exec steps, in the order a full apply runs them.
const (
	StepIdentity      = "identity"
	StepVersion       = "version" // the preflight's kubectl version -o=json: kubectl's and the API server's versions
	StepDryRun        = "dry-run"
	StepApply         = "apply"
	StepConvergence   = "convergence"
	StepNamespaces    = "namespaces" // the namespaces the objects live in and the manifest does not hold
	StepIdentityFinal = "identity-final"
)

// Exec records one kubectl invocation (qinglong/ql3-exec@v1). Stdin is present exactly for the
// steps that read the manifest on stdin. StdoutBytes and StderrBytes repeat the descriptor sizes
// on purpose: the auditor checks that the two agree.
type Exec struct {
	Schema        string        `json:"schema"`
	Step          string        `json:"step"`
	Argv          []string      `json:"argv"`
	Env           []string      `json:"env"`
	KubectlDigest digest.Digest `json:"kubectlDigest"`
	Stdin         *Descriptor   `json:"stdin,omitempty"`
	Stdout        Descriptor    `json:"stdout"`
	Stderr        Descriptor    `json:"stderr"`
	StdoutBytes   int64         `json:"stdoutBytes"`
	StderrBytes   int64         `json:"stderrBytes"`
	ExitCode      int64         `json:"exitCode"`
	StartedAt     string        `json:"startedAt"`
	FinishedAt    string        `json:"finishedAt"`
	DurationMs    int64         `json:"durationMs"`
}

// Inputs points at the input records of one run.
type Inputs struct {
	CommandFile Descriptor `json:"commandFile"`
	Manifest    Descriptor `json:"manifest"`
	LockReport  Descriptor `json:"lockReport"`
	Kubeconfig  Descriptor `json:"kubeconfig"`
	Kubectl     Descriptor `json:"kubectl"`
}

// LockBinding repeats the lock report facts a run was bound to.
type LockBinding struct {
	ReportDigest   digest.Digest `json:"reportDigest"`
	ManifestDigest digest.Digest `json:"manifestDigest"`
	CatalogDigest  digest.Digest `json:"catalogDigest"`
	CatalogCommit  string        `json:"catalogCommit"`
	ReleaseSet     digest.Digest `json:"releaseSet"`
	ReleaseVersion string        `json:"releaseVersion"`
}

// Preflight is the preflight report (qinglong/ql3-preflight@v1). Execs are the identity read, the
// version read and the server-side dry-run, in that order; a report without Versions was written
// before the version read, and its execs are the identity read and the dry-run.
type Preflight struct {
	Schema             string        `json:"schema"`
	Command            Descriptor    `json:"command"`
	Target             digest.Digest `json:"target"` // SHA-256 of JCS(Target)
	Inputs             Inputs        `json:"inputs"`
	Kubeconfig         Descriptor    `json:"kubeconfig"`
	Manifest           Descriptor    `json:"manifest"`
	LockReport         Descriptor    `json:"lockReport"`
	Lock               LockBinding   `json:"lock"`
	ClusterUID         string        `json:"clusterUid"`
	FieldManager       string        `json:"fieldManager"`
	Execs              []Descriptor  `json:"execs"`
	NetworkAccess      bool          `json:"networkAccess"`      // always true
	KubernetesMutation bool          `json:"kubernetesMutation"` // always false
	StartedAt          string        `json:"startedAt"`
	FinishedAt         string        `json:"finishedAt"`
	// Plan is present when the store held a receipt of the same cluster (evidence.Plan).
	Plan *Descriptor `json:"plan,omitempty"`
	// Writer is the ql3 that wrote the report; absent in reports written before it was recorded.
	Writer *Writer `json:"writer,omitempty"`
	// Versions is what the version read showed (derived from its stored stdout); absent in
	// reports written before the version read, which hold no such exec.
	Versions *Versions `json:"versions,omitempty"`
}

// SupportedSkew is the kubectl/API server minor version skew Kubernetes supports (±1).
const SupportedSkew = 1

// Versions are kubectl's and the API server's versions as the preflight's version read printed
// them (clientVersion.gitVersion, serverVersion.gitVersion), how many minors apart they are
// (absolute; a different major counts as unsupported), and whether that is within SupportedSkew.
type Versions struct {
	Kubectl       string `json:"kubectl"`
	Server        string `json:"server"`
	MinorsApart   int64  `json:"minorsApart"`
	SupportedSkew bool   `json:"supportedSkew"`
}

// Writer identifies the ql3 build that wrote a record, from its build information: informative
// for an auditor, never part of an identity that idempotence depends on.
type Writer struct {
	Module    string `json:"module"`
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"goVersion"`
}

// Intent is written before the first mutation of an apply (qinglong/ql3-apply-intent@v1) and
// indexed under the apply command's digest. An intent without a receipt means a mutation may have
// happened and its response was lost.
type Intent struct {
	Schema     string        `json:"schema"`
	Command    Descriptor    `json:"command"`
	Preflight  Descriptor    `json:"preflight"`
	Target     digest.Digest `json:"target"`
	ClusterUID string        `json:"clusterUid"`
	Execs      []Descriptor  `json:"execs"` // this attempt's identity read and dry-run
	CreatedAt  string        `json:"createdAt"`
}

// LiveObject identifies one object as the convergence read saw it.
type LiveObject struct {
	APIVersion      string `json:"apiVersion"`
	Kind            string `json:"kind"`
	Namespace       string `json:"namespace"` // "" for cluster-scoped objects
	Name            string `json:"name"`
	UID             string `json:"uid"`
	ResourceVersion string `json:"resourceVersion"`
}

// Receipt is the record of a converged apply (qinglong/ql3-receipt@v1), indexed under the apply
// command's digest. Execs are identity, dry-run, apply, convergence and identity-final, in that
// order. Recovered is true when this run found an intent of an earlier attempt without a receipt;
// Intent then names that earlier intent.
type Receipt struct {
	Schema                 string        `json:"schema"`
	Command                Descriptor    `json:"command"`
	Preflight              Descriptor    `json:"preflight"`
	Intent                 Descriptor    `json:"intent"`
	Recovered              bool          `json:"recovered"`
	Target                 digest.Digest `json:"target"`
	Inputs                 Inputs        `json:"inputs"`
	Kubeconfig             Descriptor    `json:"kubeconfig"`
	Manifest               Descriptor    `json:"manifest"`
	LockReport             Descriptor    `json:"lockReport"`
	Lock                   LockBinding   `json:"lock"`
	KubeconfigDigest       digest.Digest `json:"kubeconfigDigest"`
	KubectlDigest          digest.Digest `json:"kubectlDigest"`
	ClusterUID             string        `json:"clusterUid"`
	FieldManager           string        `json:"fieldManager"`
	Execs                  []Descriptor  `json:"execs"`
	Objects                []LiveObject  `json:"objects"`
	CrossResourceAtomicity bool          `json:"crossResourceAtomicity"` // always false
	NetworkAccess          bool          `json:"networkAccess"`          // always true
	KubernetesMutation     bool          `json:"kubernetesMutation"`     // always true
	StartedAt              string        `json:"startedAt"`
	FinishedAt             string        `json:"finishedAt"`
	Writer                 *Writer       `json:"writer,omitempty"` // as in Preflight
}

// Index kinds of the store (index/<kind>/<hex of key>). Each entry holds one canonical
// Descriptor and is written no-replace.
const (
	IndexReceipts   = "receipts"   // apply command digest -> receipt
	IndexIntents    = "intents"    // apply command digest -> intent
	IndexPreflights = "preflights" // preflight digest -> preflight (the set of preflight roots)
	// IndexAttestations is two levels deep: index/attestations/<hex of subject>/<hex of bundle>
	// holds the descriptor of the statement record that bundle signs. A subject may carry several.
	IndexAttestations = "attestations"
)

// Diff names the fields in which t and u differ, in the order of the command file's fields
// (for instance "manifest.digest", "kubeconfig.context"). Values are not named: a message may
// say which field differs without repeating paths or digests twice.
func (t Target) Diff(u Target) []string {
	var out []string
	add := func(name string, differ bool) {
		if differ {
			out = append(out, name)
		}
	}
	add("schema", t.Schema != u.Schema)
	add("store", t.Store != u.Store)
	add("manifest.path", t.Manifest.Path != u.Manifest.Path)
	add("manifest.digest", t.Manifest.Digest != u.Manifest.Digest)
	add("lockReport.path", t.LockReport.Path != u.LockReport.Path)
	add("lockReport.digest", t.LockReport.Digest != u.LockReport.Digest)
	add("kubeconfig.path", t.Kubeconfig.Path != u.Kubeconfig.Path)
	add("kubeconfig.digest", t.Kubeconfig.Digest != u.Kubeconfig.Digest)
	add("kubeconfig.context", t.Kubeconfig.Context != u.Kubeconfig.Context)
	add("kubectl.path", t.Kubectl.Path != u.Kubectl.Path)
	add("kubectl.digest", t.Kubectl.Digest != u.Kubectl.Digest)
	add("expectedClusterUid", t.ExpectedClusterUID != u.ExpectedClusterUID)
	add("fieldManager", t.FieldManager != u.FieldManager)
	return out
}
