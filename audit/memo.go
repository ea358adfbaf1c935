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
type memo struct {
	Source
	raw   map[digest.Digest][]byte
	descs map[evidence.Descriptor][]byte
}

func newMemo(src Source) *memo {
	if m, ok := src.(*memo); ok {
		return m
	}
	return &memo{Source: src, raw: map[digest.Digest][]byte{}, descs: map[evidence.Descriptor][]byte{}}
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
	b, err := m.Source.GetDescriptor(d)
	if err == nil {
		m.descs[d] = b
	}
	return b, err
}
