package lock

import (
	"slices"
	"strconv"
	"strings"

	"github.com/qinglong/ql3/evidence/manifest"
	"github.com/qinglong/ql3/refuse"
)

// workload is a kind whose pod spec ql3 knows where to find.
type workload struct {
	apiVersion, kind string
	podSpec          []string
}

var workloads = []workload{
	{"v1", "Pod", []string{"spec"}},
	{"v1", "PodTemplate", []string{"template", "spec"}},
	{"v1", "ReplicationController", []string{"spec", "template", "spec"}},
	{"apps/v1", "Deployment", []string{"spec", "template", "spec"}},
	{"apps/v1", "StatefulSet", []string{"spec", "template", "spec"}},
	{"apps/v1", "DaemonSet", []string{"spec", "template", "spec"}},
	{"apps/v1", "ReplicaSet", []string{"spec", "template", "spec"}},
	{"batch/v1", "Job", []string{"spec", "template", "spec"}},
	{"batch/v1", "CronJob", []string{"spec", "jobTemplate", "spec", "template", "spec"}},
}

// Reason codes of the manifest's structure against the lock.
const (
	CodeResourceCount refuse.Code = "LOCK_RESOURCE_COUNT_MISMATCH"
	// CodeUnrecognisedWorkload: a pod spec where ql3 cannot tell it is one: a workload kind
	// under another apiVersion (or spelled in another case), or a container list or pod
	// template in a kind that is not a workload (a custom resource can carry a pod spec).
	CodeUnrecognisedWorkload refuse.Code = "LOCK_UNRECOGNISED_WORKLOAD"
	// CodePodSpecPath: a container list or pod template inside a workload but away from its
	// pod spec path.
	CodePodSpecPath refuse.Code = "LOCK_POD_SPEC_PATH"
	// CodeRoleDuplicate, CodeRoleOrder and CodeRoleUncovered: the image authorities are not
	// exactly one per role in role order.
	CodeRoleDuplicate refuse.Code = "LOCK_ROLE_DUPLICATE"
	CodeRoleOrder     refuse.Code = "LOCK_ROLE_ORDER"
	CodeRoleUncovered refuse.Code = "LOCK_ROLE_UNCOVERED"
)

// checkObjects applies every rule that relates the parsed manifest to the report and returns the
// image authorities in role order.
func checkObjects(r *report, objs []manifest.Object, raw []byte) ([]Authority, error) {
	if int64(len(objs)) != r.Manifest.Resources {
		return nil, refuse.New(CodeResourceCount, "lock report counts %d resources, the manifest holds %d", r.Manifest.Resources, len(objs))
	}
	var auths []Authority
	roleAt := map[string]int{}
	allowed := 0 // container image fields that name a lock image
	for i := range objs {
		o := &objs[i]
		w, err := classify(o)
		if err != nil {
			return nil, err
		}
		if err := checkPodShapes(o, w); err != nil {
			return nil, err
		}
		var a *Authority
		if w == nil {
			err = checkOtherAnnotations(r, o)
		} else {
			a, err = checkAuthority(r, o, w)
		}
		if err != nil {
			return nil, err
		}
		if err := scanObject(o, a); err != nil {
			return nil, err
		}
		if a == nil {
			continue
		}
		if j, dup := roleAt[a.Role]; dup {
			return nil, refuse.New(CodeRoleDuplicate, "%s and %s both claim role %s", desc(&objs[j]), desc(o), a.Role)
		}
		roleAt[a.Role] = i
		auths = append(auths, *a)
		allowed += len(a.Containers)
	}
	if len(auths) < len(r.Roles) {
		for _, role := range r.Roles {
			if _, ok := roleAt[role]; !ok {
				return nil, refuse.New(CodeRoleUncovered, "no image-authority resource has role %s", role)
			}
		}
	}
	for i, a := range auths {
		if a.Role != r.Roles[i] {
			return nil, refuse.New(CodeRoleOrder, "%s is image authority %d with role %s where role %s is required (order %q)",
				desc(&objs[a.ObjectIndex]), i, a.Role, r.Roles[i], r.Roles)
		}
	}
	if int64(len(auths)) != r.Manifest.ImageAuthorities {
		return nil, refuse.New(CodeAuthorityCount, "lock report counts %d image authorities, the manifest holds %d", r.Manifest.ImageAuthorities, len(auths))
	}
	if err := scanRaw(raw, allowed); err != nil {
		return nil, err
	}
	return auths, nil
}

// classify returns o's workload entry, nil for a kind that is not a workload, or a refusal for a
// workload kind ql3 does not recognise under o's apiVersion.
func classify(o *manifest.Object) (*workload, error) {
	for i := range workloads {
		w := &workloads[i]
		if o.Kind == w.kind && o.APIVersion == w.apiVersion {
			return w, nil
		}
	}
	for _, w := range workloads {
		if strings.EqualFold(o.Kind, w.kind) {
			return nil, refuse.New(CodeUnrecognisedWorkload, "%s: workload kind that is only recognised as %s %s", desc(o), w.apiVersion, w.kind)
		}
	}
	return nil, nil
}

var (
	containerLists = []string{"containers", "initContainers", "ephemeralContainers"}
	templateKeys   = []string{"template", "jobTemplate"}
)

// checkPodShapes finds every container list (a containers, initContainers or ephemeralContainers
// member whose value is not a string: a ConfigMap may name a file "containers"), every pod
// template (a template or jobTemplate mapping with a spec member) and every member named image
// in o. In a workload, lists and templates must sit exactly on its pod spec path and images only
// in its containers; anywhere else they are refused. Not counted as images: annotation and label
// names, and the file names of a ConfigMap.
func checkPodShapes(o *manifest.Object, w *workload) error {
	configMap := o.APIVersion == "v1" && o.Kind == "ConfigMap"
	return walkFields(o.Fields, func(path []string, e any) error {
		k := path[len(path)-1]
		_, isStr := e.(string)
		em, isMap := e.(map[string]any)
		_, hasSpec := em["spec"]
		shape := (slices.Contains(containerLists, k) && !isStr) || (slices.Contains(templateKeys, k) && isMap && hasSpec)
		// An image one level inside a container list is the container check's business
		// (checkAuthority refuses a list that is not a list of mappings).
		if k == "image" && !imageExempt(path[:len(path)-1], configMap) && (w == nil || !inContainerList(path, w.podSpec)) {
			at := render(path)
			if w == nil {
				return refuse.New(CodeUnrecognisedWorkload, "%s: image at %s in a kind that is not a recognised workload", desc(o), at)
			}
			return refuse.New(CodeImageOutsideContainer, "%s: image at %s outside a container of the pod spec at %s", desc(o), at, render(w.podSpec))
		}
		if shape {
			if w == nil {
				return refuse.New(CodeUnrecognisedWorkload, "%s: pod spec content at %s in a kind that is not a recognised workload", desc(o), render(path))
			}
			if !onPodSpecPath(path, w.podSpec) {
				return refuse.New(CodePodSpecPath, "%s: pod spec content at %s, away from the pod spec at %s", desc(o), render(path), render(w.podSpec))
			}
		}
		return nil
	})
}

// walkFields calls visit for every member value and list entry below a document's fields, each
// before what it holds, members in sorted name order, with the path to it: member names, and
// "[i]" for list entry i (a member may carry such a name too). path is valid only during the
// call. The walk stops at the first error visit returns and returns it.
func walkFields(fields map[string]any, visit func(path []string, v any) error) error {
	var path []string
	var walk func(v any) error
	step := func(k string, v any) error {
		path = append(path, k)
		if err := visit(path, v); err != nil {
			return err
		}
		if err := walk(v); err != nil {
			return err
		}
		path = path[:len(path)-1]
		return nil
	}
	walk = func(v any) error {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range sortedKeys(x) {
				if err := step(k, x[k]); err != nil {
					return err
				}
			}
		case []any:
			for i, e := range x {
				if err := step("["+strconv.Itoa(i)+"]", e); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(fields)
}

// imageExempt reports whether a member named image under parent path p is a name rather than an
// image: an annotation or label name, or a file of a ConfigMap.
func imageExempt(p []string, configMap bool) bool {
	if n := len(p); n > 0 && (p[n-1] == "annotations" || p[n-1] == "labels") {
		return true
	}
	return configMap && len(p) == 1 && (p[0] == "data" || p[0] == "binaryData")
}

// inContainerList reports whether at is podSpec + <container list> + <entry> + image.
func inContainerList(at, podSpec []string) bool {
	n := len(podSpec)
	return len(at) == n+3 && slices.Equal(at[:n], podSpec) && slices.Contains(containerLists, at[n]) && at[n+2] == "image"
}

// isContainerImage reports whether at is podSpec + <container list> + [i] + image.
func isContainerImage(at, podSpec []string) bool {
	return inContainerList(at, podSpec) && strings.HasPrefix(at[len(podSpec)+1], "[")
}

// onPodSpecPath reports whether at (ending in a container list or template key) is where pod
// spec p puts it: p + list, or a prefix of p that ends in a template key.
func onPodSpecPath(at, p []string) bool {
	last := at[len(at)-1]
	if slices.Contains(containerLists, last) {
		return len(at) == len(p)+1 && slices.Equal(at[:len(p)], p)
	}
	return len(at) < len(p) && slices.Equal(at, p[:len(at)])
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// render writes a field path for a message.
func render(p []string) string {
	var b strings.Builder
	b.WriteString("$")
	for _, k := range p {
		if strings.HasPrefix(k, "[") {
			b.WriteString(k)
			continue
		}
		b.WriteString(".")
		b.WriteString(refuse.Ident(k))
	}
	return b.String()
}

// desc names an object for a message.
func desc(o *manifest.Object) string {
	name := refuse.Ident(o.Name)
	if o.Namespace != "" {
		name = refuse.Ident(o.Namespace) + "/" + name
	}
	return "document " + strconv.Itoa(o.Index) + " (" + refuse.Ident(o.Kind) + " " + name + ")"
}
