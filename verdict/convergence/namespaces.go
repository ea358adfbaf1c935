package convergence

import (
	"fmt"
	"slices"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/manifest"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/verdict/argv"
)

// Reason codes of the namespace read (`kubectl get namespace A B … -o=json`), which reads the
// namespaces the applied objects live in and the manifest does not hold itself.
const (
	// CodeNamespaceTerminating: a namespace that holds objects of the release is being deleted
	// (metadata.deletionTimestamp is set, or status.phase is Terminating): its objects will go
	// with it, so they have not converged to anything lasting.
	CodeNamespaceTerminating refuse.Code = "CONVERGENCE_NAMESPACE_TERMINATING"
	// CodeNamespaceRead: the namespace read exited non-zero, or its stdout is not exactly one
	// Namespace per name it asked for, in that order, each with a name, a uid and a phase of
	// Active or Terminating; or a live object's namespace is not a DNS label.
	CodeNamespaceRead refuse.Code = "CONVERGENCE_NAMESPACE_READ"
)

// Namespace is one namespace as the namespace read shows it.
type Namespace struct {
	Name        string
	UID         string
	Phase       string // Active or Terminating
	Terminating bool   // deletionTimestamp set or phase Terminating
}

// OutsideNamespaces returns, in ascending order and without repeats, the namespaces the live
// objects found live in (their metadata.namespace as read, so an object the manifest left without
// a namespace counts in the one the server put it in) that the manifest does not hold as a v1
// Namespace object: those the convergence read does not already show. A Namespace the manifest
// holds is judged by the convergence read itself (a deletionTimestamp is
// CONVERGENCE_OBJECT_TERMINATING). live holds one entry per object found; missing ones (no uid)
// are skipped: they have not converged anyway.
func OutsideNamespaces(objects []manifest.Object, live []evidence.LiveObject) ([]string, error) {
	held := map[string]bool{}
	for i := range objects {
		if o := &objects[i]; o.Kind == "Namespace" && group(o.APIVersion) == "" {
			held[o.Name] = true
		}
	}
	seen := map[string]bool{}
	var out []string
	for _, l := range live {
		if l.UID == "" || l.Namespace == "" || held[l.Namespace] || seen[l.Namespace] {
			continue
		}
		if !argv.ValidOperands([]string{l.Namespace}) {
			return nil, refuse.New(CodeNamespaceRead, "live object %s %s is in namespace %s, which is not a DNS label", l.Kind, refuse.Ident(l.Name), refuse.Ident(l.Namespace))
		}
		seen[l.Namespace] = true
		out = append(out, l.Namespace)
	}
	slices.Sort(out)
	if len(out) > argv.MaxOperands {
		return nil, refuse.New(CodeNamespaceRead, "the objects live in %d namespaces the manifest does not hold, more than the %d one read names", len(out), argv.MaxOperands)
	}
	return out, nil
}

// ReadNamespaces parses the stdout of the namespace read of names (argv.ValidOperands): exactly
// one v1 Namespace per name, in the order asked (kubectl prints one object for one name and a
// List for more), each with a usable uid and a phase of Active or Terminating.
func ReadNamespaces(names []string, stdout []byte) ([]Namespace, error) {
	if !argv.ValidOperands(names) {
		return nil, refuse.New(CodeNamespaceRead, "%d namespace names that are not an ascending list of DNS labels", len(names))
	}
	items, err := decodeOutput(stdout)
	if err != nil {
		return nil, refuse.Wrap(CodeNamespaceRead, err, "namespace read")
	}
	if len(items) != len(names) {
		return nil, refuse.New(CodeNamespaceRead, "namespace read shows %d objects for the %d namespaces it names", len(items), len(names))
	}
	out := make([]Namespace, len(names))
	for i, it := range items {
		bad := func(what string) error {
			return refuse.New(CodeNamespaceRead, "namespace read item %d (namespace %s): %s", i, names[i], what)
		}
		meta, _ := it["metadata"].(map[string]any)
		if it["apiVersion"] != "v1" || it["kind"] != "Namespace" || meta == nil {
			return nil, bad("not a v1 Namespace with metadata")
		}
		if meta["name"] != names[i] {
			return nil, bad("another namespace's name")
		}
		ns := Namespace{Name: names[i]}
		var ok bool
		if ns.UID, ok = identifier(meta["uid"]); !ok {
			return nil, bad("no usable metadata.uid")
		}
		status, _ := it["status"].(map[string]any)
		ns.Phase, _ = status["phase"].(string)
		if ns.Phase != "Active" && ns.Phase != "Terminating" {
			return nil, bad("status.phase is neither Active nor Terminating")
		}
		_, deleting := meta["deletionTimestamp"]
		ns.Terminating = deleting || ns.Phase == "Terminating"
		out[i] = ns
	}
	return out, nil
}

// CheckNamespaces is the apply's verdict on the namespace read: the first namespace that is
// Terminating refuses.
func CheckNamespaces(nss []Namespace) error {
	for _, ns := range nss {
		if ns.Terminating {
			return terminating(ns)
		}
	}
	return nil
}

func terminating(ns Namespace) error {
	return refuse.New(CodeNamespaceTerminating, "namespace %s (uid %s, phase %s) is being deleted: the release's objects in it will go with it",
		ns.Name, ns.UID, ns.Phase).
		WithHint("a finalizer holds the namespace; once it is gone, recreate the namespace and apply the release again (or apply it into another namespace)")
}

// JudgeNamespaces marks every finding of an object in a Terminating namespace that has otherwise
// converged (or only gained fields from other managers) as unreadable with
// CONVERGENCE_NAMESPACE_TERMINATING: the object exists now but is being deleted with its
// namespace. Findings that have not converged for their own reason keep it.
func JudgeNamespaces(fs []Finding, nss []Namespace) {
	byName := make(map[string]Namespace, len(nss))
	for _, ns := range nss {
		byName[ns.Name] = ns
	}
	for i := range fs {
		f := &fs[i]
		ns, ok := byName[f.Object.Namespace]
		if !ok || !ns.Terminating || (f.Verdict != evidence.VerdictConverged && f.Verdict != evidence.VerdictAddedByOther) {
			continue
		}
		f.Verdict, f.Code, f.Path, f.Manager, f.Live, f.Expected = evidence.VerdictUnreadable, CodeNamespaceTerminating, "", "", "", ""
		f.Detail = fmt.Sprintf("namespace %s (uid %s, phase %s) is being deleted", ns.Name, ns.UID, ns.Phase)
	}
}

// FoundObjects returns the identities of the objects a live read found (UID set), for
// OutsideNamespaces.
func FoundObjects(fs []Finding) []evidence.LiveObject {
	out := make([]evidence.LiveObject, 0, len(fs))
	for _, f := range fs {
		if f.Object.UID != "" {
			out = append(out, f.Object)
		}
	}
	return out
}
