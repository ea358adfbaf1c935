package audit

import (
	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
)

// memo is the auditor's view of its Source: every object is read (and re-hashed, and a record's
// canonical form, schema and shape checked by the store) once per audit, however many checks read
// it. The closure walk reads every object first; the chain, lock, plan and convergence checks
// then get the same bytes without reading the store again. Only successful reads are kept, so a
// failing object fails again, with the same error, wherever it is read. The bytes are shared:
// no check may modify what it is given.
//
// A record is also parsed once per audit: the closure walk lists its descriptors and every check
// that loads it decodes from the same evidence.Record, never modified once parsed.
type memo struct {
	Source
	raw     map[digest.Digest][]byte
	descs   map[evidence.Descriptor][]byte
	records map[evidence.Descriptor]*evidence.Record
}

// recordSource is a Source whose descriptor read also returns the record its check parsed
// (*store.Store, and the OCI layout that audit --layout reads): the memo keeps that parse
// instead of making its own.
type recordSource interface {
	GetRecord(d evidence.Descriptor) ([]byte, *evidence.Record, error)
}

func newMemo(src Source) *memo {
	if m, ok := src.(*memo); ok {
		return m
	}
	return &memo{Source: src, raw: map[digest.Digest][]byte{}, descs: map[evidence.Descriptor][]byte{},
		records: map[evidence.Descriptor]*evidence.Record{}}
}

func (m *memo) Get(d digest.Digest) ([]byte, error) {
	if b, ok := m.raw[d]; ok {
		return b, nil
	}
	b, err := m.Source.Get(d)
	if err == nil {
		m.raw[d] = b
	}
	return b, err
}

func (m *memo) GetDescriptor(d evidence.Descriptor) ([]byte, error) {
	if b, ok := m.descs[d]; ok {
		return b, nil
	}
	if rs, ok := m.Source.(recordSource); ok {
		b, r, err := rs.GetRecord(d)
		if err == nil {
			m.descs[d] = b
			if r != nil {
				m.records[d] = r
			}
		}
		return b, err
	}
	b, err := m.Source.GetDescriptor(d)
	if err == nil {
		m.descs[d] = b
	}
	return b, err
}

// seed keeps b and r as what GetDescriptor and record give for d: b read by Get (so re-hashed to
// d.Digest), d.Size its length, and r its record as ParseRecord parses it under d.MediaType. Those
// are the checks GetRecord makes of a descriptor's read.
func (m *memo) seed(d evidence.Descriptor, b []byte, r *evidence.Record) {
	m.descs[d], m.records[d] = b, r
}

// record returns the record d names, read as GetDescriptor reads it and parsed once per audit.
// d's media type must be a record media type.
func (m *memo) record(d evidence.Descriptor) (*evidence.Record, error) {
	if r, ok := m.records[d]; ok {
		return r, nil
	}
	b, err := m.GetDescriptor(d)
	if err != nil {
		return nil, err
	}
	if r, ok := m.records[d]; ok { // parsed by the read
		return r, nil
	}
	r, err := evidence.ParseRecord(d.MediaType, b)
	if err != nil {
		return nil, err
	}
	m.records[d] = r
	return r, nil
}
