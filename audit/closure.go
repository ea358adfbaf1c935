package audit

import (
	"fmt"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// subjectKind re-hashes the subject and tells a receipt from a preflight report by its schema; it
// returns the kind and the subject's descriptor (its media type, digest and size). The subject is
// parsed once: the parse that finds its schema is checked as the record that schema names and kept
// by the memo for the closure walk and every check (a subject that fails that check is left for
// the closure to read and refuse, with the store's own refusal).
func (a *auditor) subjectKind(d digest.Digest) (string, evidence.Descriptor, error) {
	b, err := a.src.Get(d)
	if err != nil {
		return "", evidence.Descriptor{}, err
	}
	p, err := evidence.Parse(b)
	if err != nil {
		return "", evidence.Descriptor{}, refuse.Wrap(CodeSubject, err, "object %s is not a json record", d)
	}
	if !p.IsObject() {
		return "", evidence.Descriptor{}, refuse.New(CodeSubject, "object %s is not a json object", d)
	}
	schema, _ := p.String("schema")
	root := evidence.Descriptor{Digest: d, Size: int64(len(b))}
	var kind string
	switch schema {
	case evidence.SchemaReceipt:
		kind, root.MediaType = KindReceipt, evidence.MediaTypeReceipt
	case evidence.SchemaPreflight:
		kind, root.MediaType = KindPreflight, evidence.MediaTypePreflight
	case evidence.SchemaLiveAudit:
		kind, root.MediaType = KindLiveAudit, evidence.MediaTypeLiveAudit
	default:
		return "", evidence.Descriptor{}, refuse.New(CodeSubject, "object %s is neither a receipt nor a preflight report", d)
	}
	if r, err := p.Record(root.MediaType); err == nil {
		a.src.seed(root, b, r)
	}
	return kind, root, nil
}

// closure re-hashes every object reachable from root, checks every descriptor's size against
// the object and every record's canonical form, schema and closed shape, and reports the first
// finding. It keeps walking after a finding so Objects and Bytes count what could be read.
func (a *auditor) closure(root evidence.Descriptor) {
	seen := map[digest.Digest]bool{}
	var first error
	var walk func(d evidence.Descriptor)
	walk = func(d evidence.Descriptor) {
		if seen[d.Digest] {
			return
		}
		seen[d.Digest] = true
		b, err := a.src.GetDescriptor(d)
		if err != nil {
			if first == nil {
				first = err
			}
			return
		}
		a.report.Objects++
		a.report.Bytes += int64(len(b))
		if _, isRecord := evidence.RecordSchema(d.MediaType); !isRecord {
			return
		}
		r, err := a.src.record(d)
		if err != nil {
			if first == nil {
				first = err
			}
			return
		}
		children, err := r.Descriptors()
		if err != nil {
			if first == nil {
				first = err
			}
			return
		}
		for _, c := range children {
			walk(c)
		}
	}
	walk(root)
	if first != nil {
		a.fail("closure", first)
		return
	}
	a.pass("closure", "%d objects, %d bytes: every object re-hashed, sizes and record forms checked", a.report.Objects, a.report.Bytes)
}

// load reads the record d names into v: d must carry mediaType, the object must re-hash, match
// d's size, be canonical, carry mediaType's schema and decode into v's closed shape.
func (a *auditor) load(d evidence.Descriptor, mediaType string, v any) error {
	if d.MediaType != mediaType {
		return refuse.New(CodeMediaType, "descriptor of %s has media type %q where %q is required", d.Digest, d.MediaType, mediaType)
	}
	r, err := a.src.record(d)
	if err != nil {
		return err
	}
	return r.Decode(v)
}

// blob reads the raw blob d names: d must carry mediaType and the object must re-hash and match d's size.
func (a *auditor) blob(d evidence.Descriptor, mediaType string) ([]byte, error) {
	if d.MediaType != mediaType {
		return nil, refuse.New(CodeMediaType, "descriptor of %s has media type %q where %q is required", d.Digest, d.MediaType, mediaType)
	}
	return a.src.GetDescriptor(d)
}

// targetOf checks that the subject's target is want.
func (a *auditor) targetOf(root evidence.Descriptor, want digest.Digest) (string, error) {
	if a.report.Kind != KindReceipt {
		return "", refuse.New(CodeSubject, "a receipt.audit command names %s, which is a %s, not a receipt", root.Digest, a.report.Kind)
	}
	r, err := a.src.record(root)
	if err != nil {
		return "", err
	}
	if target, _ := r.String("target"); digest.Digest(target) != want {
		return "", refuse.New(CodeTarget, "%s %s binds target %s, the audit command names %s", a.report.Kind, root.Digest, refuse.Ident(target), want)
	}
	return fmt.Sprintf("the %s binds the audit command's target %s", a.report.Kind, want), nil
}
