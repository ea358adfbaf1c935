package convergence

import (
	"bytes"
	"strings"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/manifest"
	"github.com/qinglong/ql3/refuse"
)

// Reason codes of the output shape and object identity checks.
const (
	// CodeOutputInvalid: the stdout is empty, too large, not strictly valid JSON (duplicate keys,
	// invalid UTF-8, trailing data, ...), or neither one object nor a kubectl List of objects.
	CodeOutputInvalid refuse.Code = "CONVERGENCE_OUTPUT_INVALID"
	// CodeObjectCount: the read holds another number of objects than the manifest.
	CodeObjectCount refuse.Code = "CONVERGENCE_OBJECT_COUNT"
	// CodeObjectMismatch: the live object at a position is not the manifest object at that
	// position (API group, kind, name or namespace differ, or are missing).
	CodeObjectMismatch refuse.Code = "CONVERGENCE_OBJECT_MISMATCH"
	// CodeUIDMissing: a live object has no usable metadata.uid.
	CodeUIDMissing refuse.Code = "CONVERGENCE_UID_MISSING"
	// CodeResourceVersionMissing: a live object has no usable metadata.resourceVersion.
	CodeResourceVersionMissing refuse.Code = "CONVERGENCE_RESOURCE_VERSION_MISSING"
	// CodeObjectTerminating: a live object carries metadata.deletionTimestamp: it is being
	// deleted (held only by finalizers) and has not converged to anything lasting.
	CodeObjectTerminating refuse.Code = "CONVERGENCE_OBJECT_TERMINATING"
)

// maxIdentifierBytes bounds uid and resourceVersion: both end up in the receipt, and the API
// server's are a 36-byte UUID and a decimal counter.
const maxIdentifierBytes = 256

// decodeOutput parses the stdout strictly and returns its objects in order.
func decodeOutput(b []byte) ([]map[string]any, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, refuse.New(CodeOutputInvalid, "convergence read stdout is empty")
	}
	if len(b) > MaxStdoutBytes {
		return nil, refuse.New(CodeOutputInvalid, "convergence read stdout of %d bytes exceeds the limit of %d", len(b), MaxStdoutBytes)
	}
	// The strict parser proves what encoding/json would let pass silently: duplicate keys (it
	// keeps the last), invalid UTF-8 (it substitutes U+FFFD), lone surrogates, excessive nesting.
	// After it, encoding/json and the strict parser read the same document, so the strict parse
	// also gives the decoded value (what encoding/json with UseNumber would give) in one pass.
	top, err := evidence.DecodeJSON(b)
	if err != nil {
		return nil, refuse.Wrap(CodeOutputInvalid, err, "convergence read stdout is not strictly valid json")
	}
	obj, ok := top.(map[string]any)
	if !ok {
		return nil, refuse.New(CodeOutputInvalid, "convergence read stdout is a json %s, not an object", typeName(top))
	}
	if obj["kind"] != "List" {
		return []map[string]any{obj}, nil
	}
	// kubectl's List wrapper: apiVersion v1, kind List, items, and a metadata object.
	for k := range obj {
		if k != "apiVersion" && k != "kind" && k != "items" && k != "metadata" {
			return nil, refuse.New(CodeOutputInvalid, "convergence read List carries the unexpected member %s", refuse.Ident(k))
		}
	}
	if obj["apiVersion"] != "v1" {
		return nil, refuse.New(CodeOutputInvalid, "convergence read List does not have apiVersion v1")
	}
	if m, present := obj["metadata"]; present {
		if _, ok := m.(map[string]any); !ok {
			return nil, refuse.New(CodeOutputInvalid, "convergence read List metadata is a json %s, not an object", typeName(m))
		}
	}
	arr, ok := obj["items"].([]any)
	if !ok {
		return nil, refuse.New(CodeOutputInvalid, "convergence read List has no items array")
	}
	items := make([]map[string]any, len(arr))
	for i, it := range arr {
		if items[i], ok = it.(map[string]any); !ok {
			return nil, refuse.New(CodeOutputInvalid, "convergence read List item %d is a json %s, not an object", i, typeName(it))
		}
	}
	return items, nil
}

// liveObject is one live object with its identity established and managedFields parsed.
type liveObject struct {
	raw      map[string]any
	id       evidence.LiveObject
	res      string     // kind/namespace/name for messages
	managers []*manager // every managedFields entry, in order
	ours     *manager   // the entry of our field manager with operation Apply; nil when absent

	fieldManager string
	consistency  map[consistencyKey]bool // memo of liveObject.consistent
}

// identify matches live object it with manifest object o and parses its managedFields.
func identify(o *manifest.Object, it map[string]any, fieldManager string) (*liveObject, error) {
	res := resourceName(o.Kind, o.Namespace, o.Name)
	mismatch := func(what string) error {
		return refuse.New(CodeObjectMismatch, "object %d (%s): live object %s", o.Index, res, what).
			WithHint("kubectl get -f prints objects in manifest order; a different object here means the read is not of this manifest")
	}
	apiVersion, _ := it["apiVersion"].(string)
	kind, _ := it["kind"].(string)
	meta, _ := it["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	if kind != o.Kind || name != o.Name || group(apiVersion) != group(o.APIVersion) || apiVersion == "" {
		return nil, mismatch("has another api group, kind or name")
	}
	ns, hasNS := meta["namespace"]
	liveNS, isStr := ns.(string)
	if (hasNS && !isStr) || (o.Namespace != "" && liveNS != o.Namespace) {
		return nil, mismatch("is in another namespace")
	}
	lo := &liveObject{raw: it, res: resourceName(o.Kind, liveNS, o.Name), fieldManager: fieldManager,
		id: evidence.LiveObject{APIVersion: apiVersion, Kind: kind, Namespace: liveNS, Name: name}}
	var ok bool
	if lo.id.UID, ok = identifier(meta["uid"]); !ok {
		return nil, refuse.New(CodeUIDMissing, "object %d (%s): live object has no usable metadata.uid", o.Index, lo.res)
	}
	if lo.id.ResourceVersion, ok = identifier(meta["resourceVersion"]); !ok {
		return nil, refuse.New(CodeResourceVersionMissing, "object %d (%s): live object has no usable metadata.resourceVersion", o.Index, lo.res)
	}
	if _, deleting := meta["deletionTimestamp"]; deleting {
		return nil, refuse.New(CodeObjectTerminating, "object %d (%s): live object is being deleted (metadata.deletionTimestamp is set)", o.Index, lo.res).
			WithHint("a finalizer holds the object; it will disappear, so the apply did not converge to a lasting object")
	}
	var err error
	if lo.managers, lo.ours, err = parseManagedFields(meta["managedFields"], fieldManager); err != nil {
		return nil, refuse.Wrap(CodeManagedFieldsInvalid, err, "object %d (%s): metadata.managedFields", o.Index, lo.res)
	}
	return lo, nil
}

// group is the API group of an apiVersion ("" for the core group's "v1").
func group(apiVersion string) string {
	g, _, found := strings.Cut(apiVersion, "/")
	if !found {
		return ""
	}
	return g
}

// identifier accepts a non-empty string of at most maxIdentifierBytes without control characters.
func identifier(v any) (string, bool) {
	s, ok := v.(string)
	if !ok || s == "" || len(s) > maxIdentifierBytes {
		return "", false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return "", false
		}
	}
	return s, true
}
