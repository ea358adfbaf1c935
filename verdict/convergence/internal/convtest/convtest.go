// Package convtest holds what the convergence tests share: reading a fixture manifest into
// manifest.Objects, and the image authorities a lock would derive from it.
//
// The convergence verifier takes manifest.Objects and lock.Authority values from the lock
// verifier; its tests build them here so that they exercise convergence alone, with fixtures
// whose lock and live state can be made to disagree on purpose.
package convtest

import (
	"fmt"

	"github.com/qinglong/ql3/evidence/lock"
	"github.com/qinglong/ql3/evidence/manifest"
)

// ReleaseAnnotations are the five lock report annotation keys.
var ReleaseAnnotations = []string{"qinglong.io/release-version", "qinglong.io/catalog-digest",
	"qinglong.io/catalog-commit", "qinglong.io/release-set", "qinglong.io/role"}

// Objects reads a manifest with the ceremony's own parser, manifest.Parse, so that the tests see
// exactly the objects the ceremony hands to Verify.
func Objects(b []byte) ([]manifest.Object, error) {
	objs, err := manifest.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("convtest: %w", err)
	}
	return objs, nil
}

// MustObjects is Objects for fixtures that are known to be good.
func MustObjects(b []byte) []manifest.Object {
	objs, err := Objects(b)
	if err != nil {
		panic(err)
	}
	return objs
}

// Authorities returns the image authorities of the Deployments among objs, as lock.Verify reports
// them: role from qinglong.io/role, the five release annotations with the manifest's values, and
// every container and init container with its image.
func Authorities(objs []manifest.Object) []lock.Authority {
	var out []lock.Authority
	for _, o := range objs {
		if o.Kind != "Deployment" {
			continue
		}
		anns, _ := dig(o.Fields, "metadata", "annotations").(map[string]any)
		a := lock.Authority{ObjectIndex: o.Index, APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace,
			Name: o.Name, PodSpecPath: []string{"spec", "template", "spec"}, Annotations: map[string]string{}}
		a.Role, _ = anns["qinglong.io/role"].(string)
		for _, k := range ReleaseAnnotations {
			a.Annotations[k], _ = anns[k].(string)
		}
		spec, _ := dig(o.Fields, "spec", "template", "spec").(map[string]any)
		for _, field := range []string{"initContainers", "containers"} {
			list, _ := spec[field].([]any)
			for _, c := range list {
				cm, _ := c.(map[string]any)
				name, _ := cm["name"].(string)
				image, _ := cm["image"].(string)
				a.Containers = append(a.Containers, lock.Container{Field: field, Name: name, Image: image})
			}
		}
		out = append(out, a)
	}
	return out
}

func dig(v any, path ...string) any {
	for _, k := range path {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}
