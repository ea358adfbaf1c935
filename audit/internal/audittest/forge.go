package audittest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
)

// Forger rewrites evidence as an attacker with write access to a store would: it stores new
// bytes for an object under their own digest, then rewrites, canonically, every record that
// refers to it, up to the root, and (with Publish) the index, so that every object hashes fine
// under its name and every link resolves. Only the auditor's semantic checks can then tell.
//
// Besides descriptors it follows the two references the store holds by bare digest: an apply
// command names its preflight report, and the command file input names the raw command file,
// whose canonical form is the command record. A rewritten preflight therefore yields a rewritten
// apply command, command file and command file input, as a forger would produce them.
type Forger struct {
	t    testing.TB
	root string
	repl map[digest.Digest][]byte
	memo map[digest.Digest]evidence.Descriptor
}

// NewForger forges in the store at root.
func NewForger(t testing.TB, root string) *Forger {
	return &Forger{t: t, root: root, repl: map[digest.Digest][]byte{}}
}

// Replace makes b the content of every reference to old at the next Rewrite. b is stored
// verbatim (it need not be canonical) and is not descended into.
func (f *Forger) Replace(old digest.Digest, b []byte) evidence.Descriptor {
	f.repl[old] = b
	return evidence.Descriptor{Digest: evidence.FromBytes(b), Size: int64(len(b))}
}

// Read returns the stored bytes of d without any check: the forger reads what is there.
func (f *Forger) Read(d digest.Digest) []byte {
	b, err := os.ReadFile(BlobPath(f.root, d))
	if err != nil {
		f.t.Fatalf("forger: read %s: %v", d, err)
	}
	return b
}

// Edit decodes the record d names into a T, applies edit, and replaces d with the canonical form
// of the result (evidence.MarshalRecord); it returns the descriptor of the new record.
func Edit[T any](f *Forger, d evidence.Descriptor, edit func(*T)) evidence.Descriptor {
	f.t.Helper()
	var v T
	if err := evidence.DecodeRecord(d.MediaType, f.Read(d.Digest), &v); err != nil {
		f.t.Fatalf("forger: decode %s: %v", d.Digest, err)
	}
	edit(&v)
	b, err := evidence.MarshalRecord(&v)
	if err != nil {
		f.t.Fatalf("forger: marshal %T: %v", v, err)
	}
	nd := f.Replace(d.Digest, b)
	nd.MediaType = d.MediaType
	return nd
}

// Rewrite applies the pending replacements below root and returns root's new descriptor.
func (f *Forger) Rewrite(root evidence.Descriptor) evidence.Descriptor {
	f.memo = map[digest.Digest]evidence.Descriptor{}
	nd := f.next(root)
	f.repl = map[digest.Digest][]byte{}
	return nd
}

func (f *Forger) next(d evidence.Descriptor) evidence.Descriptor {
	if m, ok := f.memo[d.Digest]; ok {
		return evidence.Descriptor{MediaType: d.MediaType, Digest: m.Digest, Size: m.Size}
	}
	f.memo[d.Digest] = d
	b, replaced := f.repl[d.Digest]
	if !replaced {
		var err error
		if b, err = os.ReadFile(BlobPath(f.root, d.Digest)); err != nil {
			return d // gone: nothing to re-point
		}
		if _, isRecord := evidence.RecordSchema(d.MediaType); isRecord {
			b = f.patch(d.MediaType, b)
		}
	}
	nd := evidence.Descriptor{MediaType: d.MediaType, Digest: evidence.FromBytes(b), Size: int64(len(b))}
	if nd.Digest != d.Digest {
		f.put(b)
	}
	f.memo[d.Digest] = nd
	return nd
}

// put stores b under its digest unless an object of that name exists.
func (f *Forger) put(b []byte) {
	p := BlobPath(f.root, evidence.FromBytes(b))
	if _, err := os.Lstat(p); err == nil {
		return
	}
	if err := WriteObject(p, b); err != nil {
		f.t.Fatalf("forger: %v", err)
	}
}

// patch re-points the references of record b and returns its new canonical form, or b itself
// when nothing it refers to changed.
func (f *Forger) patch(mediaType string, b []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return b
	}
	changed := false
	if m, ok := v.(map[string]any); ok {
		switch mediaType {
		case evidence.MediaTypeCommand:
			changed = f.commandPreflight(m)
		case evidence.MediaTypeInput:
			// Before the walk: a canonical command file is the very object the command record
			// is, and the walk would re-point its descriptor alone.
			changed = f.commandFileInput(m)
		}
	}
	changed = f.walk(v) || changed
	if !changed {
		return b
	}
	out, err := evidence.MarshalRecord(v)
	if err != nil {
		f.t.Fatalf("forger: re-marshal %s record: %v", mediaType, err)
	}
	return out
}

// walk re-points every descriptor inside v, in key order.
func (f *Forger) walk(v any) bool {
	changed := false
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			changed = f.walk(e) || changed
		}
	case map[string]any:
		if d, ok := asDescriptor(x); ok {
			nd := f.next(d)
			if nd != d {
				x["digest"], x["size"] = string(nd.Digest), json.Number(fmt.Sprint(nd.Size))
				return true
			}
			return false
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			changed = f.walk(x[k]) || changed
		}
	}
	return changed
}

func asDescriptor(m map[string]any) (evidence.Descriptor, bool) {
	if len(m) != 3 {
		return evidence.Descriptor{}, false
	}
	mt, ok1 := m["mediaType"].(string)
	dg, ok2 := m["digest"].(string)
	sz, ok3 := m["size"].(json.Number)
	if !ok1 || !ok2 || !ok3 {
		return evidence.Descriptor{}, false
	}
	n, err := sz.Int64()
	if err != nil {
		return evidence.Descriptor{}, false
	}
	if _, err := evidence.ParseDigest(dg); err != nil {
		return evidence.Descriptor{}, false
	}
	return evidence.Descriptor{MediaType: mt, Digest: digest.Digest(dg), Size: n}, true
}

// commandPreflight re-points an apply command's bare preflight digest.
func (f *Forger) commandPreflight(m map[string]any) bool {
	p, ok := m["preflight"].(string)
	if !ok {
		return false
	}
	pd, err := evidence.ParseDigest(p)
	if err != nil {
		return false
	}
	b, err := os.ReadFile(filepath.Join(f.root, "index", evidence.IndexPreflights, pd.Encoded()))
	var d evidence.Descriptor
	if err != nil || evidence.DecodeStrict(b, &d) != nil {
		return false
	}
	nd := f.next(d)
	if nd.Digest == pd {
		return false
	}
	m["preflight"] = string(nd.Digest)
	return true
}

// commandFileInput re-points a command file input at a command file holding the rewritten
// command record (its canonical bytes are a command file that canonicalizes to themselves).
func (f *Forger) commandFileInput(m map[string]any) bool {
	if m["role"] != evidence.RoleCommandFile {
		return false
	}
	c, ok := m["content"].(map[string]any)
	if !ok {
		return false
	}
	cd, ok := asDescriptor(c)
	if !ok {
		return false
	}
	raw, err := os.ReadFile(BlobPath(f.root, cd.Digest))
	if err != nil {
		return false
	}
	canon, err := evidence.Canonicalize(raw)
	if err != nil {
		return false
	}
	old := evidence.Descriptor{MediaType: evidence.MediaTypeCommand, Digest: evidence.FromBytes(canon), Size: int64(len(canon))}
	if _, err := os.Stat(BlobPath(f.root, old.Digest)); err != nil {
		return false
	}
	nd := f.next(old)
	if nd.Digest == old.Digest {
		return false
	}
	nb := f.Read(nd.Digest)
	f.put(nb)
	size := json.Number(fmt.Sprint(len(nb)))
	c["digest"], c["size"] = string(nd.Digest), size
	m["digest"], m["size"] = string(nd.Digest), size
	return true
}

// Publish points the index at a forged root as the ceremony would have: a receipt under its apply
// command, with its intent and preflight; a preflight report under its own digest. The root need
// not be canonical.
func (f *Forger) Publish(root evidence.Descriptor) {
	f.t.Helper()
	if err := f.publish(root); err != nil {
		f.t.Fatalf("forger: publish: %v", err)
	}
}

// TryPublish is Publish for a root that may not decode at all (a fuzzed one): it publishes what
// it can and reports whether the root decoded.
func (f *Forger) TryPublish(root evidence.Descriptor) bool { return f.publish(root) == nil }

func (f *Forger) publish(root evidence.Descriptor) error {
	switch root.MediaType {
	case evidence.MediaTypeReceipt:
		var rc evidence.Receipt
		if err := evidence.DecodeStrict(f.Read(root.Digest), &rc); err != nil {
			return err
		}
		f.SetIndex(evidence.IndexReceipts, rc.Command.Digest, root)
		f.SetIndex(evidence.IndexIntents, rc.Command.Digest, rc.Intent)
		f.SetIndex(evidence.IndexPreflights, rc.Preflight.Digest, rc.Preflight)
	case evidence.MediaTypePreflight:
		f.SetIndex(evidence.IndexPreflights, root.Digest, root)
	default:
		return fmt.Errorf("cannot publish a %s", root.MediaType)
	}
	return nil
}

// SetIndex writes the index entry kind/key, replacing any.
func (f *Forger) SetIndex(kind string, key digest.Digest, d evidence.Descriptor) {
	b, err := evidence.MarshalRecord(d)
	if err != nil {
		f.t.Fatalf("forger: %v", err)
	}
	if err := WriteObject(filepath.Join(f.root, "index", kind, key.Encoded()), b); err != nil {
		f.t.Fatalf("forger: %v", err)
	}
}
