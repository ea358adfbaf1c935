// Package command parses and validates ql3's command file (qinglong/cluster-deployment-command@v1,
// docs/command-file.md): a closed shape, canonical identity and target. It is a leaf shared by the
// ceremony and the offline auditor, which must not import anything that runs a program.
package command

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// Reason codes of the command file.
const (
	// CodeCommandMalformed: not one strictly valid JSON object of the closed command shape
	// (unknown, missing, null or mistyped field, trailing data).
	CodeCommandMalformed refuse.Code = "COMMAND_MALFORMED"
	// CodeCommandSchema: schema is not qinglong/cluster-deployment-command@v1.
	CodeCommandSchema refuse.Code = "COMMAND_SCHEMA_UNSUPPORTED"
	// CodeCommandUnknown: command is none of the three canonical commands.
	CodeCommandUnknown refuse.Code = "COMMAND_UNKNOWN"
	// CodeCommandPath: a path is not absolute and clean.
	CodeCommandPath refuse.Code = "COMMAND_PATH_INVALID"
	// CodeCommandDigest: a digest is malformed or not sha256.
	CodeCommandDigest refuse.Code = "COMMAND_DIGEST_INVALID"
	// CodeFieldManager: fieldManager is not qinglong3-catalog-lock.
	CodeFieldManager refuse.Code = "FIELD_MANAGER_INVALID"
	// CodeCommandField: a field is empty or present for the wrong command.
	CodeCommandField refuse.Code = "COMMAND_FIELD_INVALID"
	// CodeCommandMismatch: a named subcommand was given a file of another command.
	CodeCommandMismatch refuse.Code = "COMMAND_MISMATCH"
	// CodeClusterUID: expectedClusterUid (or --cluster-uid) is not a kube-system UID in the form
	// Kubernetes issues: RFC 4122 text, 36 characters, lower-case hex in groups 8-4-4-4-12.
	CodeClusterUID refuse.Code = "COMMAND_CLUSTER_UID_INVALID"
)

// CheckClusterUID refuses a cluster UID that is not in the textual form of RFC 4122 as the API
// server issues it (lower-case hex, 8-4-4-4-12, 36 bytes). It is checked offline, before anything
// contacts a cluster, so that text the identity read could never match (a newline, 120 KB of
// text) never reaches a command file, a record or a message. The version and variant nibbles are
// not checked: a UID is whatever the cluster's kube-system namespace carries, and the identity
// read compares it byte for byte.
func CheckClusterUID(name, uid string) error {
	if uid == "" {
		return refuse.New(CodeCommandField, "%s is empty", name)
	}
	ok := len(uid) == 36
	for i := 0; ok && i < len(uid); i++ {
		c := uid[i]
		switch i {
		case 8, 13, 18, 23:
			ok = c == '-'
		default:
			ok = c >= '0' && c <= '9' || c >= 'a' && c <= 'f'
		}
	}
	if !ok {
		shown := uid
		if len(shown) > 64 {
			shown = shown[:64]
		}
		return refuse.New(CodeClusterUID, "%s %s (%d bytes) is not a kube-system UID: want 36 characters of lower-case hex in groups 8-4-4-4-12, as ql3 cluster identity prints it",
			name, refuse.Ident(shown), len(uid)).WithHint("copy the UID that ql3 cluster identity printed for the cluster you reviewed")
	}
	return nil
}

// MaxFile is the byte ceiling of a command file.
const MaxFile = 64 << 10

// Parsed is a validated command file.
type Parsed struct {
	Command   evidence.Command
	Canonical []byte        // JCS form; stored as a MediaTypeCommand record
	Digest    digest.Digest // the command's identity: SHA-256 of Canonical
	Target    digest.Digest // SHA-256 of JCS(Target)
}

// shape lists the closed key sets of the command object and its nested objects.
var (
	topKeys = []string{"schema", "command", "store", "manifest", "lockReport", "kubeconfig",
		"kubectl", "expectedClusterUid", "fieldManager"}
	fileRefKeys       = []string{"path", "digest"}
	kubeconfigRefKeys = []string{"path", "digest", "context"}
)

// Parse validates raw command file bytes and returns the command with its identity.
func Parse(raw []byte) (*Parsed, error) {
	canon, err := evidence.Canonicalize(raw)
	if err != nil {
		return nil, refuse.Wrap(CodeCommandMalformed, err, "command file is not canonicalizable json")
	}
	if err := checkShape(canon); err != nil {
		return nil, err
	}
	var c evidence.Command
	if err := evidence.DecodeStrict(canon, &c); err != nil {
		if refuse.CodeOf(err) == evidence.CodeDigestInvalid {
			return nil, refuse.Wrap(CodeCommandDigest, err, "command file holds an invalid digest")
		}
		return nil, refuse.Wrap(CodeCommandMalformed, err, "command file does not decode")
	}
	if err := validateCommand(&c); err != nil {
		return nil, err
	}
	td, err := TargetDigest(c.Target())
	if err != nil {
		return nil, refuse.Wrap(CodeCommandMalformed, err, "command target does not canonicalize")
	}
	return &Parsed{Command: c, Canonical: canon, Digest: evidence.FromBytes(canon), Target: td}, nil
}

// TargetDigest is the SHA-256 of the JCS form of t (evidence.TargetDigest, which the auditor shares).
func TargetDigest(t evidence.Target) (digest.Digest, error) {
	d, err := evidence.TargetDigest(t)
	if err != nil {
		return "", fmt.Errorf("ceremony: target: %w", err)
	}
	return d, nil
}

// checkShape enforces the closed shape: exactly the known keys, none null, no trailing data.
func checkShape(b []byte) error {
	top, err := objectKeys(b, "")
	if err != nil {
		return err
	}
	allowed := append([]string{"preflight", "receipt"}, topKeys...)
	if err := closedKeys(top, topKeys, allowed, ""); err != nil {
		return err
	}
	for _, k := range []string{"manifest", "lockReport", "kubeconfig", "kubectl"} {
		want := fileRefKeys
		if k == "kubeconfig" {
			want = kubeconfigRefKeys
		}
		inner, err := objectKeys(top[k], k)
		if err != nil {
			return err
		}
		if err := closedKeys(inner, want, want, k+"."); err != nil {
			return err
		}
	}
	return nil
}

func objectKeys(b []byte, at string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	var m map[string]json.RawMessage
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, refuse.New(CodeCommandMalformed, "command file: %s is not a json object", where(at))
	}
	if dec.More() {
		return nil, refuse.New(CodeCommandMalformed, "command file: trailing data")
	}
	return m, nil
}

func closedKeys(m map[string]json.RawMessage, required, allowed []string, prefix string) error {
	ok := map[string]bool{}
	for _, k := range allowed {
		ok[k] = true
	}
	var unknown []string
	for k, v := range m {
		if !ok[k] {
			unknown = append(unknown, k)
			continue
		}
		if string(bytes.TrimSpace(v)) == "null" {
			return refuse.New(CodeCommandMalformed, "command file: field %s%s is null", prefix, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return refuse.New(CodeCommandMalformed, "command file: unknown field %s%s", prefix, unknown[0])
	}
	for _, k := range required {
		if _, has := m[k]; !has {
			return refuse.New(CodeCommandMalformed, "command file: missing field %s%s", prefix, k)
		}
	}
	return nil
}

func where(at string) string {
	if at == "" {
		return "the document"
	}
	return "field " + at
}

func validateCommand(c *evidence.Command) error {
	if c.Schema != evidence.SchemaCommand {
		return refuse.New(CodeCommandSchema, "command file: schema is not %s", evidence.SchemaCommand)
	}
	switch c.Command {
	case evidence.CommandPreflight, evidence.CommandApply, evidence.CommandReceiptAudit, evidence.CommandLiveAudit:
	default:
		return refuse.New(CodeCommandUnknown, "command file: command is not one of %s, %s, %s, %s",
			evidence.CommandPreflight, evidence.CommandApply, evidence.CommandReceiptAudit, evidence.CommandLiveAudit)
	}
	paths := []struct{ name, p string }{
		{"store", c.Store}, {"manifest.path", c.Manifest.Path}, {"lockReport.path", c.LockReport.Path},
		{"kubeconfig.path", c.Kubeconfig.Path}, {"kubectl.path", c.Kubectl.Path},
	}
	for _, p := range paths {
		if p.p == "" || !filepath.IsAbs(p.p) || filepath.Clean(p.p) != p.p {
			return refuse.New(CodeCommandPath, "command file: %s is not an absolute clean path", p.name)
		}
	}
	digests := []struct {
		name string
		d    digest.Digest
	}{
		{"manifest.digest", c.Manifest.Digest}, {"lockReport.digest", c.LockReport.Digest},
		{"kubeconfig.digest", c.Kubeconfig.Digest}, {"kubectl.digest", c.Kubectl.Digest},
	}
	if c.Preflight != nil {
		digests = append(digests, struct {
			name string
			d    digest.Digest
		}{"preflight", *c.Preflight})
	}
	if c.Receipt != nil {
		digests = append(digests, struct {
			name string
			d    digest.Digest
		}{"receipt", *c.Receipt})
	}
	for _, d := range digests {
		if _, err := evidence.ParseDigest(string(d.d)); err != nil {
			return refuse.New(CodeCommandDigest, "command file: %s is not a sha256 digest", d.name)
		}
	}
	if c.FieldManager != evidence.FieldManager {
		return refuse.New(CodeFieldManager, "command file: fieldManager must be %s", evidence.FieldManager)
	}
	if c.Kubeconfig.Context == "" {
		return refuse.New(CodeCommandField, "command file: kubeconfig.context is empty")
	}
	if err := CheckClusterUID("command file: expectedClusterUid", c.ExpectedClusterUID); err != nil {
		return err
	}
	if (c.Preflight != nil) != (c.Command == evidence.CommandApply) {
		return refuse.New(CodeCommandField, "command file: preflight must be present exactly for %s", evidence.CommandApply)
	}
	if (c.Receipt != nil) != (c.Command == evidence.CommandReceiptAudit || c.Command == evidence.CommandLiveAudit) {
		return refuse.New(CodeCommandField, "command file: receipt must be present exactly for %s and %s", evidence.CommandReceiptAudit, evidence.CommandLiveAudit)
	}
	return nil
}

// Expect refuses a command whose name is not want (a named subcommand given another command's file).
func (p *Parsed) Expect(want string) error {
	if p.Command.Command != want {
		return refuse.New(CodeCommandMismatch, "command file holds %s, not %s", p.Command.Command, want).
			WithHint("run this file with %s, or with ql3 run, which dispatches on the file's command", subcommandFor(p.Command.Command))
	}
	return nil
}

// subcommandFor names the ql3 subcommand that runs a command.
func subcommandFor(command string) string {
	switch command {
	case evidence.CommandPreflight:
		return "ql3 preflight"
	case evidence.CommandApply:
		return "ql3 apply"
	default:
		return "ql3 run"
	}
}
