package convergence

import (
	"slices"
	"strings"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// CodeAddedByOther: a live object holds a field, label or annotation the release does not set,
// owned by another manager (the live audit's added-by-other verdict).
const CodeAddedByOther refuse.Code = "CONVERGENCE_ADDED_BY_OTHER"

// maxAddDepth bounds the walk; the strict JSON reading already bounds nesting at 64.
const maxAddDepth = 64

// Addition is one field of a live object that another manager added: the release does not set
// it, our Apply entry does not own it, and a manager other than the system's (systemOwned) does.
type Addition struct {
	Path     string // rendered like the other findings' paths
	Manager  string // the managers that own it
	Live     string // its live value, short
	Security bool   // a pod-template field that weakens isolation (securityRelevant)
}

// additions walks the live object along every other manager's field set and returns each
// position another manager owns and ours does not, security-relevant ones first, then in walk
// order. A position is reported once, at the highest level another manager owns (a whole volume,
// a whole container), and not below it. Not compared, because no release sets them:
//   - status, and whatever a status or other subresource entry owns: status is the controllers';
//   - fields no managedFields entry owns: the server's defaults (dnsPolicy, a port's protocol)
//     are recorded in no field set, so they are owned by no manager;
//   - fields of systemOwned.
func additions(o map[string]any, lo *liveObject) []Addition {
	others := make([]*manager, 0, len(lo.managers))
	for _, m := range lo.managers {
		if m != lo.ours && m.subresource == "" {
			others = append(others, m)
		}
	}
	if len(others) == 0 {
		return nil
	}
	pos := make([]owner, len(others))
	for i, m := range others {
		pos[i] = rootOwner(m)
	}
	w := &addWalker{lo: lo, others: others, manifest: o}
	w.walk(lo.raw, nil, rootOwner(lo.ours), pos)
	slices.SortStableFunc(w.out, func(a, b Addition) int {
		switch {
		case a.Security && !b.Security:
			return -1
		case b.Security && !a.Security:
			return 1
		}
		return 0
	})
	return w.out
}

type addWalker struct {
	lo       *liveObject
	others   []*manager
	manifest map[string]any
	out      []Addition
}

func (w *addWalker) walk(live any, path fieldPath, ours owner, pos []owner) {
	if len(path) > maxAddDepth {
		return
	}
	// Ours as a whole (a leaf, an atomic field): nothing below is another's addition. Ours as a
	// list element (".") is not: another manager can own fields inside our container.
	if ours.whole && w.lo.consistent(ours, path, w.lo.ours) {
		return
	}
	oursHere := ours.whole || ours.n != nil
	var owners []string
	tracked := false
	for i, p := range pos {
		if p.whole || p.n != nil {
			tracked = true
		}
		claims := p.whole || (p.n != nil && p.n.self && !oursHere)
		if claims && w.lo.consistent(p, path, w.others[i]) && !systemOwned(w.others[i], path) {
			owners = append(owners, w.others[i].String())
		}
	}
	if !tracked {
		return
	}
	if len(owners) > 0 && len(path) > 0 {
		if _, set := manifestAt(w.manifest, path); !set {
			if len(owners) > 4 {
				owners = append(owners[:4], "...")
			}
			w.out = append(w.out, Addition{Path: path.String(), Manager: strings.Join(owners, ", "), Live: shown(live, true), Security: securityRelevant(path, live)})
			return
		}
	}
	switch l := live.(type) {
	case map[string]any:
		for _, k := range sortedKeys(l) {
			if len(path) == 0 && (k == "status" || k == "apiVersion" || k == "kind") {
				continue
			}
			next := make([]owner, len(pos))
			for i, p := range pos {
				next[i] = p.field(k, len(path)+1)
			}
			w.walk(l[k], path.key(k), ours.field(k, len(path)+1), next)
		}
	case []any:
		oursEl, err := ours.elements(l, len(path)+1)
		if err != nil {
			return
		}
		els := make([][]owner, len(pos))
		for i, p := range pos {
			if els[i], err = p.elements(l, len(path)+1); err != nil {
				return
			}
		}
		for j, e := range l {
			next := make([]owner, len(pos))
			for i := range pos {
				next[i] = els[i][j]
			}
			w.walk(e, path.index(j, e), oursEl[j], next)
		}
	}
}

// manifestAt returns the manifest's value at path, following list elements by the live index
// (lists of a converged object have the manifest's length).
func manifestAt(v any, path fieldPath) (any, bool) {
	for _, e := range path {
		if e.index < 0 {
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if v, ok = m[e.key]; !ok {
				return nil, false
			}
			continue
		}
		l, ok := v.([]any)
		if !ok || e.index >= len(l) {
			return nil, false
		}
		v = l[e.index]
	}
	return v, true
}

// systemOwned names the fields the control plane writes on objects a release applies, which are
// not drift although a manager other than ours owns them: the Deployment controller's revision
// annotation (kube-controller-manager, Update). Nothing else: a field manager's name is chosen by
// its client, so the exception is one manager, one operation and one field, never a whole entry.
func systemOwned(m *manager, path fieldPath) bool {
	return m.name == "kube-controller-manager" && m.operation == "Update" && len(path) == 3 &&
		path[0].key == "metadata" && path[1].key == "annotations" && path[2].key == "deployment.kubernetes.io/revision"
}

// securityRelevant reports an addition that weakens a pod's isolation: its path or a member of its
// live value (a whole volume or container another manager added) names host namespaces, host
// paths or ports, capabilities, privilege, the user, AppArmor or seccomp (fields and annotations).
func securityRelevant(path fieldPath, live any) bool {
	for _, e := range path {
		if e.index < 0 && securityKey(e.key) {
			return true
		}
	}
	return securityValue(live, 0)
}

func securityValue(v any, depth int) bool {
	if depth > maxAddDepth {
		return false
	}
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if securityKey(k) || securityValue(c, depth+1) {
				return true
			}
		}
	case []any:
		for _, c := range x {
			if securityValue(c, depth+1) {
				return true
			}
		}
	}
	return false
}

func securityKey(k string) bool {
	switch k {
	case "hostPID", "hostNetwork", "hostIPC", "hostUsers", "hostPath", "hostPort", "capabilities", "privileged",
		"allowPrivilegeEscalation", "procMount", "appArmorProfile", "seccompProfile", "seLinuxOptions", "runAsUser", "runAsNonRoot",
		"shareProcessNamespace":
		return true
	}
	return strings.HasPrefix(k, "container.apparmor.security.beta.kubernetes.io/") || strings.HasPrefix(k, "seccomp.security.alpha.kubernetes.io/")
}

// Additions lists the additions of every finding for the live-audit report: the security-relevant
// ones of every object first, then the others, each group in manifest order.
func Additions(fs []Finding) []evidence.LiveAddition {
	var out []evidence.LiveAddition
	for _, security := range []bool{true, false} {
		for _, f := range fs {
			for _, a := range f.Added {
				if a.Security == security {
					out = append(out, evidence.LiveAddition{APIVersion: f.Object.APIVersion, Kind: f.Object.Kind, Namespace: f.Object.Namespace,
						Name: f.Object.Name, Path: a.Path, Manager: a.Manager, Live: a.Live, Security: a.Security})
				}
			}
		}
	}
	return out
}
