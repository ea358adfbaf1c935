package ceremony

import (
	"bufio"
	"bytes"
	"regexp"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/verdict/kubeout"
)

// Reason codes of a failed server-side dry-run, classified from kubectl's stderr.
const (
	// CodeDryRunConflict: a field the manifest sets is owned by another field manager.
	CodeDryRunConflict refuse.Code = "DRYRUN_CONFLICT"
	// CodeDryRunValidation: strict server-side validation refused an object.
	CodeDryRunValidation refuse.Code = "DRYRUN_VALIDATION"
	// CodeDryRunNamespace: the target namespace does not exist.
	CodeDryRunNamespace refuse.Code = "DRYRUN_NAMESPACE_MISSING"
	// CodeDryRunFailed: the dry-run exited non-zero for any other reason.
	CodeDryRunFailed refuse.Code = "DRYRUN_FAILED"
)

// Resource names one manifest object the way kubectl prints it on stdout ("deployment.apps/web").
type Resource = kubeout.Resource

var (
	// One conflict: `conflict with "M" [with subresource "S"] [using V[ at T]]: .path`.
	reOneConflict = regexp.MustCompile(`Apply failed with 1 conflict: conflict with "([^"]*)"[^:]*:\s*(\S+)`)
	// Several: `Apply failed with N conflicts: conflicts with "M" ...:` then `- .path` lines.
	reManyConflicts = regexp.MustCompile(`Apply failed with \d+ conflicts: conflicts with "([^"]*)"`)
	reNamespace     = regexp.MustCompile(`namespaces "([^"]*)" not found`)
	// A server-side apply refuses an unknown field or a value of the wrong type while it builds
	// the typed patch, before validation proper: `failed to create typed patch object
	// (NS/NAME; GROUP/VERSION, Kind=KIND): .path: field not declared in schema`.
	reTypedPatch = regexp.MustCompile(`failed to create typed patch object \(([^;()]*); [^,()]*, Kind=([A-Za-z0-9]*)\): (\.\S*?):`)
)

// Conflict is what a conflicting dry-run names.
type Conflict struct {
	Resource string // "" when kubectl's output does not let us tell which object conflicted
	Field    string
	Manager  string
}

// parseConflict extracts the first conflict from kubectl's stderr.
func parseConflict(stderr []byte) (Conflict, bool) {
	if m := reOneConflict.FindSubmatch(stderr); m != nil {
		return Conflict{Manager: string(m[1]), Field: string(m[2])}, true
	}
	if loc := reManyConflicts.FindSubmatchIndex(stderr); loc != nil {
		c := Conflict{Manager: string(stderr[loc[2]:loc[3]])}
		sc := bufio.NewScanner(bytes.NewReader(stderr[loc[1]:]))
		for sc.Scan() {
			if f, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "- "); ok {
				c.Field = f
				break
			}
		}
		return c, true
	}
	return Conflict{}, false
}

// conflictingResource is the first manifest object that kubectl did not report as applied on
// stdout: kubectl reports objects in manifest order and the conflicting one is missing.
func conflictingResource(stdout []byte, objects []Resource) string {
	for _, o := range objects {
		name := o.String()
		if !bytes.Contains(stdout, []byte(name+" ")) {
			return name
		}
	}
	return ""
}

// classifyDryRun turns a failed dry-run (non-zero exit) into a refusal. Only low-sensitivity facts
// parsed from stderr (resource, field path, manager, namespace) reach the message, which points at
// the stored stderr (errDigest). The dry-run's own causes (conflict, missing namespace,
// validation) come first; then the causes any step can have (kubeout.Classify); else DRYRUN_FAILED.
func classifyDryRun(step string, exit int, stdout, stderr []byte, errDigest digest.Digest, objects []Resource) *refuse.Error {
	see := kubeout.StoreRef(errDigest)
	if c, ok := parseConflict(stderr); ok {
		c.Resource = conflictingResource(stdout, objects)
		res := c.Resource
		if res == "" {
			res = "an object of the manifest"
		}
		return refuse.New(CodeDryRunConflict, "%s: %s field %s is owned by field manager %q (%s)", step, res, c.Field, c.Manager, see).
			WithHint("an earlier apply with another field manager (for example a bare kubectl apply) still owns it; hand the field over deliberately, then run the preflight again")
	}
	if m := reNamespace.FindSubmatch(stderr); m != nil {
		return refuse.New(CodeDryRunNamespace, "%s: namespace %q does not exist (%s)", step, string(m[1]), see).
			WithHint("create the namespace first: ql3 never creates it")
	}
	if m := reTypedPatch.FindSubmatch(stderr); m != nil {
		return refuse.New(CodeDryRunValidation, "%s: strict server-side validation refused %s %s field %s (exit %d, %d bytes of stderr stored; %s)",
			step, refuse.Ident(string(m[2])), refuse.Ident(string(m[1])), refuse.Ident(string(m[3])), exit, len(stderr), see)
	}
	// --validate=strict makes kubectl download the server's OpenAPI schema first; when it cannot
	// (the server down, silent or failing), kubectl says "error validating data: failed to
	// download openapi: <cause>": no validation verdict, the cause is the transport's or the server's.
	if !bytes.Contains(stderr, []byte("failed to download openapi")) {
		for _, s := range []string{"strict decoding error", "error validating", "is invalid", "unknown field", "duplicate field", "BadRequest"} {
			if bytes.Contains(stderr, []byte(s)) {
				return refuse.New(CodeDryRunValidation, "%s: strict server-side validation refused the manifest (exit %d, %d bytes of stderr stored; %s)", step, exit, len(stderr), see)
			}
		}
	}
	if c := kubeout.Classify(stderr); c.Code != "" {
		return c.Refusal(step, exit, errDigest)
	}
	return refuse.New(CodeDryRunFailed, "%s: kubectl exited %d (%d bytes of stderr stored; %s)", step, exit, len(stderr), see)
}
