package store

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/refuse"
)

// The attestation index is the one two-level index kind:
// index/attestations/<hex of subject>/<hex of bundle> holds the canonical descriptor of the
// statement record that bundle signs (docs/attestations.md). Its directories are made on first
// use, 0700 like every store directory, so a store made before attestations existed stays valid.

// AttestationEntry is one attestation of a subject.
type AttestationEntry struct {
	Subject   digest.Digest       `json:"subject"`
	Bundle    digest.Digest       `json:"bundle"`
	Statement evidence.Descriptor `json:"statement"`
}

// PutAttestation records that bundle, which signs the statement record, attests subject. Both
// objects must already be stored. Recording the same entry again is a no-op; another statement
// under the same subject and bundle is refused with CodeIndexConflict.
func (s *Store) PutAttestation(subject, bundle digest.Digest, statement evidence.Descriptor) error {
	for _, d := range []digest.Digest{subject, bundle, statement.Digest} {
		if _, err := evidence.ParseDigest(string(d)); err != nil {
			return err
		}
	}
	b, err := evidence.MarshalRecord(statement)
	if err != nil {
		return err
	}
	dir := filepath.Join(s.root, "index", evidence.IndexAttestations)
	for _, d := range []string{dir, filepath.Join(dir, subject.Encoded())} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return refuse.Wrap(CodeStoreIO, err, "create attestation index directory")
		}
		if err := checkDir(d, "index/"+evidence.IndexAttestations); err != nil {
			return err
		}
	}
	err = s.commit(filepath.Join(dir, subject.Encoded(), bundle.Encoded()), b)
	if errors.Is(err, errExists) {
		es, lerr := s.ListAttestations(subject)
		if lerr != nil {
			return lerr
		}
		for _, e := range es {
			if e.Bundle == bundle && e.Statement == statement {
				return nil
			}
		}
		return refuse.New(CodeIndexConflict, "attestation index entry %s/%s exists with another statement", subject.Encoded(), bundle.Encoded())
	}
	return err
}

// ListAttestations returns every attestation entry of subject, sorted by bundle digest; none
// when the subject has no attestation. Each entry is held to the rules of GetIndex.
func (s *Store) ListAttestations(subject digest.Digest) ([]AttestationEntry, error) {
	if _, err := evidence.ParseDigest(string(subject)); err != nil {
		return nil, err
	}
	rel := "index/" + evidence.IndexAttestations
	dir := filepath.Join(s.root, "index", evidence.IndexAttestations)
	for _, d := range []string{dir, filepath.Join(dir, subject.Encoded())} {
		if _, err := os.Lstat(d); errors.Is(err, os.ErrNotExist) {
			return []AttestationEntry{}, nil
		}
		if err := checkDir(d, rel); err != nil {
			return nil, err
		}
	}
	ents, err := os.ReadDir(filepath.Join(dir, subject.Encoded()))
	if err != nil {
		return nil, refuse.Wrap(CodeStoreIO, err, "list attestations of %s", subject)
	}
	out := []AttestationEntry{}
	for _, e := range ents {
		bundle, err := evidence.ParseDigest("sha256:" + e.Name())
		if err != nil {
			return nil, refuse.Wrap(CodeIndexCorrupt, err, "attestation index of %s has a stray entry", subject)
		}
		d, err := s.readEntry(filepath.Join(dir, subject.Encoded(), e.Name()), bundle)
		if err != nil {
			return nil, refuse.Wrap(CodeIndexCorrupt, err, "attestation index entry %s/%s", subject.Encoded(), e.Name())
		}
		out = append(out, AttestationEntry{Subject: subject, Bundle: bundle, Statement: d})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Bundle < out[j].Bundle })
	return out, nil
}

// readEntry reads one index entry under the object file rules and decodes its canonical
// descriptor.
func (s *Store) readEntry(p string, name digest.Digest) (evidence.Descriptor, error) {
	f, _, err := openObject(p, name)
	if err != nil {
		return evidence.Descriptor{}, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxIndexEntry+1))
	f.Close()
	if err != nil {
		return evidence.Descriptor{}, refuse.Wrap(CodeStoreIO, err, "read index entry")
	}
	if len(b) > maxIndexEntry {
		return evidence.Descriptor{}, refuse.New(CodeIndexCorrupt, "index entry is larger than %d bytes", maxIndexEntry)
	}
	var d evidence.Descriptor
	if err := evidence.DecodeStrict(b, &d); err != nil {
		return evidence.Descriptor{}, err
	}
	if c, err := evidence.Canonicalize(b); err != nil || string(c) != string(b) {
		return evidence.Descriptor{}, refuse.New(CodeIndexCorrupt, "index entry is not canonical")
	}
	return d, nil
}
