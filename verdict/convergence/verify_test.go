package convergence_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/verdict/convergence"
)

// TestCaptured replays every output captured from the real cluster (see testdata/README.md).
func TestCaptured(t *testing.T) {
	vectors := []struct {
		out, manifest string      // captured stdout and the manifest applied before it
		code          refuse.Code // expected code; "" means it converges
		names         string      // a string the refusal must contain
	}{
		{"live-list.json", "manifest.yaml", "", ""},
		{"live-single.json", "configmap.yaml", "", ""},
		{"live-count.json", "manifest.yaml", convergence.CodeObjectCount, "6 objects, the manifest 7"},
		{"live-terminating.json", "manifest.yaml", convergence.CodeObjectTerminating, "ConfigMap/conv-16/qinglong-config"},
		{"live-field-not-owned.json", "manifest.yaml", convergence.CodeFieldNotOwned, "field data.QL_PORT is not owned by manager qinglong3-catalog-lock with operation Apply; owned by other (Apply)"},
		{"live-image-mismatch.json", "manifest.yaml", convergence.CodeImageMismatch, "spec.template.spec.containers[name=web].image"},
		{"live-image-not-owned.json", "manifest.yaml", convergence.CodeImageNotOwned, "owned by kubectl-set (Update)"},
	}
	for _, v := range vectors {
		t.Run(v.out, func(t *testing.T) {
			t.Parallel()
			c := load(t, v.out, v.manifest)
			res, err := convergence.Verify(c.input())
			if got := refuse.CodeOf(err); got != v.code {
				t.Fatalf("code %q, want %q (%v)", got, v.code, err)
			}
			if err != nil {
				if !strings.Contains(err.Error(), v.names) {
					t.Fatalf("refusal does not contain %q: %v", v.names, err)
				}
				return
			}
			if len(res.Objects) != len(c.objs) {
				t.Fatalf("%d objects", len(res.Objects))
			}
			for i, lo := range res.Objects {
				o := c.objs[i]
				if lo.APIVersion != o.APIVersion || lo.Kind != o.Kind || lo.Name != o.Name || lo.Namespace != o.Namespace ||
					len(lo.UID) != 36 || lo.ResourceVersion == "" {
					t.Errorf("object %d: %+v", i, lo)
				}
			}
		})
	}
}

// TestSingleAndListForms: kubectl prints a List for -f and a bare object for one named object;
// both carry the same proof.
func TestSingleAndListForms(t *testing.T) {
	c := load(t, "live-single.json", "configmap.yaml")
	obj := decode(t, c.out)
	list := map[string]any{"apiVersion": "v1", "kind": "List", "items": []any{obj}, "metadata": map[string]any{"resourceVersion": ""}}
	for name, b := range map[string][]byte{"bare": c.out, "list": encode(t, list), "list without metadata": encode(t, map[string]any{
		"apiVersion": "v1", "kind": "List", "items": []any{obj}})} {
		c.out = b
		res, err := convergence.Verify(c.input())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.Objects[0].UID != at(obj, "metadata", "uid") {
			t.Fatalf("%s: uid %q", name, res.Objects[0].UID)
		}
	}
}

// TestOutputText covers malformed stdout bytes.
func TestOutputText(t *testing.T) {
	good := readFile(t, "live-list.json")
	vectors := []struct {
		name  string      // what is wrong
		out   []byte      // the stdout
		cause refuse.Code // the strict parser's code wrapped inside, "" when none
	}{
		{"empty", nil, ""},
		{"whitespace", []byte(" \n\t"), ""},
		{"not json", []byte("Error from server (Forbidden)"), evidence.CodeInvalidJSON},
		{"null", []byte("null"), ""},
		{"array", []byte("[]"), ""},
		{"string", []byte(`"List"`), ""},
		{"number", []byte("7"), ""},
		{"trailing garbage", append(bytes.Clone(good), 'x'), evidence.CodeInvalidJSON},
		{"two documents", append(bytes.Clone(good), good...), evidence.CodeInvalidJSON},
		{"truncated", good[:len(good)/2], evidence.CodeInvalidJSON},
		{"duplicate key", bytes.Replace(good, []byte(`"kind": "List"`), []byte(`"kind": "List", "kind": "List"`), 1), evidence.CodeDuplicateKey},
		{"duplicate key in an object", bytes.Replace(good, []byte(`"uid": `), []byte(`"uid": "x", "uid": `), 1), evidence.CodeDuplicateKey},
		{"invalid utf-8", bytes.Replace(good, []byte("qinglong-api"), []byte("qinglong-\xffpi"), 1), evidence.CodeInvalidUTF8},
		{"lone surrogate", bytes.Replace(good, []byte("qinglong-api"), []byte(`qinglong-\ud800`), 1), evidence.CodeLoneSurrogate},
		{"too deep", bytes.Replace(good, []byte(`"generation": 1`), []byte(`"generation": `+strings.Repeat("[", 70)+strings.Repeat("]", 70)), 1), evidence.CodeTooDeep},
		{"too large", append(bytes.Clone(good), bytes.Repeat([]byte(" "), convergence.MaxStdoutBytes)...), ""},
		{"hex number", bytes.Replace(good, []byte(`"generation": 1`), []byte(`"generation": 0x1`), 1), evidence.CodeInvalidNumber},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			c := load(t, "live-list.json", "manifest.yaml")
			c.out = v.out
			_, err := convergence.Verify(c.input())
			if got := refuse.CodeOf(err); got != convergence.CodeOutputInvalid {
				t.Fatalf("code %q (%v)", got, err)
			}
			if got := refuse.CodeOf(errors.Unwrap(err)); got != v.cause {
				t.Fatalf("cause %q, want %q (%v)", got, v.cause, err)
			}
		})
	}
}

func TestOutputTree(t *testing.T) {
	api := []any{"spec", "template", "spec", "containers", 0}
	apiSet := []any{"f:spec", "f:template", "f:spec", "f:containers", key("name", `"api"`)}
	ports := append(append([]any{}, api...), "ports", 0)
	vectors := []struct {
		name   string      // what the mutation does to the captured List
		mutate func(d any) // the mutation
		code   refuse.Code // expected code; "" means it still converges
		names  string      // a string the refusal must contain
	}{
		// Shape.
		{"List with an extra member", func(d any) { set(d, "x", "continue") }, convergence.CodeOutputInvalid, "continue"},
		{"List of another apiVersion", func(d any) { set(d, "v2", "apiVersion") }, convergence.CodeOutputInvalid, "apiVersion"},
		{"List items not an array", func(d any) { set(d, map[string]any{}, "items") }, convergence.CodeOutputInvalid, "items"},
		{"List item not an object", func(d any) { set(d, "x", "items", 2) }, convergence.CodeOutputInvalid, "item 2"},
		{"List metadata not an object", func(d any) { set(d, "x", "metadata") }, convergence.CodeOutputInvalid, "metadata"},
		// Count and identity.
		{"an object missing", func(d any) { set(d, at(d, "items").([]any)[:6], "items") }, convergence.CodeObjectCount, "6 objects, the manifest 7"},
		{"an object twice", func(d any) { set(d, append(at(d, "items").([]any), at(d, "items", 0)), "items") }, convergence.CodeObjectCount, "8 objects"},
		{"two objects swapped", func(d any) {
			a, b := at(d, "items", 0), at(d, "items", 1)
			set(d, b, "items", 0)
			set(d, a, "items", 1)
		}, convergence.CodeObjectMismatch, "object 0 (Deployment/ql3-conv/qinglong-api)"},
		{"another name", func(d any) { set(d, "qinglong-apx", item(0, "metadata", "name")...) }, convergence.CodeObjectMismatch, "object 0"},
		{"another namespace", func(d any) { set(d, "default", item(5, "metadata", "namespace")...) }, convergence.CodeObjectMismatch, "another namespace"},
		{"no namespace", func(d any) { del(d, item(5, "metadata", "namespace")...) }, convergence.CodeObjectMismatch, "another namespace"},
		{"namespace not a string", func(d any) { set(d, json.Number("1"), item(5, "metadata", "namespace")...) }, convergence.CodeObjectMismatch, "another namespace"},
		{"another kind", func(d any) { set(d, "StatefulSet", item(0, "kind")...) }, convergence.CodeObjectMismatch, "object 0"},
		{"another api group", func(d any) { set(d, "extensions/v1beta1", item(0, "apiVersion")...) }, convergence.CodeObjectMismatch, "api group"},
		{"no apiVersion", func(d any) { del(d, item(6, "apiVersion")...) }, convergence.CodeObjectMismatch, "object 6"},
		{"no metadata", func(d any) { del(d, item(6, "metadata")...) }, convergence.CodeObjectMismatch, "object 6"},
		{"another version of the group", func(d any) { set(d, "apps/v1beta2", item(0, "apiVersion")...) }, convergence.CodeFieldDiffers, "field apiVersion"},
		{"core group spelled with a slash", func(d any) { set(d, "/v1", item(6, "apiVersion")...) }, convergence.CodeFieldDiffers, "field apiVersion"},
		// UID, resourceVersion, deletion.
		{"no uid", func(d any) { del(d, item(6, "metadata", "uid")...) }, convergence.CodeUIDMissing, "ServiceAccount/ql3-conv/qinglong"},
		{"empty uid", func(d any) { set(d, "", item(6, "metadata", "uid")...) }, convergence.CodeUIDMissing, "object 6"},
		{"uid not a string", func(d any) { set(d, json.Number("7"), item(6, "metadata", "uid")...) }, convergence.CodeUIDMissing, "object 6"},
		{"uid with a control character", func(d any) { set(d, "a\nb", item(6, "metadata", "uid")...) }, convergence.CodeUIDMissing, "object 6"},
		{"uid too long", func(d any) { set(d, strings.Repeat("a", 257), item(6, "metadata", "uid")...) }, convergence.CodeUIDMissing, "object 6"},
		{"no resourceVersion", func(d any) { del(d, item(1, "metadata", "resourceVersion")...) }, convergence.CodeResourceVersionMissing, "object 1"},
		{"empty resourceVersion", func(d any) { set(d, "", item(1, "metadata", "resourceVersion")...) }, convergence.CodeResourceVersionMissing, "object 1"},
		{"being deleted", func(d any) { set(d, "2026-01-01T00:00:00Z", item(2, "metadata", "deletionTimestamp")...) }, convergence.CodeObjectTerminating, "object 2"},
		// managedFields well-formedness.
		{"managedFields not a list", func(d any) { set(d, map[string]any{}, item(4, "metadata", "managedFields")...) }, convergence.CodeManagedFieldsInvalid, "object 4"},
		{"entry not an object", func(d any) { set(d, []any{"x"}, item(4, "metadata", "managedFields")...) }, convergence.CodeManagedFieldsInvalid, "entry 0"},
		{"entry without manager", func(d any) { del(d, item(4, "metadata", "managedFields", 0, "manager")...) }, convergence.CodeManagedFieldsInvalid, "manager"},
		{"operation not a string", func(d any) { set(d, true, item(4, "metadata", "managedFields", 0, "operation")...) }, convergence.CodeManagedFieldsInvalid, "operation"},
		{"fieldsType FieldsV2", func(d any) { set(d, "FieldsV2", item(4, "metadata", "managedFields", 0, "fieldsType")...) }, convergence.CodeManagedFieldsInvalid, "fieldsType"},
		{"no fieldsV1", func(d any) { del(d, item(4, "metadata", "managedFields", 0, "fieldsV1")...) }, convergence.CodeManagedFieldsInvalid, "fieldsV1"},
		{"our Apply entry twice", func(d any) {
			mf := at(d, item(4, "metadata", "managedFields")...).([]any)
			set(d, append(mf, mf[0]), item(4, "metadata", "managedFields")...)
		}, convergence.CodeManagedFieldsInvalid, "repeat"},
		{"member without prefix", func(d any) { set(d, map[string]any{}, fields(4, "x:y")...) }, convergence.CodeManagedFieldsInvalid, "prefix"},
		{"member . not empty", func(d any) {
			set(d, map[string]any{"f:x": map[string]any{}}, fields(4, "f:spec", "f:ports", key("port", "80", "protocol", `"TCP"`), ".")...)
		}, convergence.CodeManagedFieldsInvalid, `"."`},
		{"set node not an object", func(d any) { set(d, "x", fields(4, "f:spec", "f:selector")...) }, convergence.CodeManagedFieldsInvalid, "set node"},
		{"k: member not json", func(d any) { set(d, map[string]any{}, fields(4, "f:spec", "f:ports", "k:{port:80}")...) }, convergence.CodeManagedFieldsInvalid, "k: member"},
		{"k: member not an object", func(d any) { set(d, map[string]any{}, fields(4, "f:spec", "f:ports", "k:80")...) }, convergence.CodeManagedFieldsInvalid, "k: member"},
		{"k: member with a duplicate key", func(d any) {
			set(d, map[string]any{}, fields(4, "f:spec", "f:ports", `k:{"port":80,"port":81}`)...)
		}, convergence.CodeManagedFieldsInvalid, "duplicate"},
		{"k: members naming one key twice", func(d any) {
			set(d, map[string]any{}, fields(4, "f:spec", "f:ports", `k:{"protocol":"TCP","port":80}`)...)
		}, convergence.CodeManagedFieldsInvalid, "same key"},
		{"v: member not json", func(d any) { set(d, map[string]any{}, fields(5, "f:metadata", "f:finalizers", "v:x")...) }, convergence.CodeManagedFieldsInvalid, "v: member"},
		{"v: members naming one value twice", func(d any) {
			set(d, map[string]any{}, fields(5, "f:metadata", "f:finalizers", `v:"qinglong.io\/keep"`)...)
		}, convergence.CodeManagedFieldsInvalid, "same value"},
		{"i: member not a position", func(d any) { set(d, map[string]any{}, fields(4, "f:spec", "f:ports", "i:01")...) }, convergence.CodeManagedFieldsInvalid, "i: member"},
		{"i: and k: members for one element", func(d any) {
			set(d, map[string]any{"f:port": map[string]any{}}, fields(4, "f:spec", "f:ports", "i:0")...)
		}, convergence.CodeManagedFieldsInvalid, "ambiguous"},
		{"too many entries", func(d any) {
			mf := make([]any, 1001)
			for i := range mf {
				mf[i] = map[string]any{"manager": fmt.Sprint("m", i), "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": map[string]any{}}
			}
			set(d, mf, item(6, "metadata", "managedFields")...)
		}, convergence.CodeManagedFieldsInvalid, "1001 entries"},
		{"too many sets of key fields", func(d any) {
			ps := at(d, fields(4, "f:spec", "f:ports")...).(map[string]any)
			for i := range 64 {
				ps[fmt.Sprintf(`k:{"f%d":1}`, i)] = map[string]any{}
			}
		}, convergence.CodeManagedFieldsInvalid, "more than 64 sets"},
		// Values.
		{"a field removed", func(d any) { del(d, item(5, "data", "QL_PORT")...) }, convergence.CodeFieldMissing, "data.QL_PORT"},
		{"a field changed", func(d any) { set(d, "5701", item(5, "data", "QL_PORT")...) }, convergence.CodeFieldDiffers, "data.QL_PORT: the live value differs"},
		{"a field of another type", func(d any) { set(d, "0", item(0, "spec", "replicas")...) }, convergence.CodeFieldDiffers, "json string, the manifest's a number"},
		{"a map turned into a string", func(d any) { set(d, "x", item(5, "data")...) }, convergence.CodeFieldDiffers, "field data"},
		{"a list turned into a map", func(d any) { set(d, map[string]any{}, item(0, append(api, "args")...)...) }, convergence.CodeFieldDiffers, "args"},
		{"a list grown", func(d any) {
			env := at(d, item(0, append(api, "env")...)...).([]any)
			set(d, append(env, map[string]any{"name": "X", "value": "1"}), item(0, append(api, "env")...)...)
		}, convergence.CodeFieldDiffers, "containers[name=api].env: the live list has 3 elements, the manifest's 2"},
		{"a list shrunk", func(d any) {
			set(d, []any{"serve"}, item(0, append(api, "args")...)...)
		}, convergence.CodeFieldDiffers, "args"},
		{"a set element changed", func(d any) { set(d, []any{"example.com/other"}, item(5, "metadata", "finalizers")...) }, convergence.CodeFieldDiffers, "metadata.finalizers[0]"},
		{"an annotation key with dots changed on a non-authority field path", func(d any) {
			set(d, "x", item(4, "metadata", "labels", "app.kubernetes.io/name")...)
		}, convergence.CodeFieldDiffers, `metadata.labels["app.kubernetes.io/name"]`},
		// Numbers compare by exact decimal value.
		{"replicas written 0.0", func(d any) { set(d, json.Number("0.0"), item(0, "spec", "replicas")...) }, "", ""},
		{"replicas written -0", func(d any) { set(d, json.Number("-0"), item(0, "spec", "replicas")...) }, "", ""},
		{"grace period written 2e1", func(d any) {
			set(d, json.Number("2.0E+1"), item(0, "spec", "template", "spec", "terminationGracePeriodSeconds")...)
		}, "", ""},
		{"grace period 20.5", func(d any) {
			set(d, json.Number("20.5"), item(0, "spec", "template", "spec", "terminationGracePeriodSeconds")...)
		}, convergence.CodeFieldDiffers, "terminationGracePeriodSeconds"},
		{"grace period 20.000000000000000001", func(d any) {
			set(d, json.Number("20.000000000000000001"), item(0, "spec", "template", "spec", "terminationGracePeriodSeconds")...)
		}, convergence.CodeFieldDiffers, "terminationGracePeriodSeconds"},
		{"replicas 1", func(d any) { set(d, json.Number("1"), item(0, "spec", "replicas")...) }, convergence.CodeFieldDiffers, "spec.replicas"},
		// Ownership.
		{"a leaf dropped from our set", func(d any) { del(d, fields(5, "f:data", "f:QL_PORT")...) }, convergence.CodeFieldNotOwned, "data.QL_PORT is not owned by manager qinglong3-catalog-lock with operation Apply; owned by no manager"},
		{"a leaf moved to another manager", func(d any) {
			del(d, fields(5, "f:data", "f:QL_PORT")...)
			mf := at(d, item(5, "metadata", "managedFields")...).([]any)
			set(d, append(mf, map[string]any{"manager": "helm", "operation": "Update", "fieldsType": "FieldsV1",
				"fieldsV1": map[string]any{"f:data": map[string]any{"f:QL_PORT": map[string]any{}}}}), item(5, "metadata", "managedFields")...)
		}, convergence.CodeFieldNotOwned, "owned by helm (Update)"},
		{"our manager under another name", func(d any) { set(d, "qinglong3-catalog-lock2", item(5, "metadata", "managedFields", 0, "manager")...) }, convergence.CodeFieldNotOwned, "owned by qinglong3-catalog-lock2 (Apply)"},
		{"our manager with operation Update", func(d any) { set(d, "Update", item(5, "metadata", "managedFields", 0, "operation")...) }, convergence.CodeFieldNotOwned, "owned by qinglong3-catalog-lock (Update)"},
		{"our manager through a subresource", func(d any) { set(d, "status", item(5, "metadata", "managedFields", 0, "subresource")...) }, convergence.CodeFieldNotOwned, "subresource status"},
		{"another manager owning a field inside one we own as a whole", func(d any) {
			mf := at(d, item(4, "metadata", "managedFields")...).([]any)
			set(d, append(mf, map[string]any{"manager": "other", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": map[string]any{
				"f:spec": map[string]any{"f:selector": map[string]any{"f:app.kubernetes.io/component": map[string]any{}}}}}),
				item(4, "metadata", "managedFields")...)
		}, convergence.CodeFieldNotOwned, `spec.selector["app.kubernetes.io/component"] is not owned by manager qinglong3-catalog-lock with operation Apply; owned by other (Update)`},
		{"another manager co-owning a field we own as a whole", func(d any) {
			mf := at(d, item(4, "metadata", "managedFields")...).([]any)
			set(d, append(mf, map[string]any{"manager": "other", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": map[string]any{
				"f:spec": map[string]any{"f:selector": map[string]any{}}}}), item(4, "metadata", "managedFields")...)
		}, "", ""},
		{"an atomic map dropped", func(d any) { del(d, fields(4, "f:spec", "f:selector")...) }, convergence.CodeFieldNotOwned, `spec.selector["app.kubernetes.io/component"]`},
		// structured-merge-diff prunes a node whose last member goes, as in these two.
		{"a set element dropped", func(d any) { del(d, fields(5, "f:metadata")...) }, convergence.CodeFieldNotOwned, "metadata.finalizers[0]"},
		{"a list element's key no longer matching (protocol changed)", func(d any) { set(d, "UDP", item(0, append(ports, "protocol")...)...) }, convergence.CodeFieldNotOwned, "ports[name=http].containerPort"},
		{"a list element's key field removed", func(d any) { del(d, item(4, "spec", "ports", 0, "protocol")...) }, convergence.CodeFieldNotOwned, "spec.ports[name=http]"},
		// What convergence does not cover.
		{"a server default changed", func(d any) { set(d, "None", item(0, "spec", "template", "spec", "dnsPolicy")...) }, "", ""},
		{"a label the manifest does not set", func(d any) { set(d, "1", item(0, "metadata", "labels", "extra")...) }, "", ""},
		{"status changed", func(d any) { set(d, map[string]any{"replicas": json.Number("5")}, item(0, "status")...) }, "", ""},
		{"entries reordered with a co-owner", func(d any) {
			mf := at(d, item(5, "metadata", "managedFields")...).([]any)
			co := map[string]any{"manager": "other", "operation": "Apply", "fieldsType": "FieldsV1", "apiVersion": "v1",
				"fieldsV1": map[string]any{"f:data": map[string]any{"f:QL_PORT": map[string]any{}}}}
			set(d, append([]any{co}, mf...), item(5, "metadata", "managedFields")...)
		}, "", ""},
		{"k: member fields in another order", func(d any) {
			ps := at(d, fields(0, append(apiSet, "f:ports")...)...).(map[string]any)
			k := key("containerPort", "5700", "protocol", `"TCP"`)
			ps[`k:{"protocol":"TCP","containerPort":5.7e3}`] = ps[k]
			delete(ps, k)
		}, "", ""},
		{"entry apiVersion and time changed", func(d any) {
			set(d, "apps/v1beta2", item(0, "metadata", "managedFields", 0, "apiVersion")...)
			del(d, item(0, "metadata", "managedFields", 0, "time")...)
		}, "", ""},
		// Image authorities.
		{"an image changed", func(d any) { set(d, "ghcr.io/qinglong/api:latest", item(0, append(api, "image")...)...) }, convergence.CodeImageMismatch, "containers[name=api].image"},
		{"an image removed", func(d any) { del(d, item(0, append(api, "image")...)...) }, convergence.CodeImageMismatch, "containers[name=api].image"},
		{"a container renamed", func(d any) { set(d, "apx", item(0, append(api, "name")...)...) }, convergence.CodeImageMismatch, "container api appears 0 times"},
		{"a container added", func(d any) {
			cs := at(d, item(0, "spec", "template", "spec", "containers")...).([]any)
			set(d, append(cs, map[string]any{"name": "x", "image": "example.invalid/x"}), item(0, "spec", "template", "spec", "containers")...)
		}, convergence.CodeImageMismatch, "holds 2 containers, the lock 1"},
		{"an init container image changed", func(d any) {
			set(d, "example.invalid/x", item(2, "spec", "template", "spec", "initContainers", 0, "image")...)
		}, convergence.CodeImageMismatch, "initContainers[name=migrate].image"},
		{"the pod spec missing", func(d any) { del(d, item(3, "spec", "template", "spec")...) }, convergence.CodeImageMismatch, "spec.template.spec.containers holds 0 containers, the lock 1"},
		{"an image no longer ours", func(d any) { del(d, fields(0, append(apiSet, "f:image")...)...) }, convergence.CodeImageNotOwned, "containers[name=api].image is not owned"},
		{"a container element no longer ours", func(d any) {
			del(d, fields(0, "f:spec", "f:template", "f:spec", "f:containers")...)
		}, convergence.CodeImageNotOwned, "containers[name=api].image"},
		{"an annotation changed", func(d any) { set(d, "3.4.2", item(1, "metadata", "annotations", "qinglong.io/release-version")...) }, convergence.CodeAnnotationMismatch, `image authority scheduler (Deployment/ql3-conv/qinglong-scheduler): annotation metadata.annotations["qinglong.io/release-version"]`},
		{"an annotation removed", func(d any) { del(d, item(3, "metadata", "annotations", "qinglong.io/role")...) }, convergence.CodeAnnotationMismatch, "qinglong.io/role"},
		{"annotations removed", func(d any) { del(d, item(3, "metadata", "annotations")...) }, convergence.CodeAnnotationMismatch, "qinglong.io/catalog-commit"},
		{"an annotation no longer ours", func(d any) {
			del(d, fields(2, "f:metadata", "f:annotations", "f:qinglong.io/release-set")...)
		}, convergence.CodeAnnotationNotOwned, "qinglong.io/release-set"},
		{"no entry of ours on an authority", func(d any) { set(d, []any{}, item(0, "metadata", "managedFields")...) }, convergence.CodeImageNotOwned, "qinglong3-catalog-lock (no entry on this object)"},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			c := load(t, "live-list.json", "manifest.yaml")
			d := decode(t, c.out)
			v.mutate(d)
			c.out = encode(t, d)
			_, err := convergence.Verify(c.input())
			if got := refuse.CodeOf(err); got != v.code {
				t.Fatalf("code %q, want %q (%v)", got, v.code, err)
			}
			if err != nil && !strings.Contains(err.Error(), v.names) {
				t.Fatalf("refusal does not contain %q: %v", v.names, err)
			}
		})
	}
}
