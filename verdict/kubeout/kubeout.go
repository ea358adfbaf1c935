// Package kubeout reads the kubectl outputs that ql3 bases a verdict on: the kube-system identity
// read and the per-object lines of a server-side apply. The ceremony judges the live output with
// it and the offline auditor judges the stored output with it, so both reach the same verdict
// from the same bytes.
package kubeout

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// Reason codes of kubectl output checks.
const (
	// CodeIdentityOutput: the identity read's output is not exactly the kube-system Namespace with a UID.
	CodeIdentityOutput refuse.Code = "IDENTITY_READ_FAILED"
	// CodeApplyOutput: a successful server-side apply or dry-run did not report exactly one
	// "serverside-applied" line per manifest object, in manifest order.
	CodeApplyOutput refuse.Code = "APPLY_OUTPUT_UNEXPECTED"
)

// MaxIdentityOutput bounds the identity read's stdout; a Namespace object is well under 2 KiB.
const MaxIdentityOutput = 64 << 10

// reUID is the form the API server gives metadata.uid (a UUID); anything else is not an identity.
var reUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// NamespaceUID returns the UID of the kube-system Namespace printed by
// `kubectl get namespace kube-system -o=json`. The output must be one strictly valid JSON object
// (no duplicate keys, which could show a reviewer one UID and us another).
func NamespaceUID(stdout []byte) (string, error) {
	if len(stdout) > MaxIdentityOutput {
		return "", refuse.New(CodeIdentityOutput, "identity read printed %d bytes, more than %d", len(stdout), MaxIdentityOutput)
	}
	if err := evidence.Validate(stdout); err != nil {
		return "", refuse.Wrap(CodeIdentityOutput, err, "identity read output is not strict json")
	}
	var ns struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(stdout, &ns); err != nil {
		return "", refuse.New(CodeIdentityOutput, "identity read output is not a json object")
	}
	if ns.APIVersion != "v1" || ns.Kind != "Namespace" || ns.Metadata.Name != "kube-system" {
		return "", refuse.New(CodeIdentityOutput, "identity read output is not the v1 Namespace kube-system")
	}
	if !reUID.MatchString(ns.Metadata.UID) {
		return "", refuse.New(CodeIdentityOutput, "identity read output has no uuid metadata.uid")
	}
	return ns.Metadata.UID, nil
}

// Resource names one manifest object.
type Resource struct {
	APIVersion, Kind, Namespace, Name string
}

// String is kubectl's "kind.group/name" form: lower-case kind, group omitted for the core group.
func (r Resource) String() string {
	k := strings.ToLower(r.Kind)
	if i := strings.Index(r.APIVersion, "/"); i > 0 {
		k += "." + r.APIVersion[:i]
	}
	return k + "/" + r.Name
}

// Applied checks the stdout of a successful `kubectl apply --server-side` (dryRun: with
// --dry-run=server): exactly one line "<kind.group>/<name> serverside-applied" per object, with the
// suffix " (server dry run)" for a dry-run, in manifest order, and nothing else. Two objects of one
// kind and name in different namespaces print the same line; order and count still bind them.
func Applied(stdout []byte, objects []Resource, dryRun bool) error {
	suffix := " serverside-applied"
	if dryRun {
		suffix += " (server dry run)"
	}
	lines := strings.Split(string(bytes.TrimSuffix(stdout, []byte("\n"))), "\n")
	if len(stdout) == 0 {
		lines = nil
	}
	if len(lines) != len(objects) {
		return refuse.New(CodeApplyOutput, "apply reported %d lines for %d manifest objects", len(lines), len(objects))
	}
	for i, o := range objects {
		if lines[i] != o.String()+suffix {
			return refuse.New(CodeApplyOutput, "apply line %d does not report %s%s", i+1, o.String(), suffix)
		}
	}
	return nil
}
